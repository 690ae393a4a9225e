// ModelBuilder: layer-level helpers that add nodes to a forward Graph and record each parameter's
// initialisation (ParamSpec). Builders in models/ (small nets now, ResNet/LSTM from configs later)
// are written with it. Names are hierarchical ("block1/conv2/weight") and stable: checkpoints and
// `mnemo grad` use them.
#pragma once
#include <string>
#include <vector>

#include "core/graph.h"

namespace mnemo {

struct ParamInit {
  enum Kind { zeros, ones, normal, uniform } kind = zeros;
  double scale = 0;  // normal: std; uniform: bound (values in [-scale, scale])
};

// The graph input a model with dropout reads its step counter from (int32 [1]).
inline constexpr const char* kRngStep = "rng/step";

struct ParamSpec {
  std::string name;
  int node;  // param node id
  ParamInit init;
  bool trainable = true;
};

class ModelBuilder {
 public:
  explicit ModelBuilder(DType dtype = DType::f32) : dtype_(dtype) {}
  // false: batch_norm uses running statistics (evaluation graphs); no statistics updates.
  void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }

  Graph& graph() { return g_; }
  const Graph& graph() const { return g_; }
  const std::vector<ParamSpec>& params() const { return params_; }
  DType dtype() const { return dtype_; }

  EntryRef input(const std::string& name, Shape shape, DType dtype);
  EntryRef param(const std::string& name, Shape shape, ParamInit init, bool trainable = true);

  // conv2d without bias, He-normal weights (std sqrt(2 / fan_in)). With `block` b (8 or 16), x and
  // the result are channel-blocked [N,C/b,H,W,b] (ops/layout.cpp; conv2d's `block` attribute).
  EntryRef conv2d(EntryRef x, const std::string& name, int64_t out_channels, int64_t kernel, int64_t stride,
                  int64_t padding, int64_t block = 0);
  // Training-mode batch norm: gamma 1, beta 0, running statistics updated once per step; `block` as
  // conv2d's (the per-channel vectors stay [C]).
  EntryRef batch_norm(EntryRef x, const std::string& name, double momentum = 0.1, double eps = 1e-5, int64_t block = 0);
  EntryRef relu(EntryRef x, const std::string& name);
  // Training-mode dropout with drop probability p (ops/dropout.cpp), its mask seeded by the node's
  // name and the step counter input kRngStep, which the builder adds at the first use (the trainer
  // binds it every step); an identity (no node) in evaluation graphs or when p is 0.
  EntryRef dropout(EntryRef x, const std::string& name, double p);
  // y = x w^T + b with PyTorch's default init (uniform +-1/sqrt(fan_in)).
  EntryRef fully_connected(EntryRef x, const std::string& name, int64_t out, bool bias = true);
  EntryRef op(const std::string& op, std::vector<EntryRef> in, Attrs attrs, const std::string& name) {
    return g_.add1(op, std::move(in), std::move(attrs), name);
  }
  std::vector<EntryRef> op_n(const std::string& op, std::vector<EntryRef> in, Attrs attrs, const std::string& name);

 private:
  DType dtype_;
  bool training_ = true;
  Graph g_;
  std::vector<ParamSpec> params_;
};

// A built model's size: trainable parameter elements, and the FLOPs of one forward pass (every
// compute node's cost) and of its convolutions and matrix products alone (conv2d and
// fully_connected: what PyTorch's FlopCounterMode counts, 2 per multiply-add).
struct ModelStats {
  int64_t params = 0;
  double forward_flops = 0, matmul_flops = 0;
};
ModelStats model_stats(const ModelBuilder& b);

}  // namespace mnemo
