// lstm_cell and lstm_cell_grad against naive float64 loops (every combination of optional inputs,
// in place, the threaded path), type errors, and the fused LSTM against the fine-grained one
// (model.cell: fused vs ops): the same loss and gradients in float64. (Central differences:
// registry_test's GradCheck; PyTorch: pytorch_match_test; every memory mode: mirror_planner_test.)
#include <cmath>

#include "autograd/gradient.h"
#include "models/lstm.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Ref {
  Tensor h, c, act, dgates, dc_prev;
};

// The cell written out per element; dh, dc, c_prev, gates_h may be null.
Ref naive(const Tensor& a, const Tensor* a2, const Tensor* cp, const Tensor* dh, const Tensor* dc) {
  const int64_t N = a.shape()[0], H = a.shape()[1] / 4;
  Ref r{Tensor(DType::f64, {N, H}), Tensor(DType::f64, {N, H}), Tensor(DType::f64, {N, 4 * H}), Tensor(DType::f64, {N, 4 * H}),
        Tensor(DType::f64, {N, H})};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < H; ++k) {
      auto x = [&](int j) { return get(a, n * 4 * H + j * H + k) + (a2 ? get(*a2, n * 4 * H + j * H + k) : 0.0); };
      const double i = sig(x(0)), f = sig(x(1)), g = std::tanh(x(2)), o = sig(x(3));
      const double c_prev = cp ? get(*cp, n * H + k) : 0.0;
      const double c = f * c_prev + i * g, tc = std::tanh(c);
      const int64_t s = n * H + k;
      set(r.c, s, c), set(r.h, s, o * tc);
      set(r.act, n * 4 * H + k, i), set(r.act, n * 4 * H + H + k, f), set(r.act, n * 4 * H + 2 * H + k, g), set(r.act, n * 4 * H + 3 * H + k, o);
      const double dhv = dh ? get(*dh, s) : 0.0;
      const double dct = (dc ? get(*dc, s) : 0.0) + dhv * o * (1 - tc * tc);
      set(r.dgates, n * 4 * H + k, dct * g * i * (1 - i));
      set(r.dgates, n * 4 * H + H + k, dct * c_prev * f * (1 - f));
      set(r.dgates, n * 4 * H + 2 * H + k, dct * i * (1 - g * g));
      set(r.dgates, n * 4 * H + 3 * H + k, dhv * tc * o * (1 - o));
      set(r.dc_prev, s, dct * f);
    }
  return r;
}

TEST(LstmCell, ForwardAndBackwardMatchNaiveLoops) {
  for (const Shape& shape : {Shape{3, 5}, Shape{64, 128}}) {  // the second takes the threaded path
    const int64_t N = shape[0], H = shape[1];
    Tensor a = rand64({N, 4 * H}, 1, 1.5), a2 = rand64({N, 4 * H}, 2), cp = rand64({N, H}, 3), dh = rand64({N, H}, 4),
           dc = rand64({N, H}, 5);
    for (int inputs = 1; inputs <= 3; ++inputs) {
      const Tensor* pa2 = inputs == 3 ? &a2 : nullptr;
      const Tensor* pcp = inputs >= 2 ? &cp : nullptr;
      std::vector<Tensor> out = inputs == 1 ? run("lstm_cell", {&a}) : inputs == 2 ? run("lstm_cell", {&a, &cp}) : run("lstm_cell", {&a, &cp, &a2});
      ASSERT_EQ(out.size(), 3u);
      const Ref want = naive(a, pa2, pcp, &dh, &dc);
      EXPECT_LE(max_rel_diff(out[0], want.h), 1e-15) << inputs;
      EXPECT_LE(max_rel_diff(out[1], want.c), 1e-15) << inputs;
      EXPECT_LE(max_rel_diff(out[2], want.act), 1e-15) << inputs;
      for (int which = 1; which <= 3; ++which) {  // dh only, dc only, both
        const bool has_dh = which & 1, has_dc = which & 2, has_cp = pcp != nullptr;
        std::vector<Tensor> in;
        in.push_back(clone(want.act));
        in.push_back(clone(want.c));
        if (has_dh) in.push_back(clone(dh));
        if (has_dc) in.push_back(clone(dc));
        if (has_cp) in.push_back(clone(cp));
        const std::vector<Tensor> g =
            run_op("lstm_cell_grad", in, {{"has_dh", has_dh}, {"has_dc", has_dc}, {"has_c_prev", has_cp}});
        const Ref r = naive(a, pa2, pcp, has_dh ? &dh : nullptr, has_dc ? &dc : nullptr);
        ASSERT_EQ(g.size(), has_cp ? 2u : 1u);
        EXPECT_LE(max_rel_diff(g[0], r.dgates), 1e-14) << inputs << " " << which;
        if (has_cp) {
          EXPECT_LE(max_rel_diff(g[1], r.dc_prev), 1e-14) << inputs << " " << which;
        }
      }
    }
  }
}

