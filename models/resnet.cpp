// ResNet builders (see resnet.h).
#include "models/resnet.h"

namespace mnemo {
namespace {

struct Net {
  ModelBuilder& b;
  int layers = 0;
  int64_t block = 0;  // the activations' channel block from the stem on (0: plain)

  EntryRef conv_bn(EntryRef x, const std::string& name, int64_t out, int64_t k, int64_t stride, bool relu) {
    const int64_t pad = k / 2;
    EntryRef h = b.batch_norm(b.conv2d(x, name + "/conv", out, k, stride, pad, block), name + "/bn", 0.1, 1e-5, block);
    ++layers;
    return relu ? b.relu(h, name + "/relu") : h;
  }

  EntryRef shortcut(EntryRef x, const std::string& name, int64_t out, int64_t stride) {
    const TensorType& t = b.graph().type(x);
    const int64_t channels = t.shape[1] * (block ? block : 1);  // plain or channel-blocked
    if (stride == 1 && channels == out) return x;
    // Projections are not counted as layers (He et al.'s convention: depth = 6n+2 for cifar).
    return b.batch_norm(b.conv2d(x, name + "/shortcut/conv", out, 1, stride, 0, block), name + "/shortcut/bn", 0.1, 1e-5, block);
  }

  EntryRef basic(EntryRef x, const std::string& name, int64_t out, int64_t stride) {
    EntryRef h = conv_bn(x, name + "/a", out, 3, stride, true);
    h = conv_bn(h, name + "/b", out, 3, 1, false);
    EntryRef s = shortcut(x, name, out, stride);
    return b.relu(b.op("add", {h, s}, {}, name + "/sum"), name + "/out");
  }

