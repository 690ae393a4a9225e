// torchvision's image classifiers as mnemo graphs (see zoo.h). Each builder follows torchvision's
// module structure and names (models/alexnet.py, vgg.py, densenet.py, inception.py,
// mobilenetv2.py of torchvision 0.2x), so parameter names and shapes match a state dict.
#include "models/zoo.h"

#include <cmath>
#include <optional>
#include <sstream>

namespace mnemo {
namespace {

using Ints = std::vector<int64_t>;

struct Conv {
  int64_t out = 0;
  Ints kernel{1, 1}, stride{1, 1}, padding{0, 0};
  int64_t groups = 1;
  bool bias = false;
  int64_t dilation = 1;
};
Conv conv(int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) { return {out, {k, k}, {stride, stride}, {pad, pad}}; }
Conv conv_hw(int64_t out, int64_t kh, int64_t kw, int64_t ph, int64_t pw) { return {out, {kh, kw}, {1, 1}, {ph, pw}}; }

class Net {
 public:
  explicit Net(BuiltModel& m) : m_(m), b_(m.builder) {}

  const TensorType& type(EntryRef x) const { return b_.graph().type(x); }
  int64_t channels(EntryRef x) const { return type(x).shape.at(1); }

  // conv2d with PyTorch's weight shape [K, C/G, R, S], He-normal weights (fan in), optional bias
  // with PyTorch's default uniform(+-1/sqrt(fan_in)). Counts a layer.
  EntryRef conv2d(EntryRef x, const std::string& name, const Conv& c) {
    const int64_t cin = channels(x);
    MNEMO_CHECK(c.groups >= 1 && cin % c.groups == 0 && c.out % c.groups == 0)
        << name << ": groups " << c.groups << " must divide " << cin << " input and " << c.out << " output channels";
    const Shape w_shape{c.out, cin / c.groups, c.kernel[0], c.kernel[1]};
    const double fan_in = static_cast<double>(cin / c.groups * c.kernel[0] * c.kernel[1]);
    std::vector<EntryRef> in{x, b_.param(name + "/weight", w_shape, {ParamInit::normal, std::sqrt(2.0 / fan_in)})};
    if (c.bias) in.push_back(b_.param(name + "/bias", {c.out}, {ParamInit::uniform, 1.0 / std::sqrt(fan_in)}));
    Attrs a{{"stride", c.stride}, {"padding", c.padding}};
    if (c.groups != 1) a["groups"] = c.groups;
    if (c.dilation != 1) a["dilation"] = c.dilation;
    ++layers_;
    return b_.op("conv2d", std::move(in), std::move(a), name);
  }
  EntryRef bn(EntryRef x, const std::string& name, double eps = 1e-5) { return b_.batch_norm(x, name, 0.1, eps); }
  EntryRef relu(EntryRef x, const std::string& name) { return b_.relu(x, name); }
  EntryRef relu6(EntryRef x, const std::string& name) { return b_.op("clip", {x}, {{"min", 0.0}, {"max", 6.0}}, name); }
  EntryRef max_pool(EntryRef x, const std::string& name, int64_t k, int64_t stride, int64_t pad = 0) {
    return b_.op("max_pool2d", {x}, {{"kernel", k}, {"stride", stride}, {"padding", pad}}, name);
  }
  EntryRef avg_pool(EntryRef x, const std::string& name, int64_t k, int64_t stride, int64_t pad = 0) {
    return b_.op("avg_pool2d", {x}, {{"kernel", k}, {"stride", stride}, {"padding", pad}}, name);
  }
  EntryRef concat(std::vector<EntryRef> xs, const std::string& name) {
    if (xs.size() == 1) return xs[0];
    return b_.op("concat", std::move(xs), {{"axis", int64_t{1}}}, name);
  }
  EntryRef linear(EntryRef x, const std::string& name, int64_t out) {
    ++layers_;
    return b_.fully_connected(x, name, out);
  }
  // torchvision's AdaptiveAvgPool2d((s, s)): an identity when the map is s x s, an average pool
  // with kernel = stride = H/s when H and W are whole multiples of s; else an error.
  EntryRef adaptive_avg_pool(EntryRef x, const std::string& name, int64_t s, const std::string& model) {
    const Shape& sh = type(x).shape;
    if (s == 1) return b_.op("global_avg_pool", {x}, {}, name);
    if (sh[2] == s && sh[3] == s) return x;
    MNEMO_CHECK(sh[2] % s == 0 && sh[3] % s == 0 && sh[2] / s == sh[3] / s)
        << model << ": the feature map before the classifier is " << sh[2] << "x" << sh[3]
        << "; torchvision's adaptive pool to " << s << "x" << s << " is built only for whole multiples of " << s
        << " (e.g. 224x224 inputs)";
    return avg_pool(x, name, sh[2] / s, sh[2] / s);
  }
  EntryRef flatten(EntryRef x, const std::string& name) { return b_.op("flatten", {x}, {}, name); }
  EntryRef dropout(EntryRef x, const std::string& name, double p) { return b_.dropout(x, name, p); }

