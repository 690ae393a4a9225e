// ONNX import (train/config/onnx_import.cpp): a small model with weights reproduces PyTorch's loss
// and every gradient (tests/fixtures/onnx, made by tools/make_onnx_fixtures.py); structure-only
// exports of torchvision models import with torchvision's parameter counts and the zoo builders'
// exact FLOPs, and plan in every memory mode; malformed and unsupported files are clear errors
// naming the file, the node and the operator.
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "test_util.h"
#include "train/config/config.h"
#include "train/config/onnx_import.h"
#include "train/session/pipeline.h"
#include "train/session/safetensors.h"
#include "train/session/session.h"

namespace mnemo::test {
namespace {

const std::string kDir = MNEMO_FIXTURE_DIR "/onnx/";

TEST(Onnx, SmallModelWithWeightsMatchesPyTorch) {
  TempDir d;
  const OnnxImport imp = import_onnx(kDir + "small.onnx");
  ASSERT_EQ(imp.weights.size(), 11u);  // 9 trainable tensors and the batch norm's running statistics
  std::vector<std::pair<std::string, TensorView>> views;
  for (const auto& [name, t] : imp.weights) views.push_back({name, t.view()});
  GradOptions g;
  g.config = d.file("small.yaml", imp.yaml);
  g.weights = d.file("small.safetensors");
  write_safetensors(g.weights, views);
  g.batch = kDir + "small_batch.safetensors";
  g.out = d.file("grads.safetensors");
  ASSERT_EQ(run_grad(g), 0);
  const TensorFile out = read_safetensors(g.out), want = read_safetensors(kDir + "small_expected.safetensors");
  int grads = 0;
  for (const auto& [name, t] : want.tensors) {
    ASSERT_TRUE(out.tensors.count(name)) << name << " missing from mnemo's output";
    EXPECT_LE(norm_rel_diff(out.tensors.at(name), t), 1e-4) << name;
    grads += name != "loss";
  }
  EXPECT_EQ(grads, 9);
}

int64_t fixture_params(const std::string& model) {
  std::ifstream f(MNEMO_FIXTURE_DIR "/zoo_reference.json");
  return nlohmann::json::parse(f).at("models").at(model).at("params").get<int64_t>();
}

// Structure-only exports: the parameters are graph inputs; the imported graph has torchvision's
// parameter count and exactly the FLOPs of mnemo's own builder of the same network.
TEST(Onnx, StructureOnlyTorchvisionExportsMatchTheZooBuilders) {
  struct Case { std::string file, fixture; ZooConfig zoo; };
  ZooConfig dn, inc, mb;
  dn.arch = "densenet", dn.depth = 121;
  inc.arch = "inception_v3", inc.height = inc.width = 299;
  mb.arch = "mobilenet_v2";
  for (const Case& c : {Case{"densenet121_structure.onnx", "densenet121", dn}, Case{"inception_v3_structure.onnx", "inception_v3", inc},
                        Case{"mobilenet_v2_structure.onnx", "mobilenet_v2", mb}, Case{"resnet18_structure.onnx", "resnet18", {}}}) {
    SCOPED_TRACE(c.file);
    const OnnxImport imp = import_onnx(kDir + c.file);
    EXPECT_TRUE(imp.weights.empty());
    const Config cfg = parse_config(imp.yaml, c.file);
    const Pipeline p = build_pipeline(cfg, static_data_shape(cfg), cfg.data.batch);
    const ModelStats st = model_stats(p.model.builder);
    EXPECT_EQ(st.params, fixture_params(c.fixture));
    EXPECT_EQ(cfg.data.batch, 2);
    if (!c.zoo.arch.empty()) {
      ZooConfig z = c.zoo;
      z.batch = 2;
      EXPECT_EQ(st.matmul_flops, model_stats(build_zoo_model(z).builder).matmul_flops);
    }
  }
  // Every memory mode plans (and validates) the imported ResNet-18.
  const Config cfg = parse_config(import_onnx(kDir + "resnet18_structure.onnx").yaml, "resnet18.onnx");
  const Pipeline p = build_pipeline(cfg, static_data_shape(cfg), cfg.data.batch);
  int64_t share = 0, sublinear = 0;
  for (const std::string& m : all_memory_modes()) {
    const MirrorResult mr = plan_pipeline(cfg, p, m);
    validate_plan(mr.training.graph, mr.planned.plan);
    if (m == "share") share = mr.planned.report.feature_map_bytes;
    if (m == "sublinear") sublinear = mr.planned.report.feature_map_bytes;
  }
  EXPECT_LT(sublinear, share);
}

TEST(Onnx, BatchOptionSetsTheBatchSize) {
  const Config cfg = parse_config(import_onnx(kDir + "resnet18_structure.onnx", {5}).yaml, "resnet18.onnx");
  EXPECT_EQ(cfg.data.batch, 5);
  EXPECT_EQ(cfg.graph.inputs[0].shape, (Shape{5, 3, 224, 224}));
}

// A one-node model built with the ONNX classes.
std::string write_model(TempDir& d, const std::string& name, const std::function<void(onnx::GraphProto&)>& edit) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("t");
  auto value = [](onnx::ValueInfoProto* v, const std::string& n, std::vector<int64_t> dims) {
    v->set_name(n);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t x : dims) t->mutable_shape()->add_dim()->set_dim_value(x);
  };
  value(g.add_input(), "x", {2, 4});
  value(g.add_output(), "y", {2, 4});
  edit(g);
  std::string bytes;
  m.SerializeToString(&bytes);
  return d.file(name, bytes);
}

