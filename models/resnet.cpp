// ResNet builders (see resnet.h).
#include "models/resnet.h"

namespace mnemo {
namespace {

struct Net {
  ModelBuilder& b;
  int layers = 0;
  int64_t block = 0;  // the activations' channel block (0: plain)

  // With `enter` (a block), the convolution's output enters the channel-blocked layout (the stem).
  EntryRef conv_bn(EntryRef x, const std::string& name, int64_t out, int64_t k, int64_t stride, bool relu, int64_t enter = 0) {
    const int64_t pad = k / 2;
    EntryRef h = b.conv2d(x, name + "/conv", out, k, stride, pad, block);
    if (enter) h = to_blocked(h, name + "/blocked", enter);
    h = b.batch_norm(h, name + "/bn", 0.1, 1e-5, block);
    ++layers;
    return relu ? b.relu(h, name + "/relu") : h;
  }

  // x into the channel-blocked layout of block `enter`, the activations' layout from here on.
  EntryRef to_blocked(EntryRef x, const std::string& name, int64_t enter) {
    block = enter;
    return b.op("to_blocked", {x}, {{"block", enter}}, name);
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
  BuiltModel m{ModelBuilder(c.dtype)};
  Net net{m.builder};
  ModelBuilder& b = m.builder;
  b.set_training(c.training);
  EntryRef x = b.input("data", {c.batch, c.channels, c.height, c.width}, c.dtype);
  EntryRef y = b.input("labels", {c.batch}, DType::i32);
  EntryRef h;
  int64_t width = c.width_base;
  const int64_t kBlock = c.channel_block;  // (the config layer checked it: resnet_block)
  if (c.style == "cifar") {
    if (!width) width = 16;
    h = net.conv_bn(x, "stem", width, 3, 1, true, kBlock);  // blocked from the stem's output on
  } else {
    if (!width) width = 64;
    h = net.conv_bn(x, "stem", width, 7, 2, true);
    h = b.op("max_pool2d", {h}, {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"padding", int64_t{1}}}, "stem/pool");
    if (kBlock) h = net.to_blocked(h, "stem/blocked", kBlock);
  }
  for (size_t s = 0; s < blocks.size(); ++s) {
    const int64_t w = width << s;
    for (int k = 0; k < blocks[s]; ++k) {
      const std::string name = "stage" + std::to_string(s + 1) + "/block" + std::to_string(k);
      const int64_t stride = (s > 0 && k == 0) ? 2 : 1;
      h = kind == "basic" ? net.basic(h, name, w, stride) : net.bottleneck(h, name, w, stride);
    }
  }
  if (kBlock) h = b.op("to_plain", {h}, {}, "plain");
  h = b.op("global_avg_pool", {h}, {}, "pool");
  m.logits = b.fully_connected(h, "fc", c.classes);
  m.loss = b.op("softmax_cross_entropy", {m.logits, y}, {}, "loss");
  m.all_logits = {m.logits};
  m.layers = net.layers + 1;
  if (kBlock) m.layout = "nChw" + std::to_string(kBlock) + "c";
  return m;
}

}  // namespace mnemo
