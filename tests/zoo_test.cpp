// The zoo builders (models/zoo.cpp) against torchvision's own figures, read from
// tests/fixtures/zoo_reference.json (written by tools/zoo_reference.py with torchvision): exact
// parameter counts, forward FLOPs of convolutions and matrix products within 1% (the ResNets of
// models/resnet.cpp too), and parameter
// names and shapes that map a torchvision state dict by renaming; config errors.
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/config/config.h"

namespace mnemo::test {
namespace {

const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    std::ifstream f(MNEMO_SOURCE_DIR "/tests/fixtures/zoo_reference.json");
    EXPECT_TRUE(f.good()) << "tests/fixtures/zoo_reference.json missing";
    return nlohmann::json::parse(f);
  }();
  return j;
}

bool is_resnet(const std::string& name) { return name.rfind("resnet", 0) == 0; }

// The fixture's ResNets -> mnemo's ImageNet ResNet (models/resnet.cpp), batch 2.
BuiltModel resnet(const std::string& name, const std::vector<int64_t>& input) {
  ResNetConfig c;
  c.style = "imagenet";
  c.depth = std::stoi(name.substr(6));
  c.batch = 2, c.channels = input.at(0), c.height = input.at(1), c.width = input.at(2), c.classes = 1000;
  return build_resnet(c);
}

// The fixture's model name -> mnemo's config.
ZooConfig zoo_config(const std::string& name, const std::vector<int64_t>& input) {
  ZooConfig c;
  c.batch = 2, c.channels = input.at(0), c.height = input.at(1), c.width = input.at(2), c.classes = 1000;
  if (name == "alexnet" || name == "mobilenet_v2") {
    c.arch = name;
  } else if (name.rfind("vgg", 0) == 0) {
    c.arch = "vgg";
    c.depth = std::stoi(name.substr(3, 2));
    c.batch_norm = name.ends_with("_bn");
  } else if (name.rfind("densenet", 0) == 0) {
    c.arch = "densenet";
    c.depth = std::stoi(name.substr(8));
  } else if (name.rfind("inception_v3", 0) == 0) {
    c.arch = "inception_v3";
    c.aux_logits = name.ends_with("_aux");
  } else {
    ADD_FAILURE() << "unknown fixture model " << name;
  }
  return c;
}

TEST(Zoo, FixtureCoversEveryArchitecture) {
  std::set<std::string> archs;
  for (const auto& [name, ref] : reference().at("models").items())
    if (!is_resnet(name)) archs.insert(zoo_config(name, ref.at("input").get<std::vector<int64_t>>()).arch);
  EXPECT_EQ(archs, (std::set<std::string>{"alexnet", "vgg", "densenet", "inception_v3", "mobilenet_v2"}));
  EXPECT_GE(reference().at("models").size(), 16u);
}

TEST(Zoo, ParameterCountsEqualTorchvisionAndFlopsWithinOnePercent) {
  for (const auto& [name, ref] : reference().at("models").items()) {
    SCOPED_TRACE(name);
    const std::vector<int64_t> input = ref.at("input").get<std::vector<int64_t>>();
    const BuiltModel m = is_resnet(name) ? resnet(name, input) : build_zoo_model(zoo_config(name, input));
    const ModelStats st = model_stats(m.builder);
    EXPECT_EQ(st.params, ref.at("params").get<int64_t>());
    // The fixture counts batch 1; built at batch 2 (batch norm needs two values per channel in
    // Inception's auxiliary head, whose last map is 1x1).
    const double want = ref.at("forward_flops").get<double>(), got = st.matmul_flops / 2;
    ASSERT_GT(want, 0);
    EXPECT_LE(std::abs(got - want) / want, 0.01) << "mnemo " << got << " FLOPs, torchvision " << want;
  }
}

