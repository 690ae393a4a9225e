// Test helpers (see test_util.h).
#include "test_util.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "memory/budget_exact.h"

namespace mnemo::test {

void set(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::f32: t.as<float>()[i] = static_cast<float>(v); break;
    case DType::f64: t.as<double>()[i] = v; break;
    case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(v); break;
  }
}

double get(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.as<float>()[i];
    case DType::f64: return t.as<double>()[i];
    case DType::i32: return t.as<int32_t>()[i];
  }
  return 0;
}

void fill_distinct(Tensor& t, uint64_t seed, double scale) {
  const int64_t n = t.numel();
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
  // Grid points 2/n apart, shifted by 0.3/n so that none is 0 (for odd n the unshifted middle
  // point would be; for n = 1 it would make a one-element gradient seed vanish).
  for (int64_t i = 0; i < n; ++i) set(t, i, scale * ((perm[i] + 0.5) / n * 2.0 - 1.0 + 0.3 / n));
}

void fill_ints(Tensor& t, uint64_t seed, int64_t high) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> d(0, high - 1);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, static_cast<double>(d(rng)));
}

void fill_normal(Tensor& t, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, d(rng));
}

Tensor cast(const Tensor& t, DType to) {
  Tensor r(to, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) set(r, i, get(t, i));
  return r;
}

std::vector<Tensor> run_graph(const Graph& g, const std::vector<std::pair<std::string, const Tensor*>>& bindings,
                              const std::vector<EntryRef>& entries) {
  Executor ex(g, plan_separate(g));
  std::vector<Tensor> copies;  // bound copies: ops that update state in place (OpDef::updates) write into them
  copies.reserve(bindings.size());
  for (const auto& [name, t] : bindings) ex.bind(name, copies.emplace_back(clone(*t)).view());
  ex.run();
  std::vector<Tensor> out;
  for (const EntryRef& e : entries) {
    out.push_back(clone(ex.entry(e)));
  }
  return out;
}

std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  Graph g;
  std::vector<EntryRef> ins;
  std::vector<std::pair<std::string, const Tensor*>> bind;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    ins.push_back(g.input(name, inputs[i].type()));
    bind.push_back({name, &inputs[i]});
  }
  const int id = g.add(op, ins, attrs, "op");
  std::vector<EntryRef> outs;
  for (size_t j = 0; j < g.node(id).outputs.size(); ++j) outs.push_back({id, static_cast<int>(j)});
  return run_graph(g, bind, outs);
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.type(), b.type());
  if (a.shape() != b.shape()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = get(a, i), y = get(b, i);
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
    m = std::max(m, std::abs(x - y) / std::max({std::abs(x), std::abs(y), 1.0}));
  }
  return m;
}

double norm_rel_diff(const Tensor& got, const Tensor& want, double floor) {
  EXPECT_EQ(got.shape(), want.shape());
  if (got.shape() != want.shape()) return INFINITY;
  double diff = 0, scale = floor;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double x = get(got, i), y = get(want, i);
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
    diff = std::max(diff, std::abs(x - y));
    scale = std::max(scale, std::abs(y));
  }
  return diff / scale;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.type() == b.type() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

void expect_bitwise_for_any_thread_count(const std::function<std::vector<Tensor>()>& outputs) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<Tensor> one = outputs();
  omp_set_num_threads(std::max(threads, 3));
  const std::vector<Tensor> many = outputs();
  omp_set_num_threads(threads);
  ASSERT_EQ(one.size(), many.size());
  for (size_t j = 0; j < one.size(); ++j) EXPECT_TRUE(bitwise_equal(one[j], many[j])) << "output " << j;
}

}  // namespace mnemo::test

namespace mnemo::test {

Tensor clone(const TensorView& v) {
  Tensor c(v.type);
  if (v.bytes()) std::memcpy(c.data(), v.data, v.bytes());  // (an empty view may have no data)
  return c;
}
Tensor clone(const Tensor& t) { return clone(t.view()); }
Tensor copy(const Tensor& t) { return clone(t); }

Tensor rand64(Shape shape, uint64_t seed, double scale, double offset) {
  Tensor t(DType::f64, std::move(shape));
  fill_normal(t, seed, scale);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, get(t, i) + offset);
  return t;
}

std::vector<Tensor> run(const std::string& op, std::initializer_list<const Tensor*> in, const Attrs& attrs) {
  std::vector<Tensor> v;
  for (const Tensor* t : in) v.push_back(clone(*t));
  return run_op(op, v, attrs);
}