  void finish(EntryRef logits, EntryRef labels) {
    m_.logits = logits;
    m_.loss = b_.op("softmax_cross_entropy", {logits, labels}, {}, "loss");
    m_.all_logits = {logits};
    m_.layers = layers_;
  }

  BuiltModel& m_;
  ModelBuilder& b_;
  int layers_ = 0;
};

std::string idx(const std::string& prefix, int i) { return prefix + "/" + std::to_string(i); }

// ---- AlexNet -----------------------------------------------------------------------------------
void alexnet(Net& n, EntryRef x, EntryRef y, int64_t classes) {
  struct Layer { int index; Conv c; bool pool_after; };
  const Layer layers[] = {{0, {64, {11, 11}, {4, 4}, {2, 2}, 1, true}, true},
                          {3, {192, {5, 5}, {1, 1}, {2, 2}, 1, true}, true},
                          {6, {384, {3, 3}, {1, 1}, {1, 1}, 1, true}, false},
                          {8, {256, {3, 3}, {1, 1}, {1, 1}, 1, true}, false},
                          {10, {256, {3, 3}, {1, 1}, {1, 1}, 1, true}, true}};
  EntryRef h = x;
  for (const Layer& l : layers) {
    h = n.relu(n.conv2d(h, idx("features", l.index), l.c), idx("features", l.index + 1));
    if (l.pool_after) h = n.max_pool(h, idx("features", l.index + 2), 3, 2);
  }
  h = n.flatten(n.adaptive_avg_pool(h, "avgpool", 6, "alexnet"), "flatten");
  h = n.relu(n.linear(n.dropout(h, "classifier/0", 0.5), "classifier/1", 4096), "classifier/2");
  h = n.relu(n.linear(n.dropout(h, "classifier/3", 0.5), "classifier/4", 4096), "classifier/5");
  n.finish(n.linear(h, "classifier/6", classes), y);
}

// ---- VGG ---------------------------------------------------------------------------------------
void vgg(Net& n, EntryRef x, EntryRef y, int depth, bool batch_norm, int64_t classes) {
  std::vector<int> cfg;  // 0: max pool
  switch (depth) {
    case 11: cfg = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}; break;
    case 13: cfg = {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}; break;
    case 16: cfg = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}; break;
    case 19: cfg = {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0}; break;
    default: MNEMO_FAIL() << "model.depth: VGG depths are 11, 13, 16 and 19, got " << depth;
  }
  EntryRef h = x;
  int i = 0;  // torchvision's index in `features`
  for (int v : cfg) {
    if (v == 0) {
      h = n.max_pool(h, idx("features", i++), 2, 2);
      continue;
    }
    Conv c = conv(v, 3, 1, 1);
    c.bias = true;
    h = n.conv2d(h, idx("features", i++), c);
    if (batch_norm) h = n.bn(h, idx("features", i++));
    h = n.relu(h, idx("features", i++));
  }
  h = n.flatten(n.adaptive_avg_pool(h, "avgpool", 7, "vgg"), "flatten");
  h = n.dropout(n.relu(n.linear(h, "classifier/0", 4096), "classifier/1"), "classifier/2", 0.5);
  h = n.dropout(n.relu(n.linear(h, "classifier/3", 4096), "classifier/4"), "classifier/5", 0.5);
  n.finish(n.linear(h, "classifier/6", classes), y);
}

