// The dropout mask, shared by the CPU op (ops/dropout.cpp) and the CUDA kernel
// (cuda/kernels/dropout.cu): plain C++17, callable from host and device, so both backends and a
// recomputation of the same node draw bitwise the same mask. Counter-based: element i of the node
// with seed `seed` at training step `step` is kept when a 24-bit uniform drawn from
// hash(seed, step, i) is at least p; nothing is stored between the forward pass and the backward
// pass or a recomputation (each derives the mask again).
#pragma once
#include <cstdint>

#include "cuda/kernels/hd.h"

namespace mnemo::dropout {

// SplitMix64's finaliser (Steele et al., "Fast splittable pseudorandom number generators").
MNEMO_HD inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform in [0, 1) with 24 bits (exact in float) for element i.
MNEMO_HD inline float uniform(uint64_t seed, uint64_t step, uint64_t i) {
  const uint64_t h = mix(mix(seed * 0x9e3779b97f4a7c15ull + step) + i * 0xd1b54a32d192ed03ull);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

MNEMO_HD inline bool keep(uint64_t seed, uint64_t step, uint64_t i, float p) { return uniform(seed, step, i) >= p; }

}  // namespace mnemo::dropout
