// core/: attributes, graph construction and its errors, dumps, topological order, the trivial
// memory plan, the executor's binding rules, and the median of measurements.
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/stats.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

TEST(Attrs, TypedReadsDefaultsAndErrors) {
  Attrs a{{"stride", int64_t{2}}, {"pad", std::vector<int64_t>{1, 0}}, {"eps", 1e-3}, {"train", true}};
  AttrReader r(a, "op");
  EXPECT_EQ(r.get_ints_n("stride", 2, 1), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.get_ints_n("pad", 2, 0), (std::vector<int64_t>{1, 0}));
  EXPECT_DOUBLE_EQ(r.get_float("eps", 0), 1e-3);
  EXPECT_TRUE(r.get_bool("train", false));
  EXPECT_EQ(r.get_int("missing", 7), 7);
  EXPECT_NO_THROW(r.finish());

  AttrReader bad(a, "op");
  EXPECT_THROW(bad.get_bool("stride", false), Error);
  try {
    AttrReader r3(a, "conv");
    r3.get_ints_n("pad", 3, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must have 3 values"), std::string::npos) << e.what();
  }
  AttrReader partial(a, "conv");
  partial.get_int("stride", 1);
  try {
    partial.finish();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown attribute(s) eps, pad, train"), std::string::npos) << e.what();
  }
}

TEST(Graph, InferenceErrorsNameTheNodeAndTypes) {
  Graph g;
  EntryRef a = g.input("a", {DType::f32, {2, 3}});
  EntryRef b = g.input("b", {DType::f32, {3, 2}});
  try {
    g.add("add", {a, b}, {}, "bad_add");
    FAIL();
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("bad_add"), std::string::npos) << w;
    EXPECT_NE(w.find("float32[2,3]"), std::string::npos) << w;
  }
  EXPECT_THROW(g.add("relu", {a, b}), Error);                 // wrong input count
  EXPECT_THROW(g.add("relu", {EntryRef{7, 0}}), Error);       // missing entry
  EXPECT_THROW(g.input("a", {DType::f32, {1}}), Error);       // duplicate name
  EXPECT_THROW(g.add("relu", {g.input("labels", {DType::i32, {4}})}), Error);  // int into float op
}

