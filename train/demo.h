// The README's main job for now: a small conv net (conv-bn-relu, a residual block, pooling,
// fully connected, softmax cross-entropy) trained a few steps by SGD on seeded synthetic data.
#pragma once
#include <cstdint>

namespace mnemo {

struct DemoOptions {
  int steps = 20;
  int batch = 32;
  double lr = 0.1;
  int threads = 0;
  uint64_t seed = 1;
};

int run_demo(const DemoOptions& opt);  // returns a process exit code

}  // namespace mnemo