int count_ops(const Graph& g, const std::string& op) {
  int k = 0;
  for (size_t id = 0; id < g.size(); ++id) k += g.node(static_cast<int>(id)).op->name == op;
  return k;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<int> compute_nodes(const Graph& g) {
  std::vector<int> compute;
  for (size_t v = 0; v < g.size(); ++v)
    if (g.node(static_cast<int>(v)).is(OpKind::compute)) compute.push_back(static_cast<int>(v));
  return compute;
}

MirrorPlan mask_plan(const Graph& g, const std::vector<int>& compute, uint32_t mask) {
  MirrorPlan m(g.size(), 0);
  for (size_t i = 0; i < compute.size(); ++i) m[compute[i]] = (mask >> i) & 1u;
  return views_follow(g, m);
}

Graph random_net(std::mt19937& rng, int layers, EntryRef* loss) {
  Graph g;
  const int64_t batch = 2;
  struct Item {
    EntryRef e;
    int64_t width;
  };
  std::vector<Item> pool{{g.input("x", {DType::f64, {batch, 6}}), 6}};
  EntryRef labels = g.input("labels", {DType::i32, {batch}});
  int params = 0;
  auto pick = [&]() { return pool[pool.size() - 1 - (rng() % 3 == 0 ? rng() % pool.size() : rng() % std::min<size_t>(pool.size(), 2))]; };
  auto fc = [&](Item in, int64_t width) {
    const std::string p = "w" + std::to_string(params++);
    EntryRef w = g.param(p, {DType::f64, {width, in.width}});
    return Item{g.add1("fully_connected", {in.e, w}), width};
  };
  pool.push_back(fc(pool[0], 8));
  for (int k = 1; k < layers; ++k) {
    const Item a = pick();
    switch (rng() % 5) {
      case 0: pool.push_back(fc(a, 4 << (rng() % 3))); break;
      case 1: pool.push_back({g.add1(rng() % 2 ? "relu" : "tanh", {a.e}), a.width}); break;
      case 2: pool.push_back({g.add1("concat", {a.e, pick().e}, {{"axis", int64_t{1}}}), 0}); break;
      default: {
        Item b = pick();
        if (b.width != a.width) b = fc(b, a.width), ++k;
        pool.push_back({g.add1(rng() % 2 ? "add" : "mul", {a.e, b.e}), a.width});
      }
    }
    if (pool.back().width == 0) pool.back().width = g.type(pool.back().e).shape[1];
  }
  *loss = g.add1("softmax_cross_entropy", {fc(pool.back(), 3).e, labels});
  return g;
}

float BigConv::hashed(uint64_t i, uint64_t seed) {
  uint64_t z = i + seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E5Bull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1p-24f;
}

double BigConv::sample_error(const float* got, int64_t n, const float* w9, bool transposed) {
  double err = 0, scale = 0;
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < W; ++j) {
      double ref = 0;  // forward: x[i+r-1, j+q-1]; transposed: dy[i-r+1, j-q+1]
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) {
          const int64_t ii = transposed ? i - r + 1 : i + r - 1, jj = transposed ? j - q + 1 : j + q - 1;
          if (ii >= 0 && ii < H && jj >= 0 && jj < W)
            ref += double(w9[r * 3 + q]) * (transposed ? dy_at(n * S + ii * W + jj) : x_at(n * S + ii * W + jj));
        }
      err = std::max(err, std::abs(got[i * W + j] - ref));
      scale = std::max(scale, std::abs(ref));
    }
  return scale > 0 ? err / scale : std::numeric_limits<double>::infinity();
}

void BigConv::weight_grad(double ref[9], double spread[9]) {
  for (int k = 0; k < 9; ++k) ref[k] = spread[k] = 0;
#pragma omp parallel
  {
    double r9[9] = {}, m9[9] = {};
    std::vector<float> xs(S), ds(S);
#pragma omp for
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t i = 0; i < S; ++i) xs[i] = x_at(n * S + i), ds[i] = dy_at(n * S + i);
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) {
          double acc = 0;
          for (int64_t i = std::max(0, 1 - r); i < std::min<int64_t>(H, H + 1 - r); ++i)
            for (int64_t j = std::max(0, 1 - q); j < std::min<int64_t>(W, W + 1 - q); ++j)
              acc += double(ds[i * W + j]) * xs[(i + r - 1) * W + (j + q - 1)];
          r9[r * 3 + q] += acc;
          m9[r * 3 + q] += acc * acc;
        }
    }
#pragma omp critical
    for (int k = 0; k < 9; ++k) ref[k] += r9[k], spread[k] += m9[k];
  }
  for (int k = 0; k < 9; ++k) spread[k] = std::sqrt(spread[k]);
}

}  // namespace mnemo::test