TEST(Graph, DumpsAreCompleteAndParseable) {
  Graph g;
  EntryRef x = g.input("x", {DType::f32, {2, 3}});
  EntryRef w = g.param("w", {DType::f32, {4, 3}});
  EntryRef y = g.add1("fully_connected", {x, w}, {}, "fc");
  EntryRef z = g.add1("relu", {y}, {}, "act");
  g.outputs.push_back(z);
  const std::string text = g.to_text();
  EXPECT_NE(text.find("act = relu(fc) -> float32[2,4]"), std::string::npos) << text;
  EXPECT_NE(text.find("output act"), std::string::npos) << text;
  nlohmann::json j = nlohmann::json::parse(g.to_json().dump());
  ASSERT_EQ(j["nodes"].size(), 4u);
  EXPECT_EQ(j["nodes"][2]["op"], "fully_connected");
  EXPECT_EQ(j["nodes"][2]["inputs"][1][0], 1);
  EXPECT_EQ(j["nodes"][3]["outputs"][0]["shape"], (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(j["nodes"][1]["attrs"]["shape"], (std::vector<int64_t>{4, 3}));
  const std::string dot = g.to_dot();
  EXPECT_NE(dot.find("n0 -> n2"), std::string::npos);
  EXPECT_NE(dot.find("n1 -> n2"), std::string::npos);
  EXPECT_NE(dot.find("n2 -> n3"), std::string::npos);
}

TEST(Graph, PermuteMovesNodesRenumbersEveryReferenceAndKeepsNames) {
  Graph g;
  const EntryRef x = g.input("x", {DType::f32, {2, 3}});   // 0
  const EntryRef a = g.add1("relu", {x}, {}, "a");         // 1
  const EntryRef s = g.param("s", {DType::f32, {2, 3}});   // 2
  const EntryRef dead = g.add1("tanh", {x}, {}, "dead");   // 3: not listed, nothing reads it
  const EntryRef b = g.add1("add", {a, s}, {}, "b");       // 4
  g.outputs = {b};
  g.state_updates.push_back({s.node, a});
  // s first, then x, b's inputs before it; `dead` removed.
  const std::vector<int> new_id = g.permute({2, 0, 1, 4});
  EXPECT_EQ(new_id, (std::vector<int>{1, 2, 0, -1, 3}));
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g.node(0).name, "s");
  EXPECT_EQ(g.node(3).name, "b");
  EXPECT_EQ(g.node(3).inputs, (std::vector<EntryRef>{{2, 0}, {0, 0}}));
  EXPECT_EQ(g.node(2).inputs, (std::vector<EntryRef>{{1, 0}}));
  EXPECT_EQ(g.outputs, (std::vector<EntryRef>{{3, 0}}));
  ASSERT_EQ(g.state_updates.size(), 1u);
  EXPECT_EQ(g.state_updates[0].param, 0);
  EXPECT_EQ(g.state_updates[0].value, (EntryRef{2, 0}));
  EXPECT_EQ(g.find("x"), 1);
  EXPECT_EQ(g.find("b"), 3);
  EXPECT_EQ(g.find("dead"), -1);
  (void)dead;
  EXPECT_NO_THROW(g.add("relu", {{3, 0}}, {}, "dead"));  // the removed name is free again
  EXPECT_THROW(g.add("relu", {{3, 0}}, {}, "a"), Error);  // the kept ones are not

  // Refused, and the graph left as it was: an order that is not topological, a removed node
  // still read by a node or an output, a node listed twice.
  const std::string before = g.to_text();
  EXPECT_THROW(g.permute({0, 2, 1, 3, 4}), Error);  // a (2) before x (1)
  EXPECT_THROW(g.permute({0, 1, 2, 4}), Error);     // b (3) removed, read by node 4
  EXPECT_THROW(g.permute({0, 1, 2}), Error);        // b (3) removed with its reader, but it is an output
  EXPECT_THROW(g.permute({0, 1, 1, 2, 3, 4}), Error);
  EXPECT_EQ(g.to_text(), before);
}

TEST(Graph, DeferredNamesAreGivenWhenTheNodeIsNamed) {
  Graph g;
  const EntryRef x = g.input("x", {DType::f32, {2}});
  g.add("relu", {x}, {}, "y");
  g.defer_names(true);
  const int u = g.add("relu", {x});
  EXPECT_EQ(g.node(u).name, "");
  EXPECT_EQ(g.find(""), -1);
  const int named = g.add("relu", {x}, {}, "z");  // an explicit name is still checked and indexed
  EXPECT_EQ(g.find("z"), named);
  EXPECT_THROW(g.add("relu", {x}, {}, "y"), Error);
  try {  // an error in a node added unnamed names it by its id
    g.add("relu", {x, x});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("new node " + std::to_string(g.size()) + " (relu): takes 1 inputs"), std::string::npos) << e.what();
  }
  g.name_unnamed(u, "y");  // taken: the first free of y_1, y_2, ...
  EXPECT_EQ(g.node(u).name, "y_1");
  EXPECT_EQ(g.find("y_1"), u);
  const int v = g.add("relu", {x});
  g.name_unnamed(v, "w");
  EXPECT_EQ(g.node(v).name, "w");
  EXPECT_THROW(g.name_unnamed(v, "w2"), Error);  // named already
  g.defer_names(false);
  const int auto_named = g.add("relu", {x});
  EXPECT_FALSE(g.node(auto_named).name.empty());
  EXPECT_EQ(g.find(g.node(auto_named).name), auto_named);
}