// torchvision's state dict names, '.' -> '/', batch norm weight/bias -> gamma/beta: every entry
// is a mnemo parameter of the same shape, and every mnemo parameter is an entry.
TEST(Zoo, ParameterNamesAndShapesMapTorchvisionStateDicts) {
  int checked = 0;
  for (const auto& [name, ref] : reference().at("models").items()) {
    if (!ref.contains("state")) continue;
    SCOPED_TRACE(name);
    const BuiltModel m = build_zoo_model(zoo_config(name, ref.at("input").get<std::vector<int64_t>>()));
    std::map<std::string, Shape> ours;
    for (const ParamSpec& s : m.builder.params()) ours[s.name] = m.builder.graph().node(s.node).outputs[0].shape;
    std::set<std::string> mapped;
    for (const auto& [key, shape] : ref.at("state").items()) {
      std::string n = key;
      std::replace(n.begin(), n.end(), '.', '/');
      const size_t slash = n.rfind('/');
      const std::string prefix = n.substr(0, slash), leaf = n.substr(slash + 1);
      if (leaf == "weight" && ours.count(prefix + "/gamma")) n = prefix + "/gamma";
      if (leaf == "bias" && ours.count(prefix + "/beta")) n = prefix + "/beta";
      auto it = ours.find(n);
      if (it == ours.end()) {
        ADD_FAILURE() << "torchvision's " << key << " has no mnemo parameter " << n;
        continue;
      }
      EXPECT_EQ(it->second, Shape(shape.get<std::vector<int64_t>>())) << key;
      mapped.insert(n);
    }
    for (const auto& [n, shape] : ours) EXPECT_TRUE(mapped.count(n)) << "mnemo's " << n << " is not in torchvision's state dict";
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

TEST(Zoo, ConfigsSelectTheArchitecture) {
  const Config c = parse_config("model: {type: vgg, depth: 11, batch_norm: true}\n"
                                "data: {source: synthetic, shape: [3, 224, 224], classes: 10, batch: 2}\n"
                                "train: {steps: 1}\n",
                                "vgg.yaml");
  EXPECT_EQ(c.zoo.arch, "vgg");
  const BuiltModel m = build_model(c, static_data_shape(c), 2, true);
  EXPECT_EQ(m.builder.graph().type(m.logits).shape, (Shape{2, 10}));
  EXPECT_EQ(m.layers, 11);
}

// DARTS's CIFAR network with its DARTS_V2 genotype (C = 36, 20 cells, 10 classes) has the
// 3,349,342 parameters the DARTS training script reports for it (its count excludes the auxiliary
// head, which mnemo does not build); a genotype given in the config is read as written.
TEST(Zoo, DartsNetworkFromAGenotype) {
  const std::string data = "data: {source: synthetic, shape: [3, 32, 32], classes: 10, batch: 2}\ntrain: {steps: 1}\n";
  Config c = parse_config("model: {type: darts}\n" + data, "darts.yaml");
  EXPECT_EQ(model_stats(build_model(c, static_data_shape(c), 2, true).builder).params, 3349342);
  c = parse_config("model:\n  type: darts\n  init_channels: 8\n  layers: 4\n  genotype:\n"
                   "    normal: [[sep_conv_5x5, 0], [avg_pool_3x3, 1], [dil_conv_5x5, 2], [skip_connect, 0]]\n"
                   "    normal_concat: [2, 3]\n"
                   "    reduce: [[max_pool_3x3, 0], [skip_connect, 1], [dil_conv_3x3, 2], [sep_conv_3x3, 1]]\n"
                   "    reduce_concat: [2, 3]\n" + data, "darts2.yaml");
  ASSERT_EQ(c.zoo.genotype.normal.size(), 4u);
  EXPECT_EQ(c.zoo.genotype.normal[2], (std::pair<std::string, int>{"dil_conv_5x5", 2}));
  EXPECT_EQ(c.zoo.genotype.reduce_concat, (std::vector<int>{2, 3}));
  const BuiltModel m = build_model(c, static_data_shape(c), 2, true);
  EXPECT_EQ(m.builder.graph().type(m.logits).shape, (Shape{2, 10}));
}

// Every shipped Table 2 config parses and builds (the NAS rows' genotypes included) at its batch.
TEST(Zoo, Table2ConfigsBuild) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(MNEMO_SOURCE_DIR "/configs/table2")) {
    SCOPED_TRACE(e.path().string());
    const Config c = load_config(e.path().string());
    const BuiltModel m = build_model(c, static_data_shape(c), c.data.batch, true);
    EXPECT_EQ(m.builder.graph().type(m.logits).shape, (Shape{c.data.batch, c.data.classes}));
    ++n;
  }
  EXPECT_EQ(n, 18);
}

TEST(Zoo, BadConfigsAndInputSizesAreClearErrors) {
  auto error = [](const std::string& yaml) {
    try {
      const Config c = parse_config(yaml, "zoo.yaml");
      build_model(c, static_data_shape(c), c.data.batch, true);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string data = "data: {source: synthetic, shape: [3, 224, 224], classes: 10, batch: 2}\ntrain: {steps: 1}\n";
  std::string m = error("model: {type: vgg, depth: 12}\n" + data);
  EXPECT_NE(m.find("11, 13, 16 or 19"), std::string::npos) << m;
  m = error("model: {type: densenet, depth: 100}\n" + data);
  EXPECT_NE(m.find("121, 161, 169 or 201"), std::string::npos) << m;
  m = error("model: {type: alexnet, depth: 5}\n" + data);
  EXPECT_NE(m.find("model.depth"), std::string::npos) << m;
  m = error("model: {type: mobilenet_v2, width_mult: 0}\n" + data);
  EXPECT_NE(m.find("width_mult"), std::string::npos) << m;
  const std::string small = "data: {source: synthetic, shape: [3, 40, 40], classes: 10, batch: 2}\ntrain: {steps: 1}\n";
  m = error("model:\n  type: darts\n  genotype: {normal: [[conv_7x7, 0], [skip_connect, 1]], reduce: [[max_pool_3x3, 0], "
            "[max_pool_3x3, 1]], normal_concat: [2], reduce_concat: [2]}\n" + data);
  EXPECT_NE(m.find("unknown operation 'conv_7x7'"), std::string::npos) << m;
  m = error("model:\n  type: darts\n  genotype: {normal: [[skip_connect, 5], [skip_connect, 1]], reduce: [[max_pool_3x3, 0], "
            "[max_pool_3x3, 1]], normal_concat: [2], reduce_concat: [2]}\n" + data);
  EXPECT_NE(m.find("reads state 5"), std::string::npos) << m;
  m = error("model: {type: darts, genotype: {normal: [sep_conv_3x3]}}\n" + data);
  EXPECT_NE(m.find("[operation, input state] pair"), std::string::npos) << m;
  m = error("model: {type: vgg}\n" + small);
  EXPECT_NE(m.find("adaptive pool to 7x7"), std::string::npos) << m;
  m = error("model: {type: inception_v3}\n" + small);
  EXPECT_NE(m.find("at least 75x75"), std::string::npos) << m;
}

}  // namespace
}  // namespace mnemo::test