// ---- DenseNet ----------------------------------------------------------------------------------
void densenet(Net& n, EntryRef x, EntryRef y, const ZooConfig& c) {
  int64_t growth = 32, init = 64, bn_size = 4;
  std::vector<int> blocks;
  switch (c.blocks.empty() ? (c.depth ? c.depth : 121) : 0) {
    case 0: blocks = c.blocks; break;
    case 121: blocks = {6, 12, 24, 16}; break;
    case 161: blocks = {6, 12, 36, 24}, growth = 48, init = 96; break;
    case 169: blocks = {6, 12, 32, 32}; break;
    case 201: blocks = {6, 12, 48, 32}; break;
    default: MNEMO_FAIL() << "model.depth: DenseNet depths are 121, 161, 169 and 201 (or give model.blocks), got " << c.depth;
  }
  if (c.growth) growth = c.growth;
  if (c.init_features) init = c.init_features;
  if (c.bn_size) bn_size = c.bn_size;
  for (int b : blocks) MNEMO_CHECK(b >= 1) << "model.blocks: every dense block needs at least one layer";
  MNEMO_CHECK(growth >= 1 && init >= 1 && bn_size >= 1) << "model.growth, init_features and bn_size must be positive";
  const int64_t classes = c.classes;
  EntryRef h = n.conv2d(x, "features/conv0", conv(init, 7, 2, 3));
  h = n.relu(n.bn(h, "features/norm0"), "features/relu0");
  h = n.max_pool(h, "features/pool0", 3, 2, 1);
  for (size_t s = 0; s < blocks.size(); ++s) {
    const std::string block = "features/denseblock" + std::to_string(s + 1);
    std::vector<EntryRef> feats{h};
    for (int l = 1; l <= blocks[s]; ++l) {
      const std::string p = block + "/denselayer" + std::to_string(l);
      // torchvision's _DenseLayer: concat(all earlier features) -> norm1-relu1-conv1 (1x1) ->
      // norm2-relu2-conv2 (3x3, growth channels).
      EntryRef in = n.concat(feats, p + "/cat");
      EntryRef t = n.conv2d(n.relu(n.bn(in, p + "/norm1"), p + "/relu1"), p + "/conv1", conv(bn_size * growth, 1));
      t = n.conv2d(n.relu(n.bn(t, p + "/norm2"), p + "/relu2"), p + "/conv2", conv(growth, 3, 1, 1));
      feats.push_back(t);
    }
    h = n.concat(feats, block + "/cat");
    if (s + 1 < blocks.size()) {
      const std::string t = "features/transition" + std::to_string(s + 1);
      h = n.conv2d(n.relu(n.bn(h, t + "/norm"), t + "/relu"), t + "/conv", conv(n.channels(h) / 2, 1));
      h = n.avg_pool(h, t + "/pool", 2, 2);
    }
  }
  h = n.relu(n.bn(h, "features/norm5"), "relu");
  h = n.adaptive_avg_pool(h, "avgpool", 1, "densenet");
  n.finish(n.linear(h, "classifier", classes), y);
}

