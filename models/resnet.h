// ResNet graph builders (He et al. 2016), conv-bn-relu ordering, projection shortcuts (1x1 conv +
// BN) where the shape changes.
//   cifar:    conv3x3(16)-bn-relu, 3 stages of n basic blocks (16/32/64 channels, stride 2 at the
//             start of stages 2 and 3), global average pool, fc. depth = 6n + 2.
//   imagenet: conv7x7/2(64)-bn-relu, maxpool3x3/2, 4 stages (64/128/256/512 base channels) of basic
//             or bottleneck (x4 expansion, stride on the 3x3 conv as in torchvision) blocks, global
//             average pool, fc. Depth 18/34/50/101/152/200 map to the standard block counts; any
//             other count per stage is given with `blocks`.
#pragma once
#include <string>
#include <vector>

#include "models/builder.h"

namespace mnemo {

struct ResNetConfig {
  std::string style = "cifar";      // cifar | imagenet
  int depth = 20;                   // cifar: 6n+2; imagenet: 18, 34, 50, 101, 152, 200 (or give blocks)
  std::vector<int> blocks;          // imagenet: blocks per stage (overrides depth)
  std::string block = "";           // imagenet: basic | bottleneck ("" = standard for the depth)
  int64_t batch = 32, channels = 3, height = 32, width = 32, classes = 10;
  int64_t width_base = 0;           // first stage's channels (0: 16 for cifar, 64 for imagenet)
  DType dtype = DType::f32;
  // The config's model.layout: "plain", "blocked" or "auto" (resolved into `block` by the config
  // layer, train/config/config.cpp, which knows the device; docs/CONFIG.md model.layout).
  std::string layout = "plain";
  // 0: every activation [N,C,H,W]; b (8 or 16): from the stem's convolution to the global pool
  // channel-blocked [N,C/b,H,W,b], oneDNN's own layout on this CPU (no reorders around each
  // convolution; CPU, float32 only). The builder uses this, not `layout`.
  int64_t channel_block = 0;
  bool training = true;             // false: BatchNorm with running statistics (evaluation)
};

struct BuiltModel {
  explicit BuiltModel(ModelBuilder b) : builder(std::move(b)) {}
  ModelBuilder builder;
  EntryRef loss;
  EntryRef logits;
  std::string data = "data";
  std::string labels = "labels";
  int layers = 0;  // conv + fc layers (the paper's depth: conv-bn-relu counts as one)
  // Logits entries and, per entry, the label index it is scored against: one entry for
  // classifiers; one per step (label step t) for per-step sequence models.
  std::vector<EntryRef> all_logits;
  // The activations' layout when it is not plain (e.g. "nChw16c": ResNet's model.layout blocked).
  std::string layout;
  // An LSTM's classifiers: "fused" (one linear_cross_entropy node in training), "ops" (per step),
  // empty for other models.
  std::string head;
  // For reports: the layout's name ("plain" when empty), and what the model line adds after the
  // model's type: " (activations nChw16c)", " (fused head)" or "".
  std::string layout_name() const { return layout.empty() ? "plain" : layout; }
  std::string report_note() const {
    return !layout.empty() ? " (activations " + layout + ")" : head == "fused" ? " (fused head)" : "";
  }
};

// Throws mnemo::Error naming the field when the configuration is impossible.
BuiltModel build_resnet(const ResNetConfig& c);
// The first stage's channels (model.width, or 16 / 64 by style).
int64_t resnet_base_width(const ResNetConfig& c);
// The resolved per-stage block counts and block kind, e.g. for reports.
std::vector<int> resnet_blocks(const ResNetConfig& c, std::string* block_kind = nullptr);

}  // namespace mnemo
