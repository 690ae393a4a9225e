// The gradient all-reduce of data parallelism in the training graph (docs/PARALLEL.md). Runs
// inside add_sgd_updates (autograd/update.h) when SgdSpec::ranks > 1, before the updates are
// placed, so every planner scores and plans the step with it:
//   - the gradients, in the order the schedule completes them, are cut into buckets of at most
//     `bucket_bytes` (one gradient at least; one dtype per bucket);
//   - `allreduce/bucket<b>/start` (grad_allreduce_start) right after the node completing the
//     bucket's last gradient: copies them into the bucket buffer and starts the gather;
//   - `allreduce/bucket<b>/wait` (grad_allreduce_wait) right before the next bucket's start (the
//     last one's at the end): at most one bucket in flight, the backward compute between the two
//     hides the communication;
//   - each gradient becomes the wait's output (the mean over ranks), which the update then reads.
// Requires: a TrainingGraph from build_training_graph, without updates. Provides: the same, with
// tg.grads pointing at the reduced gradients.
#pragma once
#include <cstdint>
#include <string>

#include "autograd/gradient.h"

namespace mnemo {

// Whether `n` is a bucket's start (its output 0 is the bucket buffer).
bool is_bucket_start(const Node& n);

// `bucket_bytes` 0: automatic (bucket_bytes_for).
void add_gradient_allreduce(TrainingGraph& tg, int ranks, int64_t bucket_bytes);

// The bucket size for `grad_bytes` of gradients: `configured` when positive, else a quarter of
// them, within [1 MiB, 25 MiB] (PyTorch DDP's first and default bucket sizes): at least about four
// buckets, so the first ones run while the backward pass goes on.
int64_t bucket_bytes_for(int64_t grad_bytes, int64_t configured);

// "K buckets of at most N bytes (M bytes of gradients; parallel.bucket_bytes: auto)" for a
// training graph with the all-reduce (`configured` as given to add_gradient_allreduce).
std::string describe_buckets(const TrainingGraph& tg, int64_t configured);

// A 24-bit fingerprint of the step's gathers in schedule order (each bucket's bytes): the ranks of
// a run must issue the same gathers in the same order. A time-limited solver (order: optimal,
// budget=...:exact) could plan another step on another rank; the trainer compares fingerprints.
int64_t gather_fingerprint(const TrainingGraph& tg);

}  // namespace mnemo