// ---- Inception-v3 ------------------------------------------------------------------------------
struct Inception {
  Net& n;
  // torchvision's BasicConv2d: conv (no bias) - batch norm (eps 0.001) - relu.
  EntryRef basic(EntryRef x, const std::string& name, const Conv& c) {
    return n.relu(n.bn(n.conv2d(x, name + "/conv", c), name + "/bn", 0.001), name + "/relu");
  }
  EntryRef pool_branch(EntryRef x, const std::string& name, int64_t out) {
    return basic(n.avg_pool(x, name + "_avgpool", 3, 1, 1), name, conv(out, 1));
  }
  EntryRef a(EntryRef x, const std::string& p, int64_t pool_features) {
    EntryRef b1 = basic(x, p + "/branch1x1", conv(64, 1));
    EntryRef b5 = basic(basic(x, p + "/branch5x5_1", conv(48, 1)), p + "/branch5x5_2", conv(64, 5, 1, 2));
    EntryRef b3 = basic(x, p + "/branch3x3dbl_1", conv(64, 1));
    b3 = basic(b3, p + "/branch3x3dbl_2", conv(96, 3, 1, 1));
    b3 = basic(b3, p + "/branch3x3dbl_3", conv(96, 3, 1, 1));
    return n.concat({b1, b5, b3, pool_branch(x, p + "/branch_pool", pool_features)}, p + "/cat");
  }
  EntryRef b(EntryRef x, const std::string& p) {
    EntryRef b3 = basic(x, p + "/branch3x3", conv(384, 3, 2));
    EntryRef bd = basic(x, p + "/branch3x3dbl_1", conv(64, 1));
    bd = basic(bd, p + "/branch3x3dbl_2", conv(96, 3, 1, 1));
    bd = basic(bd, p + "/branch3x3dbl_3", conv(96, 3, 2));
    return n.concat({b3, bd, n.max_pool(x, p + "/branch_pool", 3, 2)}, p + "/cat");
  }
  EntryRef c(EntryRef x, const std::string& p, int64_t c7) {
    EntryRef b1 = basic(x, p + "/branch1x1", conv(192, 1));
    EntryRef b7 = basic(x, p + "/branch7x7_1", conv(c7, 1));
    b7 = basic(b7, p + "/branch7x7_2", conv_hw(c7, 1, 7, 0, 3));
    b7 = basic(b7, p + "/branch7x7_3", conv_hw(192, 7, 1, 3, 0));
    EntryRef bd = basic(x, p + "/branch7x7dbl_1", conv(c7, 1));
    bd = basic(bd, p + "/branch7x7dbl_2", conv_hw(c7, 7, 1, 3, 0));
    bd = basic(bd, p + "/branch7x7dbl_3", conv_hw(c7, 1, 7, 0, 3));
    bd = basic(bd, p + "/branch7x7dbl_4", conv_hw(c7, 7, 1, 3, 0));
    bd = basic(bd, p + "/branch7x7dbl_5", conv_hw(192, 1, 7, 0, 3));
    return n.concat({b1, b7, bd, pool_branch(x, p + "/branch_pool", 192)}, p + "/cat");
  }
  EntryRef d(EntryRef x, const std::string& p) {
    EntryRef b3 = basic(basic(x, p + "/branch3x3_1", conv(192, 1)), p + "/branch3x3_2", conv(320, 3, 2));
    EntryRef b7 = basic(x, p + "/branch7x7x3_1", conv(192, 1));
    b7 = basic(b7, p + "/branch7x7x3_2", conv_hw(192, 1, 7, 0, 3));
    b7 = basic(b7, p + "/branch7x7x3_3", conv_hw(192, 7, 1, 3, 0));
    b7 = basic(b7, p + "/branch7x7x3_4", conv(192, 3, 2));
    return n.concat({b3, b7, n.max_pool(x, p + "/branch_pool", 3, 2)}, p + "/cat");
  }
  EntryRef e(EntryRef x, const std::string& p) {
    EntryRef b1 = basic(x, p + "/branch1x1", conv(320, 1));
    EntryRef b3 = basic(x, p + "/branch3x3_1", conv(384, 1));
    b3 = n.concat({basic(b3, p + "/branch3x3_2a", conv_hw(384, 1, 3, 0, 1)),
                   basic(b3, p + "/branch3x3_2b", conv_hw(384, 3, 1, 1, 0))},
                  p + "/branch3x3_cat");
    EntryRef bd = basic(x, p + "/branch3x3dbl_1", conv(448, 1));
    bd = basic(bd, p + "/branch3x3dbl_2", conv(384, 3, 1, 1));
    bd = n.concat({basic(bd, p + "/branch3x3dbl_3a", conv_hw(384, 1, 3, 0, 1)),
                   basic(bd, p + "/branch3x3dbl_3b", conv_hw(384, 3, 1, 1, 0))},
                  p + "/branch3x3dbl_cat");
    return n.concat({b1, b3, bd, pool_branch(x, p + "/branch_pool", 192)}, p + "/cat");
  }
  // InceptionAux: avg pool 5/3 - BasicConv2d 1x1 (128) - BasicConv2d 5x5 (768) - adaptive avg
  // pool to 1x1 - fc.
  EntryRef aux(EntryRef x, int64_t classes) {
    EntryRef h = n.avg_pool(x, "AuxLogits/avgpool", 5, 3);
    h = basic(h, "AuxLogits/conv0", conv(128, 1));
    h = basic(h, "AuxLogits/conv1", conv(768, 5));
    h = n.adaptive_avg_pool(h, "AuxLogits/pool", 1, "inception_v3 aux");
    return n.linear(h, "AuxLogits/fc", classes);
  }
};