  EntryRef bottleneck(EntryRef x, const std::string& name, int64_t mid, int64_t stride) {
    const int64_t out = 4 * mid;
    EntryRef h = conv_bn(x, name + "/a", mid, 1, 1, true);
    h = conv_bn(h, name + "/b", mid, 3, stride, true);
    h = conv_bn(h, name + "/c", out, 1, 1, false);
    EntryRef s = shortcut(x, name, out, stride);
    return b.relu(b.op("add", {h, s}, {}, name + "/sum"), name + "/out");
  }
};

int standard_blocks(int depth, std::vector<int>& blocks, std::string& kind) {
  switch (depth) {
    case 18: blocks = {2, 2, 2, 2}; kind = "basic"; return 1;
    case 34: blocks = {3, 4, 6, 3}; kind = "basic"; return 1;
    case 50: blocks = {3, 4, 6, 3}; kind = "bottleneck"; return 1;
    case 101: blocks = {3, 4, 23, 3}; kind = "bottleneck"; return 1;
    case 152: blocks = {3, 8, 36, 3}; kind = "bottleneck"; return 1;
    case 200: blocks = {3, 24, 36, 3}; kind = "bottleneck"; return 1;
  }
  return 0;
}

}  // namespace

std::vector<int> resnet_blocks(const ResNetConfig& c, std::string* block_kind) {
  std::vector<int> blocks;
  std::string kind = c.block;
  if (c.style == "cifar") {
    MNEMO_CHECK(c.blocks.empty()) << "model.blocks: a cifar ResNet takes depth = 6n+2, not blocks";
    MNEMO_CHECK(c.depth >= 8 && (c.depth - 2) % 6 == 0)
        << "model.depth: a cifar ResNet needs depth = 6n+2 (20, 32, 44, 56, 110, ...), got " << c.depth;
    MNEMO_CHECK(kind.empty() || kind == "basic") << "model.block: a cifar ResNet uses basic blocks, got '" << kind << "'";
    const int n = (c.depth - 2) / 6;
    blocks = {n, n, n};
    kind = "basic";
  } else if (c.style == "imagenet") {
    if (!c.blocks.empty()) {
      MNEMO_CHECK(c.blocks.size() == 4) << "model.blocks: an imagenet ResNet has 4 stages, got " << c.blocks.size();
      for (int k : c.blocks) MNEMO_CHECK(k >= 1) << "model.blocks: every stage needs at least one block";
      blocks = c.blocks;
      if (kind.empty()) kind = "bottleneck";
    } else {
      std::string std_kind;
      MNEMO_CHECK(standard_blocks(c.depth, blocks, std_kind))
          << "model.depth: imagenet depths are 18, 34, 50, 101, 152, 200 (got " << c.depth
          << "); give model.blocks for other depths";
      if (kind.empty()) kind = std_kind;
    }
    MNEMO_CHECK(kind == "basic" || kind == "bottleneck") << "model.block: expected basic or bottleneck, got '" << kind << "'";
  } else {
    MNEMO_FAIL() << "model.style: expected cifar or imagenet, got '" << c.style << "'";
  }
  if (block_kind) *block_kind = kind;
  return blocks;
}

int64_t resnet_base_width(const ResNetConfig& c) { return c.width_base ? c.width_base : (c.style == "cifar" ? 16 : 64); }

BuiltModel build_resnet(const ResNetConfig& c) {
  std::string kind;
  const std::vector<int> blocks = resnet_blocks(c, &kind);
  MNEMO_CHECK(c.batch >= 1 && c.channels >= 1 && c.height >= 1 && c.width >= 1)
      << "data shape must be positive, got batch " << c.batch << ", " << c.channels << "x" << c.height << "x" << c.width;
  MNEMO_CHECK(c.classes >= 2) << "model.classes must be at least 2, got " << c.classes;
  BuiltModel m{ModelBuilder(c.dtype), {}, {}};
  Net net{m.builder};
  ModelBuilder& b = m.builder;
  b.set_training(c.training);
  EntryRef x = b.input("data", {c.batch, c.channels, c.height, c.width}, c.dtype);
  EntryRef y = b.input("labels", {c.batch}, DType::i32);
  EntryRef h;
  int64_t width = c.width_base;
  const int64_t kBlock = c.channel_block;
  const bool blocked = kBlock > 0;
  if (blocked) {
    MNEMO_CHECK(kBlock == 8 || kBlock == 16) << "resnet: channel_block must be 0, 8 or 16, got " << kBlock;
    MNEMO_CHECK(c.dtype == DType::f32) << "model.layout: blocked runs oneDNN's float32 kernels; use layout: plain for "
                                       << dtype_name(c.dtype);
    MNEMO_CHECK(resnet_base_width(c) % kBlock == 0)
        << "model.layout: blocked needs channel counts that are multiples of " << kBlock << "; model.width is "
        << resnet_base_width(c);
  }
  auto to_blocked = [&](EntryRef e, const std::string& name) {
    return b.op("to_blocked", {e}, {{"block", kBlock}}, name);
  };
  if (c.style == "cifar") {
    if (!width) width = 16;
    if (blocked) {  // blocked from the stem's output on (the image's 3 channels stay plain)
      h = b.batch_norm(to_blocked(b.conv2d(x, "stem/conv", width, 3, 1, 1), "stem/blocked"), "stem/bn", 0.1, 1e-5, kBlock);
      h = b.relu(h, "stem/relu");
      ++net.layers;
    } else {
      h = net.conv_bn(x, "stem", width, 3, 1, true);
    }
  } else {
    if (!width) width = 64;
    h = net.conv_bn(x, "stem", width, 7, 2, true);
    h = b.op("max_pool2d", {h}, {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"padding", int64_t{1}}}, "stem/pool");
    if (blocked) h = to_blocked(h, "stem/blocked");
  }
  net.block = kBlock;  // the stages' activations
  for (size_t s = 0; s < blocks.size(); ++s) {
    const int64_t w = width << s;
    for (int k = 0; k < blocks[s]; ++k) {
      const std::string name = "stage" + std::to_string(s + 1) + "/block" + std::to_string(k);
      const int64_t stride = (s > 0 && k == 0) ? 2 : 1;
      h = kind == "basic" ? net.basic(h, name, w, stride) : net.bottleneck(h, name, w, stride);
    }
  }
  if (blocked) h = b.op("to_plain", {h}, {}, "plain");
  h = b.op("global_avg_pool", {h}, {}, "pool");
  m.logits = b.fully_connected(h, "fc", c.classes);
  m.loss = b.op("softmax_cross_entropy", {m.logits, y}, {}, "loss");
  m.all_logits = {m.logits};
  m.layers = net.layers + 1;
  if (blocked) m.layout = "nChw" + std::to_string(kBlock) + "c";
  return m;
}

}  // namespace mnemo