TEST(Graph, TopologicalOrderKeepsListedOrderAndFindsCycles) {
  // a reads c, b reads a, d is free: among ready nodes the lowest listed index goes first.
  std::vector<std::vector<int>> preds{{2}, {0}, {}, {}};
  std::vector<std::string> names{"a", "b", "c", "d"};
  EXPECT_EQ(topological_order(preds, names), (std::vector<int>{2, 0, 1, 3}));
  std::vector<std::vector<int>> cyc{{1}, {0}, {}};
  try {
    topological_order(cyc, {"a", "b", "c"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle through node 'a'"), std::string::npos) << e.what();
  }
  // A node downstream of the cycle (listed first here) is not named: the cycle is, in data order.
  try {
    topological_order({{1}, {2}, {1}}, {"z", "b", "c"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a cycle through node 'b': 'c' -> 'b' -> 'c'"), std::string::npos) << e.what();
  }
}

TEST(Executor, AllocatesExactlyThePlanAndChecksBindings) {
  Graph g;
  EntryRef x = g.input("x", {DType::f32, {5, 7}});
  EntryRef y = g.add1("relu", {x}, {}, "r1");
  g.add1("sigmoid", {y}, {}, "s1");
  MemoryPlan plan = plan_separate(g);
  EXPECT_EQ(plan.arena_bytes, 2 * align_up(5 * 7 * 4));
  Executor ex(g, plan);
  EXPECT_EQ(ex.allocated_bytes(), plan.arena_bytes);
  EXPECT_THROW(ex.run(), Error);  // x unbound
  Tensor wrong(DType::f32, {7, 5});
  EXPECT_THROW(ex.bind("x", wrong.view()), Error);
  EXPECT_THROW(ex.bind("nope", wrong.view()), Error);
  EXPECT_THROW(ex.bind("r1", wrong.view()), Error);  // not an input
  Tensor xv(DType::f32, {5, 7});
  fill_distinct(xv, 1);
  ex.bind("x", xv.view());
  ex.run();
  const float* out = ex.entry({g.find("s1"), 0}).as<float>();
  for (int i = 0; i < 35; ++i) {
    const float r = std::max(xv.as<float>()[i], 0.f);
    EXPECT_FLOAT_EQ(out[i], 1.f / (1.f + std::exp(-r)));
  }
}

// Rebinding swaps only addresses, also those seen through a view: each run reads the latest binding.
TEST(Executor, RebindingReachesReadersAndViews) {
  Graph g;
  const EntryRef x = g.input("x", {DType::f32, {2, 6}});
  const EntryRef v = g.add1("reshape", {x}, {{"shape", std::vector<int64_t>{3, 4}}}, "v");
  g.add1("relu", {v}, {}, "r");
  Executor ex(g, plan_separate(g));
  EXPECT_NE(error_of([&] { ex.run(); }).find("run: input node 'x' (float32[2,6]) is not bound"), std::string::npos);
  Tensor a(DType::f32, {2, 6}), b(DType::f32, {2, 6});
  fill_distinct(a, 1);
  fill_distinct(b, 2);
  for (const Tensor* t : {&a, &b, &a}) {
    ex.bind("x", t->view());
    ex.run();
    const Tensor r = ex.fetch({g.find("r"), 0});
    for (int i = 0; i < 12; ++i) EXPECT_EQ(r.as<float>()[i], std::max(t->as<float>()[i], 0.0f)) << i;
  }
}

TEST(Executor, RejectsPlansThatDoNotFit) {
  Graph g;
  g.add1("relu", {g.input("x", {DType::f32, {4}})}, {}, "r");
  MemoryPlan plan = plan_separate(g);
  plan.arena_bytes = 8;  // too small for float32[4]
  EXPECT_THROW(Executor(g, plan), Error);
}

TEST(Tensor, TypesAndErrors) {
  Tensor t(DType::f64, {2, 3});
  EXPECT_EQ(t.bytes(), 48u);
  EXPECT_EQ(t.type().str(), "float64[2,3]");
  EXPECT_THROW(t.as<float>(), Error);
  EXPECT_THROW(Tensor(DType::f32, {2, -1}), Error);
  EXPECT_THROW(parse_dtype("float16"), Error);
  Tensor s(DType::f32, {});
  EXPECT_EQ(s.numel(), 1);
}

TEST(Stats, MedianOfOddAndEvenCounts) {
  // An even count's median is the mean of the middle two (mnemo bench and tools/bench_ops use this).
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({0.25, 0.5}), 0.375);
  EXPECT_EQ(median({7.0}), 7.0);
  EXPECT_EQ(median({5.0, 5.0, 1.0, 9.0, 9.0, 9.0}), 7.0);
  EXPECT_TRUE(std::isnan(median({})));
}

}  // namespace
}  // namespace mnemo::test
