// The gradient all-reduce of a data-parallel step as two nodes per bucket (docs/PARALLEL.md):
//   grad_allreduce_start(g_0..g_k-1)  buf[R, S]   copies this rank's gradients into row `rank` of
//                                                 the bucket buffer and starts gathering every
//                                                 rank's row (S = sum of the gradients' sizes)
//   grad_allreduce_wait(buf)          g'_0..g'_k-1 waits for the gather; g'_j = (sum over r = 0..R-1
//                                                 of row r's part j, in rank order) / R
// Backward compute runs between the two (the autograd pass puts the wait of a bucket where the next
// bucket starts), so the gather overlaps it. Summing gathered rows in a fixed order makes the mean
// the same bits on every rank and every run. With ranks = 1, g'_j = g_j exactly, and nothing is
// communicated unless a one-rank communicator is installed (parallel.reduce_one_rank: the gather
// then runs, to measure the path; core/comm.h communicator_for). The bucket buffer is an ordinary
// planned entry (live from start to wait).
#include <cstring>

#include "core/comm.h"
#include "ops/common.h"

namespace mnemo::ops {
namespace {

struct StartParams {
  int64_t ranks = 1;
};
StartParams parse_start(AttrReader& r) {
  StartParams p;
  p.ranks = r.require_int("ranks");
  MNEMO_CHECK(p.ranks >= 1 && p.ranks <= 65536) << "ranks must be in [1, 65536], got " << p.ranks;
  return p;
}

// The gradients' shapes: `ndims` per gradient, their dimensions one after another in `dims`.
struct WaitParams {
  std::vector<Shape> shapes;
};
WaitParams parse_wait(AttrReader& r) {
  WaitParams p;
  const std::vector<int64_t> ndims = r.require_ints("ndims"), dims = r.require_ints("dims");
  size_t at = 0;
  for (int64_t n : ndims) {
    MNEMO_CHECK(n >= 0 && at + static_cast<size_t>(n) <= dims.size())
        << "ndims " << shape_str(ndims) << " asks for more than the " << dims.size() << " entries of dims";
    p.shapes.emplace_back(dims.begin() + static_cast<std::ptrdiff_t>(at), dims.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += static_cast<size_t>(n);
  }
  MNEMO_CHECK(at == dims.size()) << "dims has " << dims.size() - at << " entries more than ndims " << shape_str(ndims) << " uses";
  MNEMO_CHECK(!p.shapes.empty()) << "a bucket needs at least one gradient";
  for (const Shape& s : p.shapes)
    for (int64_t d : s) MNEMO_CHECK(d >= 0) << "negative dimension in " << shape_str(s);
  return p;
}

std::vector<TensorType> infer_start(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const StartParams*>(params);
  int64_t total = 0;
  for (size_t j = 0; j < in.size(); ++j) {
    require_float(in[j], "gradient");
    MNEMO_CHECK(in[j].dtype == in[0].dtype) << "the gradients of a bucket must have one dtype, got " << in[0].str()
                                            << " and " << in[j].str();
    total += in[j].numel();
  }
  return {TensorType{in[0].dtype, {p.ranks, total}}};
}

std::vector<TensorType> infer_wait(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const WaitParams*>(params);
  require_float(in[0], "bucket buffer");
  int64_t total = 0;
  std::vector<TensorType> out;
  for (const Shape& s : p.shapes) out.push_back({in[0].dtype, s}), total += numel(s);
  MNEMO_CHECK(in[0].shape.size() == 2 && in[0].shape[1] == total)
      << "the bucket buffer must be [ranks, " << total << "] for these gradients, got " << in[0].str();
  return out;
}

void start_cpu(const KernelContext& c) {
  const int64_t ranks = c.p<StartParams>().ranks;
  const TensorView& buf = c.out[0];
  const int64_t total = buf.dim(1);
  const size_t elem = dtype_size(buf.dtype());
  Communicator* comm = communicator_for(ranks);
  const int64_t me = comm ? comm->rank() : 0;
  char* row = static_cast<char*>(buf.data) + static_cast<size_t>(me * total) * elem;
  for (const TensorView& g : c.in) {
    std::memcpy(row, g.data, static_cast<size_t>(g.numel()) * elem);
    row += static_cast<size_t>(g.numel()) * elem;
  }
  if (comm) comm->start_gather(static_cast<char*>(buf.data), static_cast<int64_t>(static_cast<size_t>(total) * elem));
}

void wait_cpu(const KernelContext& c) {
  const TensorView& buf = c.in[0];
  const int64_t ranks = buf.dim(0), total = buf.dim(1);
  if (Communicator* comm = communicator_for(ranks)) comm->wait_gather(buf.data, "the all-reduce of a gradient bucket");
  dispatch_float(buf.dtype(), "grad_allreduce_wait", [&]<class T>() {
    const T* rows = buf.as<T>();
    int64_t off = 0;
    for (const TensorView& o : c.out) {
      T* y = o.as<T>();
      const T* src = rows + off;
      parallel_range(o.numel(), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          T s = src[i];
          for (int64_t r = 1; r < ranks; ++r) s += src[r * total + i];
          y[i] = s / static_cast<T>(ranks);
        }
      });
      off += o.numel();
    }
  });
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(allreduce) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "grad_allreduce_start";
    d.traits.step_machinery = true;
    d.doc = "buf[R,S]: this rank's gradients into row `rank`, then every rank's row gathered (data parallelism)";
    d.min_inputs = 1;
    d.max_inputs = -1;
    d.parse = parse_with(parse_start, "grad_allreduce_start");
    d.infer = infer_start;
    d.cpu = start_cpu;
    d.sample = OpSample{{{"ranks", int64_t{1}}}, {TensorType{DType::f32, {3, 4}}, TensorType{DType::f32, {5}}}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "grad_allreduce_wait";
    d.traits.step_machinery = true;
    d.doc = "g'_j: the mean over ranks (summed in rank order) of part j of the gathered bucket buf[R,S]";
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_wait, "grad_allreduce_wait");
    d.infer = infer_wait;
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{static_cast<double>(in[0].numel()), io_bytes(in, out)};
    };
    d.cpu = wait_cpu;
    d.sample = OpSample{{{"ndims", std::vector<int64_t>{2, 1}}, {"dims", std::vector<int64_t>{3, 4, 5}}},
                        {TensorType{DType::f32, {1, 17}}}};
    registry.add(std::move(d));
  }
}
