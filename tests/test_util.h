// Helpers shared by the test suites: deterministic random tensors (distinct values, away from
// kinks), running one op on its own, and comparisons.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <vector>

#include "core/executor.h"
#include "autograd/gradient.h"
#include "core/graph.h"

namespace mnemo::test {

// Distinct values in (-scale, scale), 2*scale/n apart and at least 0.3*scale/n from 0, so central
// differences never straddle a kink (relu at 0, ties in max pooling).
void fill_distinct(Tensor& t, uint64_t seed, double scale = 1.0);
// Integers in [0, high).
void fill_ints(Tensor& t, uint64_t seed, int64_t high);
// Normal(0, scale) values (for realistic model inputs).
void fill_normal(Tensor& t, uint64_t seed, double scale = 1.0);

// Element i as double, whatever the float dtype.
double get(const Tensor& t, int64_t i);
void set(Tensor& t, int64_t i, double v);
Tensor cast(const Tensor& t, DType to);

// Runs a single node `op` on `inputs` (each bound as an input node) and returns copies of its outputs.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});

// Executes graph `g` (trivial plan) with `bindings` by node name; returns copies of `entries`.
std::vector<Tensor> run_graph(const Graph& g, const std::vector<std::pair<std::string, const Tensor*>>& bindings,
                              const std::vector<EntryRef>& entries);

// The comparisons every test uses between mnemo and PyTorch or between modes. Both are NaN-aware:
// a NaN or Inf anywhere on either side, or a shape mismatch, gives +infinity (so `EXPECT_LE(d, tol)`
// fails); a plain max(err, |a - b|) would silently skip NaN.
// max over i of |a_i - b_i| / max(|a_i|, |b_i|, 1)
double max_rel_diff(const Tensor& a, const Tensor& b);
// max_i |got_i - want_i| / max(max_i |want_i|, floor): the error relative to the tensor's largest
// magnitude (tiny entries of a gradient do not dominate), any float dtypes.
double norm_rel_diff(const Tensor& got, const Tensor& want, double floor = 1e-6);
bool bitwise_equal(const Tensor& a, const Tensor& b);
// Runs `outputs` with one OpenMP thread and with max(threads, 3): every output must be bitwise the
// same (kernels whose sums have a fixed order).
void expect_bitwise_for_any_thread_count(const std::function<std::vector<Tensor>()>& outputs);

// Convolutions past 2^31 elements (the CPU's im2col kernels, the GPU's launches along the batch):
// [N, 1, 64, 64] data, zero-mean, element i of stream `seed` recomputed on demand (splitmix64),
// x scaled by 1 + n/N along the batch, with a 3x3 kernel and padding 1, and float64 references.
struct BigConv {
  static constexpr int64_t N = 524589, H = 64, W = 64, S = H * W;  // N * S = 2 148 716 544 > 2^31 - 1
  static float hashed(uint64_t i, uint64_t seed);  // in [0, 1)
  static float x_at(int64_t i) { return (hashed(static_cast<uint64_t>(i), 1) - 0.5f) * (1.0f + static_cast<float>(i / S) / N); }
  static float dy_at(int64_t i) { return hashed(static_cast<uint64_t>(i), 2) - 0.5f; }
  // max |got - ref| / max |ref| over sample n: forward y = conv(x, w) (transposed: dx = conv^T(dy, w)).
  static double sample_error(const float* got, int64_t n, const float* w9, bool transposed);
  // The weight gradient sum over the batch of dy (x) x in float64, and its spread (sqrt of the sum
  // over n of each sample's sum squared): a launch reading the wrong samples moves it by about that.
  static void weight_grad(double ref[9], double spread[9]);
};

}  // namespace mnemo::test

namespace mnemo::test {

// A fresh directory under the system temp dir, removed with everything in it at the end of scope.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() / ("mnemo_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  // The path of `name` inside; writes `text` there first when it is not empty.
  std::string file(const std::string& name, const std::string& text = "") const {
    const std::string p = (path / name).string();
    if (!text.empty()) std::ofstream(p) << text;
    return p;
  }
};

// Helpers for the per-op tests.
Tensor clone(const Tensor& t);
Tensor clone(const TensorView& v);  // an owning copy of a view (e.g. an executor entry)
Tensor copy(const Tensor& t);  // same as clone
// float64 normal(0, scale) + offset values of `shape`.
Tensor rand64(Shape shape, uint64_t seed, double scale = 1.0, double offset = 0.0);
// run_op on copies of the given tensors (Tensor is move-only).
std::vector<Tensor> run(const std::string& op, std::initializer_list<const Tensor*> in, const Attrs& attrs = {});
// The message of the mnemo::Error f throws, or "(no error)".
std::string error_of(const std::function<void()>& f);
// How many nodes of `g` run op `op`.
int count_ops(const Graph& g, const std::string& op);

// A random small DAG of float64 fully_connected, relu/tanh, concat, add/mul (batch 2) ending in a
// softmax cross-entropy `loss`: `layers` layers or a few more.
// The compute nodes of `g`, and the 0/1 mirror plan dropping compute[i] where bit i of `mask` is
// set (views with the node they alias): every 0/1 plan of a small net, enumerated.
std::vector<int> compute_nodes(const Graph& g);
MirrorPlan mask_plan(const Graph& g, const std::vector<int>& compute, uint32_t mask);
Graph random_net(std::mt19937& rng, int layers, EntryRef* loss);

}  // namespace mnemo::test