std::string import_error(const std::string& path) {
  try {
    import_onnx(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// MatMul by a [in, out] parameter and the Add of a [out] bias: one linear layer, its weight stored
// transposed ([out, in], as fully_connected reads it).
TEST(Onnx, MatMulPlusBiasBecomesALinearLayer) {
  TempDir d;
  const std::string path = write_model(d, "linear.onnx", [](onnx::GraphProto& g) {
    g.mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(3);
    auto* w = g.add_initializer();
    w->set_name("lin.weight"), w->set_data_type(onnx::TensorProto::FLOAT), w->add_dims(4), w->add_dims(3);
    for (int i = 0; i < 12; ++i) w->add_float_data(static_cast<float>(i));
    auto* b = g.add_initializer();
    b->set_name("lin.bias"), b->set_data_type(onnx::TensorProto::FLOAT), b->add_dims(3);
    for (int i = 0; i < 3; ++i) b->add_float_data(0.5f * i);
    auto* mm = g.add_node();
    mm->set_op_type("MatMul"), mm->add_input("x"), mm->add_input("lin.weight"), mm->add_output("xw");
    auto* add = g.add_node();
    add->set_op_type("Add"), add->add_input("xw"), add->add_input("lin.bias"), add->add_output("y");
  });
  const OnnxImport imp = import_onnx(path);
  ASSERT_EQ(imp.weights.size(), 2u);
  const Tensor& w = imp.weights[0].second;
  EXPECT_EQ(imp.weights[0].first, "lin/weight");
  ASSERT_EQ(w.shape(), (Shape{3, 4}));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(w.as<float>()[c * 4 + r], static_cast<float>(r * 3 + c)) << r << "," << c;
  const Config cfg = parse_config(imp.yaml, "linear.yaml");
  const BuiltModel m = build_model(cfg, static_data_shape(cfg), 2, true);
  const Node& fc = m.builder.graph().node(m.logits.node);
  EXPECT_EQ(fc.op->name, "fully_connected");
  EXPECT_EQ(fc.inputs.size(), 3u);  // x, weight, bias
}

// Slice as PyTorch exports x[:, 1:]: ends = INT64_MAX ("to the end"), read exactly; a negative
// start counts from the end.
TEST(Onnx, OpenEndedAndNegativeSlices) {
  TempDir d;
  auto ints = [](onnx::GraphProto& g, const std::string& name, int64_t v) {
    auto* t = g.add_initializer();
    t->set_name(name), t->set_data_type(onnx::TensorProto::INT64), t->add_dims(1), t->add_int64_data(v);
  };
  for (const auto& [start, want_begin] : {std::pair<int64_t, int64_t>{1, 1}, {-3, 1}}) {
    const std::string path = write_model(d, "slice.onnx", [&, start = start](onnx::GraphProto& g) {
      g.mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(3);
      ints(g, "starts", start), ints(g, "ends", INT64_MAX), ints(g, "axes", 1);
      auto* n = g.add_node();
      n->set_op_type("Slice"), n->set_name("cut");
      for (const char* in : {"x", "starts", "ends", "axes"}) n->add_input(in);
      n->add_output("y");
    });
    const Config cfg = parse_config(import_onnx(path).yaml, "slice.yaml");
    const BuiltModel m = build_model(cfg, static_data_shape(cfg), 2, true);
    const Node& cut = m.builder.graph().node(m.logits.node);
    EXPECT_EQ(cut.op->name, "slice");
    EXPECT_EQ(std::get<int64_t>(cut.attrs.at("begin")), want_begin);
    EXPECT_FALSE(cut.attrs.count("end"));
    EXPECT_EQ(m.builder.graph().type(m.logits).shape, (Shape{2, 3}));
  }
  // An axis outside the rank is an error naming the node, not a crash.
  const std::string bad = write_model(d, "slice_axis.onnx", [&](onnx::GraphProto& g) {
    ints(g, "starts", 0), ints(g, "ends", 2), ints(g, "axes", -5);
    auto* n = g.add_node();
    n->set_op_type("Slice"), n->set_name("cut");
    for (const char* in : {"x", "starts", "ends", "axes"}) n->add_input(in);
    n->add_output("y");
  });
  const std::string m = import_error(bad);
  EXPECT_NE(m.find("node 'cut' (Slice): axis -5 is outside the input's rank 2"), std::string::npos) << m;
}

// ReduceMean over H and W (the dynamo exporter's adaptive average pool), axes given as an input.
TEST(Onnx, ReduceMeanOverHeightAndWidthIsAGlobalAveragePool) {
  TempDir d;
  const std::string path = write_model(d, "mean.onnx", [](onnx::GraphProto& g) {
    auto* dims = g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    dims->add_dim()->set_dim_value(3), dims->add_dim()->set_dim_value(3);
    auto* axes = g.add_initializer();
    axes->set_name("axes"), axes->set_data_type(onnx::TensorProto::INT64), axes->add_dims(2);
    axes->add_int64_data(-1), axes->add_int64_data(2);
    auto* n = g.add_node();
    n->set_op_type("ReduceMean"), n->add_input("x"), n->add_input("axes"), n->add_output("y");
    auto* k = n->add_attribute();
    k->set_name("keepdims"), k->set_type(onnx::AttributeProto::INT), k->set_i(0);
  });
  const Config cfg = parse_config(import_onnx(path).yaml, "mean.yaml");
  const BuiltModel m = build_model(cfg, static_data_shape(cfg), 2, true);
  EXPECT_EQ(m.builder.graph().node(m.logits.node).op->name, "global_avg_pool");
  EXPECT_EQ(m.builder.graph().type(m.logits).shape, (Shape{2, 4}));
}

TEST(Onnx, UnsupportedAndMalformedModelsAreClearErrors) {
  TempDir d;
  std::string m = import_error(write_model(d, "erf.onnx", [](onnx::GraphProto& g) {
    auto* n = g.add_node();
    n->set_op_type("Erf"), n->set_name("my_erf"), n->add_input("x"), n->add_output("y");
  }));
  EXPECT_NE(m.find("erf.onnx: node 'my_erf' (Erf): unsupported ONNX operator"), std::string::npos) << m;
  m = import_error(write_model(d, "bcast.onnx", [](onnx::GraphProto& g) {
    auto* b = g.add_initializer();
    b->set_name("b"), b->set_data_type(onnx::TensorProto::FLOAT), b->add_dims(4);
    for (int i = 0; i < 4; ++i) b->add_float_data(1);
    auto* n = g.add_node();
    n->set_op_type("Add"), n->set_name("plus"), n->add_input("x"), n->add_input("b"), n->add_output("y");
  }));
  EXPECT_NE(m.find("node 'plus' (Add)"), std::string::npos) << m;
  m = import_error(write_model(d, "pads.onnx", [](onnx::GraphProto& g) {
    g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(5);
    g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(5);
    auto* n = g.add_node();
    n->set_op_type("MaxPool"), n->set_name("pool"), n->add_input("x"), n->add_output("y");
    auto* k = n->add_attribute();
    k->set_name("kernel_shape"), k->set_type(onnx::AttributeProto::INTS), k->add_ints(2), k->add_ints(2);
    auto* p = n->add_attribute();
    p->set_name("pads"), p->set_type(onnx::AttributeProto::INTS);
    for (int v : {0, 0, 1, 1}) p->add_ints(v);
  }));
  EXPECT_NE(m.find("asymmetric pads"), std::string::npos) << m;
  m = import_error(write_model(d, "open.onnx", [](onnx::GraphProto& g) {
    g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
    auto* n = g.add_node();
    n->set_op_type("Relu"), n->add_input("x"), n->add_output("y");
  }));
  EXPECT_NE(m.find("--batch"), std::string::npos) << m;
  // A node without inputs or outputs, and a parameter whose data does not fill its declared shape.
  m = import_error(write_model(d, "noin.onnx", [](onnx::GraphProto& g) {
    auto* n = g.add_node();
    n->set_op_type("Relu"), n->set_name("lonely"), n->add_output("y");
  }));
  EXPECT_NE(m.find("node 'lonely' (Relu): needs 1 input(s)"), std::string::npos) << m;
  m = import_error(write_model(d, "noout.onnx", [](onnx::GraphProto& g) {
    auto* n = g.add_node();
    n->set_op_type("Relu"), n->set_name("sink"), n->add_input("x");
  }));
  EXPECT_NE(m.find("node 'sink' (Relu): the node has no output"), std::string::npos) << m;
  m = import_error(write_model(d, "short.onnx", [](onnx::GraphProto& g) {
    g.mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(3);
    auto* w = g.add_initializer();
    w->set_name("w"), w->set_data_type(onnx::TensorProto::FLOAT), w->add_dims(3), w->add_dims(4);
    for (int i = 0; i < 5; ++i) w->add_float_data(1);
    auto* n = g.add_node();
    n->set_op_type("Gemm"), n->set_name("fc"), n->add_input("x"), n->add_input("w"), n->add_output("y");
    auto* t = n->add_attribute();
    t->set_name("transB"), t->set_type(onnx::AttributeProto::INT), t->set_i(1);
  }));
  EXPECT_NE(m.find("holds 5 values for its 12 elements"), std::string::npos) << m;
  // A value made twice (invalid ONNX: it was imported with the later one renamed), an output of one
  // class and a batch of 0 (refused naming the YAML file about to be written, and its line).
  m = import_error(write_model(d, "twice.onnx", [](onnx::GraphProto& g) {
    auto* a = g.add_node();
    a->set_op_type("Relu"), a->set_name("r1"), a->add_input("x"), a->add_output("h");
    auto* b = g.add_node();
    b->set_op_type("Relu"), b->set_name("r2"), b->add_input("x"), b->add_output("h");
    auto* c = g.add_node();
    c->set_op_type("Relu"), c->set_name("r3"), c->add_input("h"), c->add_output("y");
  }));
  EXPECT_NE(m.find("twice.onnx: node 'r2' (Relu): its output 'h' is already a graph input, initializer or another node's output"),
            std::string::npos) << m;
  // y = relu(x) with dimension `dim` of both x and y set to `value`.
  auto relu_with = [](int dim, int64_t value) {
    return [=](onnx::GraphProto& g) {
      for (auto* v : {g.mutable_input(0), g.mutable_output(0)})
        v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(dim)->set_dim_value(value);
      auto* n = g.add_node();
      n->set_op_type("Relu"), n->set_name("r"), n->add_input("x"), n->add_output("y");
    };
  };
  m = import_error(write_model(d, "one_class.onnx", relu_with(1, 1)));
  EXPECT_NE(m.find("one_class.onnx: the output 'y' has 1 class(es) (shape [2,1]); a softmax classifier needs at least 2"),
            std::string::npos) << m;
  m = import_error(write_model(d, "empty_batch.onnx", relu_with(0, 0)));
  EXPECT_NE(m.find("empty_batch.onnx: the data input 'x' has a batch of 0; training needs at least 1"), std::string::npos) << m;
  // A stride of 0 ended the process (SIGFPE in ONNX's own shape inference, which divides by it):
  // checked before it, in Conv and in pooling.
  auto conv = [](const std::vector<int64_t>& strides, const std::vector<int64_t>& kernel) {
    return [=](onnx::GraphProto& g) {
      for (int64_t x : {5, 5}) g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(x);
      auto* w = g.add_initializer();
      w->set_name("w"), w->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t x : {2, 4, 3, 3}) w->add_dims(x);
      for (int i = 0; i < 2 * 4 * 3 * 3; ++i) w->add_float_data(1);
      auto* n = g.add_node();
      n->set_op_type("Conv"), n->set_name("conv"), n->add_input("x"), n->add_input("w"), n->add_output("y");
      auto* a = n->add_attribute();
      a->set_name("strides"), a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : strides) a->add_ints(v);
      if (!kernel.empty()) {
        auto* k = n->add_attribute();
        k->set_name("kernel_shape"), k->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : kernel) k->add_ints(v);
      }
    };
  };
  m = import_error(write_model(d, "stride0.onnx", conv({1, 0}, {})));
  EXPECT_NE(m.find("stride0.onnx: node 'conv' (Conv): strides must be >= 1, got 0"), std::string::npos) << m;
  m = import_error(write_model(d, "pool0.onnx", [](onnx::GraphProto& g) {
    for (int64_t x : {5, 5}) g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(x);
    auto* n = g.add_node();
    n->set_op_type("AveragePool"), n->set_name("pool"), n->add_input("x"), n->add_output("y");
    auto* k = n->add_attribute();
    k->set_name("kernel_shape"), k->set_type(onnx::AttributeProto::INTS), k->add_ints(2), k->add_ints(2);
    auto* st = n->add_attribute();
    st->set_name("strides"), st->set_type(onnx::AttributeProto::INTS), st->add_ints(2), st->add_ints(0);
  }));
  EXPECT_NE(m.find("node 'pool' (AveragePool): strides must be >= 1, got 0"), std::string::npos) << m;
  // kernel_shape is the weight's (mnemo takes the kernel from the weight): a different one was
  // ignored.
  m = import_error(write_model(d, "kshape.onnx", conv({1, 1}, {5, 5})));
  EXPECT_NE(m.find("node 'conv' (Conv): kernel_shape [5,5] is not the weight's [2,4,3,3] kernel"), std::string::npos) << m;
  // A NaN bound of Clip was dropped (ReLU6 became ReLU).
  m = import_error(write_model(d, "clipnan.onnx", [](onnx::GraphProto& g) {
    auto* hi = g.add_initializer();
    hi->set_name("hi"), hi->set_data_type(onnx::TensorProto::FLOAT), hi->add_float_data(std::nanf(""));
    auto* n = g.add_node();
    n->set_op_type("Clip"), n->set_name("clip"), n->add_input("x"), n->add_input(""), n->add_input("hi"), n->add_output("y");
  }));
  EXPECT_NE(m.find("node 'clip' (Clip): its max bound is NaN"), std::string::npos) << m;
  // BatchNormalization's momentum, checked in ONNX's terms (the error named the config's 1 - 2).
  m = import_error(write_model(d, "bnmom.onnx", [](onnx::GraphProto& g) {
    auto* n = g.add_node();
    n->set_op_type("BatchNormalization"), n->set_name("bn"), n->add_input("x");
    for (const char* name : {"gamma", "beta", "mean", "var"}) {
      auto* t = g.add_initializer();
      t->set_name(name), t->set_data_type(onnx::TensorProto::FLOAT), t->add_dims(4);
      for (int i = 0; i < 4; ++i) t->add_float_data(1);
      n->add_input(name);
    }
    n->add_output("y");
    auto* a = n->add_attribute();
    a->set_name("momentum"), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(2);
  }));
  EXPECT_NE(m.find("node 'bn' (BatchNormalization): momentum must be in [0, 1], got 2"), std::string::npos) << m;
  m = import_error(d.file("junk.onnx", "this is not a protobuf message at all \x01\x02\x03"));
  EXPECT_NE(m.find("junk.onnx: not an ONNX model"), std::string::npos) << m;
  std::ofstream(d.file("empty.onnx")).close();
  m = import_error(d.file("empty.onnx"));
  EXPECT_NE(m.find("empty"), std::string::npos) << m;
}

}  // namespace
}  // namespace mnemo::test