// In place (gates -> act, act -> dgates) gives bitwise what separate buffers give.
TEST(LstmCell, InPlaceEqualsOutOfPlace) {
  for (DType t : {DType::f32, DType::f64}) {
    const int64_t N = 16, H = 300;
    Tensor a = cast(rand64({N, 4 * H}, 7), t), a2 = cast(rand64({N, 4 * H}, 8), t), cp = cast(rand64({N, H}, 9), t),
           dh = cast(rand64({N, H}, 10), t), dc = cast(rand64({N, H}, 11), t);
    Tensor h(t, {N, H}), c(t, {N, H}), act(t, {N, 4 * H}), inplace = clone(a);
    const OpDef& cell = op_registry().get("lstm_cell");
    auto params = cell.parse ? cell.parse({}) : nullptr;
    std::vector<TensorView> in{a.view(), cp.view(), a2.view()}, out{h.view(), c.view(), act.view()};
    cell.cpu({in, out, params.get()});
    Tensor h2(t, {N, H}), c2(t, {N, H});
    std::vector<TensorView> in2{inplace.view(), cp.view(), a2.view()}, out2{h2.view(), c2.view(), inplace.view()};
    cell.cpu({in2, out2, params.get()});
    EXPECT_TRUE(bitwise_equal(inplace, act));
    EXPECT_TRUE(bitwise_equal(h2, h));
    EXPECT_TRUE(bitwise_equal(c2, c));
    const OpDef& grad = op_registry().get("lstm_cell_grad");
    auto gp = grad.parse(Attrs{});
    Tensor dg(t, {N, 4 * H}), dcp(t, {N, H}), dcp2(t, {N, H});
    std::vector<TensorView> gin{act.view(), c.view(), dh.view(), dc.view(), cp.view()}, gout{dg.view(), dcp.view()};
    grad.cpu({gin, gout, gp.get()});
    std::vector<TensorView> gin2{inplace.view(), c.view(), dh.view(), dc.view(), cp.view()}, gout2{inplace.view(), dcp2.view()};
    grad.cpu({gin2, gout2, gp.get()});
    EXPECT_TRUE(bitwise_equal(inplace, dg));
    EXPECT_TRUE(bitwise_equal(dcp2, dcp));
  }
}

TEST(LstmCell, TypeErrorsAreClear) {
  Graph g;
  EntryRef bad = g.input("gates", {DType::f32, {4, 10}});
  EXPECT_NE(error_of([&] { g.add("lstm_cell", {bad}); }).find("[N, 4H]"), std::string::npos);
  EntryRef gates = g.input("gates2", {DType::f32, {4, 12}});
  EntryRef cp = g.input("c_prev", {DType::f32, {4, 4}});
  EXPECT_NE(error_of([&] { g.add("lstm_cell", {gates, cp}); }).find("c_prev must be float32[4,3]"), std::string::npos)
      << error_of([&] { g.add("lstm_cell", {gates, cp}); });
  EntryRef act = g.input("act", {DType::f32, {4, 12}});
  EntryRef c = g.input("c", {DType::f32, {4, 3}});
  EXPECT_NE(error_of([&] { g.add("lstm_cell_grad", {act, c, c}, {{"has_dh", false}, {"has_dc", false}}); }).find("needs dh or dc"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add("lstm_cell_grad", {act, c, c}); }).find("need 5 inputs"), std::string::npos);
}

// The fused LSTM computes the fine-grained one's loss and gradients (float64, to rounding).
TEST(LstmCell, FusedModelMatchesFineGrainedOps) {
  for (bool per_step : {true, false}) {
    LstmConfig cfg;
    cfg.steps = 5, cfg.batch = 3, cfg.input = 4, cfg.hidden = 6, cfg.layers = 2, cfg.classes = 5;
    cfg.per_step = per_step;
    cfg.dtype = DType::f64;
    BuiltModel ops = build_lstm_model(cfg);
    cfg.fused_cell = true;
    BuiltModel fused = build_lstm_model(cfg);
    const Graph& g_ops = ops.builder.graph();
    const Graph& g_fused = fused.builder.graph();
    EXPECT_LT(g_fused.size() + 8 * cfg.steps * cfg.layers, g_ops.size()) << "the fused graph has fewer nodes";
    std::vector<Tensor> values;
    std::vector<std::pair<std::string, const Tensor*>> bind;
    values.reserve(g_ops.size());
    for (size_t id = 0; id < g_ops.size(); ++id) {
      const Node& n = g_ops.node(static_cast<int>(id));
      if (!n.is(OpKind::param) && !n.is(OpKind::input)) continue;
      Tensor v(n.outputs[0]);
      if (is_float(v.dtype())) fill_normal(v, 100 + id, 0.5);
      else fill_ints(v, 100 + id, cfg.classes);
      values.push_back(std::move(v));
      bind.push_back({n.name, &values.back()});
    }
    const TrainingGraph t_ops = build_training_graph(g_ops, ops.loss, {});
    const TrainingGraph t_fused = build_training_graph(g_fused, fused.loss, {});
    ASSERT_EQ(t_ops.grads.size(), t_fused.grads.size());
    std::vector<EntryRef> e_ops{t_ops.loss}, e_fused{t_fused.loss};
    for (size_t k = 0; k < t_ops.grads.size(); ++k) {
      EXPECT_EQ(t_ops.graph.node(t_ops.grads[k].param).name, t_fused.graph.node(t_fused.grads[k].param).name);
      e_ops.push_back(t_ops.grads[k].grad), e_fused.push_back(t_fused.grads[k].grad);
    }
    const std::vector<Tensor> r_ops = run_graph(t_ops.graph, bind, e_ops), r_fused = run_graph(t_fused.graph, bind, e_fused);
    for (size_t k = 0; k < r_ops.size(); ++k)
      EXPECT_LE(norm_rel_diff(r_fused[k], r_ops[k]), 1e-13) << "per_step " << per_step << " output " << k;
  }
}

}  // namespace
}  // namespace mnemo::test