void inception_v3(Net& n, EntryRef x, EntryRef y, bool aux_logits, int64_t classes) {
  const Shape& s = n.type(x).shape;
  MNEMO_CHECK(s[2] >= 75 && s[3] >= 75) << "inception_v3 needs inputs of at least 75x75 (299x299 is standard), got "
                                         << s[2] << "x" << s[3];
  Inception inc{n};
  EntryRef h = inc.basic(x, "Conv2d_1a_3x3", conv(32, 3, 2));
  h = inc.basic(h, "Conv2d_2a_3x3", conv(32, 3));
  h = inc.basic(h, "Conv2d_2b_3x3", conv(64, 3, 1, 1));
  h = n.max_pool(h, "maxpool1", 3, 2);
  h = inc.basic(h, "Conv2d_3b_1x1", conv(80, 1));
  h = inc.basic(h, "Conv2d_4a_3x3", conv(192, 3));
  h = n.max_pool(h, "maxpool2", 3, 2);
  h = inc.a(h, "Mixed_5b", 32);
  h = inc.a(h, "Mixed_5c", 64);
  h = inc.a(h, "Mixed_5d", 64);
  h = inc.b(h, "Mixed_6a");
  h = inc.c(h, "Mixed_6b", 128);
  h = inc.c(h, "Mixed_6c", 160);
  h = inc.c(h, "Mixed_6d", 160);
  h = inc.c(h, "Mixed_6e", 192);
  std::optional<EntryRef> aux;
  if (aux_logits && n.b_.training()) aux = inc.aux(h, classes);  // as torchvision: no auxiliary output in evaluation
  h = inc.d(h, "Mixed_7a");
  h = inc.e(h, "Mixed_7b");
  h = inc.e(h, "Mixed_7c");
  h = n.dropout(n.adaptive_avg_pool(h, "avgpool", 1, "inception_v3"), "dropout", 0.5);
  n.finish(n.linear(h, "fc", classes), y);
  if (aux) {
    // torchvision's reference training: loss = main + 0.4 * aux.
    ModelBuilder& b = n.b_;
    const EntryRef aux_loss = b.op("softmax_cross_entropy", {*aux, y}, {}, "aux_loss");
    const TensorType& lt = n.type(aux_loss);
    const EntryRef w = b.op("constant", {}, {{"shape", Ints(lt.shape.begin(), lt.shape.end())},
                                              {"dtype", std::string(dtype_name(lt.dtype))}, {"value", 0.4}},
                            "aux_weight");
    n.m_.loss = b.op("add", {n.m_.loss, b.op("mul", {aux_loss, w}, {}, "aux_loss_scaled")}, {}, "total_loss");
  }
}

// ---- MobileNet-v2 ------------------------------------------------------------------------------
int64_t make_divisible(double v, int64_t divisor = 8) {  // torchvision's _make_divisible
  int64_t nv = std::max<int64_t>(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(nv) < 0.9 * v) nv += divisor;
  return nv;
}

void mobilenet_v2(Net& n, EntryRef x, EntryRef y, double width_mult, int64_t classes) {
  MNEMO_CHECK(width_mult > 0 && width_mult <= 16) << "model.width_mult must be in (0, 16], got " << width_mult;
  // Conv2dNormActivation: conv (no bias) - batch norm - relu6, names <p>/0, <p>/1.
  auto cbr = [&](EntryRef h, const std::string& p, const Conv& c) {
    return n.relu6(n.bn(n.conv2d(h, p + "/0", c), p + "/1"), p + "/2");
  };
  const int settings[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                              {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t input = make_divisible(32 * width_mult);
  const int64_t last = make_divisible(1280 * std::max(1.0, width_mult));
  EntryRef h = cbr(x, "features/0", conv(input, 3, 2, 1));
  int f = 1;
  for (const auto& st : settings) {
    const int64_t out = make_divisible(st[1] * width_mult);
    for (int i = 0; i < st[2]; ++i, ++f) {
      const int64_t stride = i == 0 ? st[3] : 1, hidden = static_cast<int64_t>(std::lround(input * st[0]));
      const std::string p = idx("features", f) + "/conv";
      EntryRef t = h;
      int j = 0;
      if (st[0] != 1) t = cbr(t, idx(p, j++), conv(hidden, 1));
      Conv dw = conv(hidden, 3, stride, 1);
      dw.groups = hidden;
      t = cbr(t, idx(p, j++), dw);
      t = n.bn(n.conv2d(t, idx(p, j), conv(out, 1)), idx(p, j + 1));
      h = stride == 1 && input == out ? n.b_.op("add", {h, t}, {}, idx("features", f) + "/sum") : t;
      input = out;
    }
  }
  h = cbr(h, idx("features", f), conv(last, 1));
  h = n.dropout(n.adaptive_avg_pool(h, "avgpool", 1, "mobilenet_v2"), "classifier/0", 0.2);
  n.finish(n.linear(h, "classifier/1", classes), y);
}

// ---- DARTS (Liu et al., "DARTS: Differentiable Architecture Search", CIFAR network) -----------
struct Darts {
  Net& n;
  // ReLUConvBN: relu (op/0), conv (op/1, no bias), batch norm (op/2).
  EntryRef relu_conv_bn(EntryRef x, const std::string& p, int64_t c, int64_t k, int64_t stride, int64_t pad) {
    return n.bn(n.conv2d(n.relu(x, p + "/op/0"), p + "/op/1", conv(c, k, stride, pad)), p + "/op/2");
  }
  // FactorizedReduce: relu, two 1x1 stride-2 convs (the second on x shifted by one row and column),
  // concatenated, batch norm.
  EntryRef factorized_reduce(EntryRef x, const std::string& p, int64_t c) {
    MNEMO_CHECK(c % 2 == 0) << p << ": FactorizedReduce needs an even channel count, got " << c;
    EntryRef r = n.relu(x, p + "/relu");
    EntryRef a = n.conv2d(r, p + "/conv_1", conv(c / 2, 1, 2));
    EntryRef shifted = n.b_.op("slice", {r}, {{"axis", int64_t{2}}, {"begin", int64_t{1}}}, p + "/shift_h");
    shifted = n.b_.op("slice", {shifted}, {{"axis", int64_t{3}}, {"begin", int64_t{1}}}, p + "/shift_w");
    EntryRef b = n.conv2d(shifted, p + "/conv_2", conv(c / 2, 1, 2));
    return n.bn(n.concat({a, b}, p + "/cat"), p + "/bn");
  }
  // SepConv: (relu, depthwise k x k, pointwise, bn) twice, the first with the stride.
  EntryRef sep_conv(EntryRef x, const std::string& p, int64_t c, int64_t k, int64_t stride) {
    EntryRef h = x;
    for (int half = 0; half < 2; ++half) {
      const int i = 4 * half;
      Conv dw = conv(c, k, half == 0 ? stride : 1, k / 2);
      dw.groups = c;
      h = n.conv2d(n.relu(h, idx(p + "/op", i)), idx(p + "/op", i + 1), dw);
      h = n.bn(n.conv2d(h, idx(p + "/op", i + 2), conv(c, 1)), idx(p + "/op", i + 3));
    }
    return h;
  }
  // DilConv: relu, depthwise k x k with dilation 2, pointwise, bn.
  EntryRef dil_conv(EntryRef x, const std::string& p, int64_t c, int64_t k, int64_t stride) {
    Conv dw = conv(c, k, stride, k - 1);
    dw.groups = c, dw.dilation = 2;
    EntryRef h = n.conv2d(n.relu(x, p + "/op/0"), p + "/op/1", dw);
    return n.bn(n.conv2d(h, p + "/op/2", conv(c, 1)), p + "/op/3");
  }
  EntryRef op(const std::string& name, EntryRef x, const std::string& p, int64_t c, int64_t stride) {
    if (name == "sep_conv_3x3") return sep_conv(x, p, c, 3, stride);
    if (name == "sep_conv_5x5") return sep_conv(x, p, c, 5, stride);
    if (name == "dil_conv_3x3") return dil_conv(x, p, c, 3, stride);
    if (name == "dil_conv_5x5") return dil_conv(x, p, c, 5, stride);
    if (name == "sep_conv_7x7") return sep_conv(x, p, c, 7, stride);
    if (name == "conv_7x1_1x7") {  // relu, conv 1x7 (stride along W), conv 7x1 (stride along H), bn
      Conv a{c, {1, 7}, {1, stride}, {0, 3}}, b{c, {7, 1}, {stride, 1}, {3, 0}};
      EntryRef h = n.conv2d(n.relu(x, p + "/op/0"), p + "/op/1", a);
      return n.bn(n.conv2d(h, p + "/op/2", b), p + "/op/3");
    }
    if (name == "max_pool_3x3") return n.max_pool(x, p, 3, stride, 1);
    if (name == "avg_pool_3x3")
      return n.b_.op("avg_pool2d", {x}, {{"kernel", int64_t{3}}, {"stride", stride}, {"padding", int64_t{1}},
                                         {"count_include_pad", false}}, p);
    if (name == "skip_connect") return stride == 1 ? x : factorized_reduce(x, p, c);
    MNEMO_FAIL() << "model.genotype: unknown operation '" << name << "' (expected sep_conv_3x3, sep_conv_5x5, "
                 << "sep_conv_7x7, dil_conv_3x3, dil_conv_5x5, conv_7x1_1x7, max_pool_3x3, avg_pool_3x3 or skip_connect)";
  }
  EntryRef cell(EntryRef s0, EntryRef s1, const std::string& p, int64_t c, bool reduction, bool reduction_prev,
                const Genotype& g) {
    s0 = reduction_prev ? factorized_reduce(s0, p + "/preprocess0", c) : relu_conv_bn(s0, p + "/preprocess0", c, 1, 1, 0);
    s1 = relu_conv_bn(s1, p + "/preprocess1", c, 1, 1, 0);
    const auto& ops = reduction ? g.reduce : g.normal;
    const auto& concat = reduction ? g.reduce_concat : g.normal_concat;
    std::vector<EntryRef> states{s0, s1};
    for (size_t i = 0; i < ops.size() / 2; ++i) {
      EntryRef h[2];
      for (int j = 0; j < 2; ++j) {
        const auto& [name, input] = ops[2 * i + j];
        MNEMO_CHECK(input >= 0 && input < static_cast<int>(states.size()))
            << "model.genotype: intermediate node " << i << " reads state " << input << "; only states 0.."
            << states.size() - 1 << " exist before it";
        h[j] = op(name, states[static_cast<size_t>(input)], idx(p + "/_ops", static_cast<int>(2 * i + j)), c,
                  reduction && input < 2 ? 2 : 1);
      }
      states.push_back(n.b_.op("add", {h[0], h[1]}, {}, p + "/node" + std::to_string(i)));
    }
    std::vector<EntryRef> out;
    for (int k : concat) {
      MNEMO_CHECK(k >= 0 && k < static_cast<int>(states.size())) << "model.genotype: concat names state " << k
                                                                 << "; the cell has states 0.." << states.size() - 1;
      out.push_back(states[static_cast<size_t>(k)]);
    }
    return n.concat(out, p + "/cat");
  }
};

void darts(Net& n, EntryRef x, EntryRef y, const ZooConfig& c) {
  const Genotype& g = c.genotype;
  MNEMO_CHECK(!g.normal.empty() && g.normal.size() % 2 == 0 && !g.reduce.empty() && g.reduce.size() % 2 == 0)
      << "model.genotype: normal and reduce need two (operation, input) pairs per intermediate node";
  MNEMO_CHECK(!g.normal_concat.empty() && !g.reduce_concat.empty()) << "model.genotype: normal_concat and reduce_concat are required";
  MNEMO_CHECK(c.layers >= 3 && c.init_channels >= 2 && c.init_channels % 2 == 0)
      << "model.layers must be at least 3 and model.init_channels even and at least 2, got " << c.layers << " and " << c.init_channels;
  Darts d{n};
  int64_t ch = c.init_channels;
  EntryRef s = n.bn(n.conv2d(x, "stem/0", conv(3 * ch, 3, 1, 1)), "stem/1");
  EntryRef s0 = s, s1 = s;
  bool reduction_prev = false;
  for (int i = 0; i < c.layers; ++i) {
    const bool reduction = i == c.layers / 3 || i == 2 * c.layers / 3;
    if (reduction) ch *= 2;
    EntryRef out = d.cell(s0, s1, idx("cells", i), ch, reduction, reduction_prev, g);
    s0 = s1, s1 = out;
    reduction_prev = reduction;
  }
  EntryRef h = n.adaptive_avg_pool(s1, "global_pooling", 1, "darts");
  n.finish(n.linear(h, "classifier", c.classes), y);
}

}  // namespace

Genotype darts_v2_genotype() {
  Genotype g;
  g.normal = {{"sep_conv_3x3", 0}, {"sep_conv_3x3", 1}, {"sep_conv_3x3", 0}, {"sep_conv_3x3", 1},
              {"sep_conv_3x3", 1}, {"skip_connect", 0}, {"skip_connect", 0}, {"dil_conv_3x3", 2}};
  g.normal_concat = {2, 3, 4, 5};
  g.reduce = {{"max_pool_3x3", 0}, {"max_pool_3x3", 1}, {"skip_connect", 2}, {"max_pool_3x3", 1},
              {"max_pool_3x3", 0}, {"skip_connect", 2}, {"skip_connect", 2}, {"max_pool_3x3", 1}};
  g.reduce_concat = {2, 3, 4, 5};
  return g;
}

BuiltModel build_inception_block_net(char kind, int64_t batch, int64_t size, int64_t width, int64_t c, int64_t classes) {
  MNEMO_CHECK(kind == 'A' || kind == 'B' || kind == 'C') << "inception block kind must be A, B or C, got '" << kind << "'";
  BuiltModel m{ModelBuilder(DType::f32)};
  Net n(m);
  EntryRef x = m.builder.input("data", {batch, 3, size, size}, DType::f32);
  EntryRef y = m.builder.input("labels", {batch}, DType::i32);
  Inception inc{n};
  EntryRef h = inc.basic(x, "stem", conv(width, 3, 1, 1));
  h = kind == 'A' ? inc.a(h, "Mixed", c) : kind == 'B' ? inc.b(h, "Mixed") : inc.c(h, "Mixed", c);
  h = n.adaptive_avg_pool(h, "avgpool", 1, "inception block");
  n.finish(n.linear(h, "fc", classes), y);
  return m;
}

const char* zoo_architectures() { return "alexnet, vgg, densenet, inception_v3, mobilenet_v2, darts"; }

bool is_zoo_model(const std::string& type) {
  return type == "alexnet" || type == "vgg" || type == "densenet" || type == "inception_v3" || type == "mobilenet_v2" ||
         type == "darts";
}

BuiltModel build_zoo_model(const ZooConfig& c) {
  MNEMO_CHECK(c.batch >= 1 && c.channels >= 1 && c.height >= 1 && c.width >= 1)
      << "data shape must be positive, got batch " << c.batch << ", " << c.channels << "x" << c.height << "x" << c.width;
  MNEMO_CHECK(c.classes >= 2) << "model.classes must be at least 2, got " << c.classes;
  BuiltModel m{ModelBuilder(c.dtype)};
  m.builder.set_training(c.training);
  Net n(m);
  EntryRef x = m.builder.input("data", {c.batch, c.channels, c.height, c.width}, c.dtype);
  EntryRef y = m.builder.input("labels", {c.batch}, DType::i32);
  try {
    if (c.arch == "alexnet") alexnet(n, x, y, c.classes);
    else if (c.arch == "vgg") vgg(n, x, y, c.depth ? c.depth : 16, c.batch_norm, c.classes);
    else if (c.arch == "densenet") densenet(n, x, y, c);
    else if (c.arch == "inception_v3") inception_v3(n, x, y, c.aux_logits, c.classes);
    else if (c.arch == "mobilenet_v2") mobilenet_v2(n, x, y, c.width_mult, c.classes);
    else if (c.arch == "darts") darts(n, x, y, c);
    else MNEMO_FAIL() << "model.type: expected one of " << zoo_architectures() << ", got '" << c.arch << "'";
  } catch (const Error& e) {
    std::ostringstream os;
    os << c.arch << " on " << c.channels << "x" << c.height << "x" << c.width << " inputs: " << e.what();
    throw Error(os.str());
  }
  return m;
}

}  // namespace mnemo
