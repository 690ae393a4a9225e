// Config files: every shipped config loads and builds; bad input is an error naming
// file:line:column, the key path and what was expected; a mutation fuzz run never crashes.
#include <sys/stat.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "test_util.h"
#include "ops/conv2d.h"
#include "train/config/config.h"

namespace mnemo::test {
namespace {

const std::string kConfigDir = MNEMO_SOURCE_DIR "/configs";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string error_of(const std::string& yaml) {
  try {
    Config c = parse_config(yaml, "t.yaml");
    if (c.model_type != "lstm" || c.data.source.find("synthetic") == 0) build_model(c, static_data_shape(c), c.data.batch);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ShippedConfigsLoadAndBuild) {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(kConfigDir)) {
    if (f.path().extension() != ".yaml") continue;
    ++n;
    Config c = load_config(f.path().string());
    if (c.data.source == "text") continue;
    DataShape ds = static_data_shape(c);
    BuiltModel m = build_model(c, ds, c.data.batch);
    EXPECT_TRUE(m.loss.valid()) << f.path();
    EXPECT_GT(m.builder.graph().size(), 5u) << f.path();
  }
  EXPECT_GE(n, 6);
}

// model.layout: plain and auto on a GPU build plain ResNets, blocked there is an error naming the
// key; on the CPU auto blocks where oneDNN has a block dividing the width, plain otherwise.
TEST(Config, ResNetLayoutFollowsTheDevice) {
  const std::string base = "model: {type: resnet, style: cifar, depth: 8, width: 16, layout: L}\n"
                           "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 2}\ntrain: {steps: 1}\n";
  auto config = [&](const std::string& layout, const std::string& device) {
    std::string y = base;
    y.replace(y.find("layout: L"), 9, "layout: " + layout);
    Config c = parse_config(y, "t.yaml");
    c.device = device;  // (what a config's device or --device sets before the model is built)
    return c;
  };
  for (const char* device : {"cuda", "cuda:1"}) {
    for (const char* layout : {"plain", "auto"}) {
      const Config c = config(layout, device);
      EXPECT_TRUE(build_model(c, static_data_shape(c), 2).layout.empty()) << layout << " on " << device;
    }
    const Config c = config("blocked", device);
    const std::string e = test::error_of([&] { build_model(c, static_data_shape(c), 2); });
    EXPECT_NE(e.find("model.layout: blocked"), std::string::npos) << e;
  }
  const Config cpu = config("auto", "cpu");
  EXPECT_EQ(build_model(cpu, static_data_shape(cpu), 2).layout.empty(), ops::conv::onednn_channel_block() == 0);
  // A batch whose activations may pass oneDNN's 32-bit range runs on the im2col kernels: plain.
  ResNetConfig big;
  big.style = "imagenet", big.layout = "auto", big.height = big.width = 224;
  big.batch = 64;
  EXPECT_EQ(resnet_block(big, "cpu"), ops::conv::onednn_channel_block()) << "ResNet-50's batch 64";
  big.batch = 3000;  // 3000 x 64 x 224 x 224 > 2^31 - 1
  EXPECT_EQ(resnet_block(big, "cpu"), 0) << "ResNet-50's batch 3000";
  Config narrow = config("auto", "cpu");
  narrow.resnet.width_base = 4;  // no block divides it: plain
  EXPECT_TRUE(build_model(narrow, static_data_shape(narrow), 2).layout.empty());
  if (ops::conv::onednn_channel_block() > 0) {  // asked for: an error naming the key and the width
    narrow.resnet.layout = "blocked";
    const std::string e = test::error_of([&] { build_model(narrow, static_data_shape(narrow), 2); });
    EXPECT_NE(e.find("model.layout: blocked"), std::string::npos) << e;
    EXPECT_NE(e.find("model.width is 4"), std::string::npos) << e;
  }
  EXPECT_NE(error_of(base), "");  // "L" is not a layout: the parser names the key
  EXPECT_NE(error_of(base).find("layout"), std::string::npos) << error_of(base);
}

// model.head: fused builds one linear_cross_entropy node in training graphs and the per-step
// classifiers in evaluation graphs (whose logits are scored), on a GPU too; auto, the default,
// resolves per device; a value other than auto, ops or fused names the key.
TEST(Config, LstmFusedHeadTrainsFusedAndEvaluatesPerStep) {
  const std::string base = "model: {type: lstm, layers: 1, hidden: 4, per_step: true, head: H}\n"
                           "data: {source: synthetic-seq, shape: [3, 2], classes: 5, batch: 2}\ntrain: {steps: 1}\n";
  auto yaml = [&](const std::string& head) {
    std::string y = base;
    y.replace(y.find("head: H"), 7, "head: " + head);
    return y;
  };
  Config c = parse_config(yaml("fused"), "t.yaml");
  auto count = [](const BuiltModel& m, const std::string& op) { return test::count_ops(m.builder.graph(), op); };
  const BuiltModel train = build_model(c, static_data_shape(c), 2);
  EXPECT_EQ(count(train, "linear_cross_entropy"), 1);
  EXPECT_EQ(count(train, "softmax_cross_entropy"), 0);
  EXPECT_EQ(count(train, "stack_rows"), 3);  // each step's output written into the stack as it is made
  EXPECT_EQ(count(train, "concat"), 0);
  const BuiltModel eval = build_model(c, static_data_shape(c), 2, false);
  EXPECT_EQ(count(eval, "linear_cross_entropy"), 0);
  EXPECT_EQ(eval.all_logits.size(), 3u);
  const Config ops = parse_config(yaml("ops"), "t.yaml");
  EXPECT_EQ(count(build_model(ops, static_data_shape(ops), 2), "linear_cross_entropy"), 0);
  c.device = "cuda";  // (the CUDA backend has the fused head's kernels too)
  EXPECT_EQ(count(build_model(c, static_data_shape(c), 2), "linear_cross_entropy"), 1);
  EXPECT_NE(error_of(yaml("fuse")).find("model.head"), std::string::npos) << error_of(yaml("fuse"));
  // auto, the default: fused for per-step classifiers on the CPU; the per-step ops on a GPU (whose
  // fused kernels have not yet run on one) and for one classifier at the end.
  Config dflt = parse_config(yaml("auto"), "t.yaml");
  EXPECT_EQ(dflt.lstm_head, "auto");
  const BuiltModel auto_cpu = build_model(dflt, static_data_shape(dflt), 2);
  EXPECT_EQ(count(auto_cpu, "linear_cross_entropy"), 1);
  EXPECT_EQ(auto_cpu.head, "fused");
  EXPECT_EQ(auto_cpu.report_note(), " (fused head)");
  std::string unset = base;
  unset.replace(unset.find(", head: H"), 9, "");
  EXPECT_EQ(parse_config(unset, "t.yaml").lstm_head, "auto");
  dflt.device = "cuda:0";
  const BuiltModel auto_gpu = build_model(dflt, static_data_shape(dflt), 2);
  EXPECT_EQ(count(auto_gpu, "linear_cross_entropy"), 0);
  EXPECT_EQ(auto_gpu.head, "ops");
  dflt.device = "cpu";
  dflt.lstm.per_step = false;
  DataShape last = static_data_shape(dflt);
  EXPECT_EQ(count(build_model(dflt, last, 2), "linear_cross_entropy"), 0);
}

TEST(Config, ReferenceModelsHaveTheirDepths) {
  Config r20 = load_config(kConfigDir + "/resnet20-fashion-mnist.yaml");
  EXPECT_EQ(build_model(r20, static_data_shape(r20), 8).layers, 20);
  Config r56 = load_config(kConfigDir + "/resnet56-cifar.yaml");
  EXPECT_EQ(build_model(r56, static_data_shape(r56), 8).layers, 56);
  Config r1000 = load_config(kConfigDir + "/resnet1000-imagenet.yaml");
  EXPECT_EQ(build_model(r1000, static_data_shape(r1000), 32).layers, 1001);
  Config lstm = load_config(kConfigDir + "/lstm-paper.yaml");
  BuiltModel m = build_model(lstm, static_data_shape(lstm), lstm.data.batch);
  EXPECT_EQ(m.builder.graph().type(m.all_logits[0]), (TensorType{DType::f32, {64, 5000}}));
  EXPECT_EQ(m.all_logits.size(), 64u);
}

struct BadCase {
  const char* yaml;
  const char* where;    // "line:col" expected in the message
  const char* message;  // substring expected in the message
};

TEST(Config, BadInputNamesFileLineKeyAndExpectation) {
  const std::string base = "data: {source: synthetic, shape: [3, 8, 8], classes: 4, batch: 2}\ntrain: {steps: 1}\n";
  const BadCase cases[] = {
      {"model:\n  type: resnet\n  dept: 20\n", "t.yaml:3:3", "model.dept: expected a known key"},
      {"model:\n  type: resnet\n  depth: twenty\n", "t.yaml:3:10", "model.depth: expected an integer in [1, 20000], got 'twenty'"},
      {"model:\n  type: resnet\n  depth: 21\n", "t.yaml:2:3", "6n+2"},
      {"model:\n  type: transformer\n", "t.yaml:2:9", "model.type: expected one of resnet, lstm, graph"},
      {"model:\n  type: resnet\n  style: imagenet\n  depth: 77\n", "t.yaml:", "give model.blocks"},
      {"model: [1, 2]\n", "t.yaml:1:8", "model: expected a mapping"},
      {"model:\n  type: resnet\n  depth: 20\noptimizer: {lr: -1}\n", "t.yaml:4:17", "optimizer.lr: expected a number in [0, 3.40282e+38]"},
      {"model:\n  type: resnet\n  depth: 20\nmemory: shared\n", "t.yaml:4:9", "memory: expected a memory mode: none, inplace, share, drop-bn-relu"},
      {"model:\n  type: resnet\n  depth: 20\norder: fastest\n", "t.yaml:4:8", "order: expected one of default, greedy, optimal, updates-last"},
      {"model:\n  type: resnet\n  depth: 20\nplacement_seconds: -1\n", "t.yaml:4:20", "placement_seconds: expected a number in [0, 86400]"},
      {"model:\n  type: resnet\n  depth: 20\nplacement_seconds: soon\n", "t.yaml:4:20", "placement_seconds: expected a number"},
      {"model:\n  type: resnet\n  depth: 20\nparallel: {bucket_bytes: -1}\n", "t.yaml:4:26", "parallel.bucket_bytes: expected an integer in [0, 2147483647]"},
      {"model:\n  type: resnet\n  depth: 20\nparallel: {timeout_s: 0}\n", "t.yaml:4:23", "parallel.timeout_s: expected a finite number >= 1"},
      {"model:\n  type: resnet\n  depth: 20\nparallel: {buckets: 4}\n", "t.yaml:4:12", "parallel.buckets: expected a known key"},
      {"model:\n  type: resnet\n  depth: 20\nparallel: {reduce_one_rank: 3}\n", "t.yaml:4:29", "parallel.reduce_one_rank: expected"},
      {"model:\n  type: resnet\n  depth: 20\ntrain: {steps: 1, epochs: 2}\n", "t.yaml:", "exactly one of train.steps or train.epochs"},
      {"model:\n  type: resnet\n  depth: 20\n  blocks: [1, 2]\n", "t.yaml:", "cifar ResNet takes depth"},
      {"model:\n  type: resnet\n  depth: 20\n  x: [1, 2\n", "t.yaml:", "invalid YAML"},
      // Integers are range-checked, never wrapped (4294967316 = 2^32 + 20 once built a 20-layer net).
      {"model:\n  type: resnet\n  depth: 4294967316\n", "t.yaml:3:10", "model.depth: expected an integer in [1, 20000], got '4294967316'"},
      {"model:\n  type: resnet\n  depth: 99999999999999999999\n", "t.yaml:3:10", "model.depth: expected an integer in [1, 20000]"},
      {"model:\n  type: resnet\n  depth: 20\ntrain: {steps: 2000000000}\n", "t.yaml:4:16", "train.steps: expected an integer in [1, 1000000000]"},
      {"model:\n  type: resnet\n  depth: 20\n  width: 3000000000\n", "t.yaml:4:10", "model.width: expected an integer in [1, 65536]"},
      // Integers in decimal only (yaml-cpp reads 010 as octal 8 and 0x10 as 16).
      {"model:\n  type: resnet\n  depth: 020\n", "t.yaml:3:10", "model.depth: expected an integer in [1, 20000] (decimal digits), got '020'"},
      {"model:\n  type: resnet\n  depth: 0x14\n", "t.yaml:3:10", "model.depth: expected an integer in [1, 20000] (decimal digits), got '0x14'"},
      {"model:\n  type: resnet\n  depth: 20\ntrain: {steps: +0010}\n", "t.yaml:4:16", "train.steps: expected an integer in [1, 1000000000] (decimal"},
      // Numbers are finite (.inf was a learning rate).
      {"model:\n  type: resnet\n  depth: 20\noptimizer: {lr: .inf}\n", "t.yaml:4:17", "optimizer.lr: expected a number in [0, 3.40282e+38], got '.inf'"},
      // Finite as a double, inf in float32 (the step's type): it failed at step 1.
      {"model:\n  type: resnet\n  depth: 20\noptimizer: {lr: 1e40}\n", "t.yaml:4:17", "optimizer.lr: expected a number in [0, 3.40282e+38], got '1e40'"},
      {"model:\n  type: resnet\n  depth: 20\nplacement_seconds: .inf\n", "t.yaml:4:20", "placement_seconds: expected a number in [0, 86400]"},
      {"model:\n  type: resnet\n  depth: 20\nplacement_seconds: 1e99\n", "t.yaml:4:20", "placement_seconds: expected a number in [0, 86400]"},
      // One document: a second after `---` was ignored.
      {"model:\n  type: resnet\n  depth: 20\n---\nmodel: {type: lstm}\n", "t.yaml:4:", "a second YAML document ('---')"},
      // Duplicate keys are an error (yaml-cpp would keep the first silently).
      {"model:\n  type: resnet\n  depth: 20\n  depth: 56\n", "t.yaml:4:3", "key 'depth' appears twice (first at line 3)"},
      // Aliases are refused before the document is built (a chain of them expands exponentially).
      {"x: &a [1, 2]\ny: [*a, *a]\nmodel:\n  type: resnet\n", "t.yaml:2:5", "YAML aliases (*name) are not accepted"},
  };
  for (const BadCase& bc : cases) {
    std::string yaml = bc.yaml;
    if (yaml.find("train:") == std::string::npos && yaml.find("[1, 2\n") == std::string::npos) yaml += base;
    else if (yaml.find("[1, 2\n") == std::string::npos) yaml += "data: {source: synthetic, shape: [3, 8, 8], classes: 4, batch: 2}\n";
    const std::string err = error_of(yaml);
    EXPECT_NE(err.find(bc.where), std::string::npos) << "expected " << bc.where << " in: " << err << "\nfor:\n" << yaml;
    EXPECT_NE(err.find(bc.message), std::string::npos) << "expected '" << bc.message << "' in: " << err << "\nfor:\n" << yaml;
  }
}

// Files that are not regular (a device, a FIFO, a directory, /proc) or too large are refused up
// front instead of being read for ever or into gigabytes.
TEST(Config, OnlyRegularFilesOfASaneSizeAreRead) {
  TempDir d;
  for (const std::string& path : {std::string("/dev/zero"), std::string("/dev/null"), d.path.string(), std::string("/proc/self/status")}) {
    const std::string e = test::error_of([&] { load_config(path); });
    EXPECT_TRUE(e.find("is not a regular file") != std::string::npos || e.find("kernel interface file") != std::string::npos)
        << path << ": " << e;
  }
  const std::string fifo = (d.path / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(test::error_of([&] { load_config(fifo); }).find("is not a regular file (a FIFO)"), std::string::npos);
  const std::string big = d.file("big.yaml", std::string(kMaxConfigBytes + 1, '#'));
  EXPECT_NE(test::error_of([&] { load_config(big); }).find("the limit is 4194304 bytes"), std::string::npos);
  EXPECT_NE(test::error_of([&] { load_config(d.file("missing.yaml")); }).find("cannot open config file"), std::string::npos);
}

TEST(Config, GenericGraphErrorsNameTheNode) {
  std::string g = read(kConfigDir + "/mlp-graph.yaml");
  std::string bad = g;
  bad.replace(bad.find("inputs: [h2, a1]"), 16, "inputs: [h2, a9]");
  EXPECT_NE(error_of(bad).find("node 'sum': input 'a9' names no input, param or node"), std::string::npos) << error_of(bad);
  bad = g;
  bad.replace(bad.find("op: tanh"), 8, "op: tanhh");
  EXPECT_NE(error_of(bad).find("model.nodes[3].op: expected a registered op"), std::string::npos) << error_of(bad);
  bad = g;
  bad.replace(bad.find("w2: {shape: [64, 32]"), 20, "w2: {shape: [64, 31]");
  const std::string e = error_of(bad);
  EXPECT_NE(e.find("mlp"), std::string::npos == 0 ? 0 : 0);
  EXPECT_NE(e.find("node 'h2'"), std::string::npos) << e;
  bad = g;
  bad.replace(bad.find("inputs: [data, w1, b1]"), 22, "inputs: [sum, w1, b1]");
  EXPECT_NE(error_of(bad).find("cycle"), std::string::npos) << error_of(bad);
  // The cycle itself, in data order, at its node's line (it named a node downstream, 'loss', and no line).
  EXPECT_NE(error_of(bad).find("t.yaml:23:7: the graph has a cycle through node 'sum': 'h1' -> 'a1' -> 'halves' -> 'gated' -> "
                               "'h2' -> 'sum' -> 'h1'"),
            std::string::npos)
      << error_of(bad);
  // An output index past the last (the message said "has 2 output(s), not 2").
  bad = g;
  bad.replace(bad.find("[\"halves:1\"]"), 12, "[\"halves:2\"]");
  EXPECT_NE(error_of(bad).find("node 'gate': input 'halves:2': 'halves' has 2 output(s), numbered from 0: no output 2"),
            std::string::npos)
      << error_of(bad);
  // A loss that is not a scalar, named with the file and key (it was autograd's message alone).
  bad = g;
  bad.replace(bad.find("loss: loss"), 10, "loss: sum");
  EXPECT_NE(error_of(bad).find("model.loss 'sum' must be a float scalar (a loss node's output), got float32["), std::string::npos)
      << error_of(bad);
  EXPECT_NE(error_of(bad).find("t.yaml:"), std::string::npos) << error_of(bad);
  // The training step's own ops (the all-reduce pair, the loss check): it failed at step 1 naming
  // mpirun, or ran silently with ranks: 1.
  for (const char* op : {"grad_allreduce_start", "grad_allreduce_wait", "finite_check"}) {
    bad = g;
    bad.replace(bad.find("op: tanh"), 8, std::string("op: ") + op);
    EXPECT_NE(error_of(bad).find("node 'a1': op '" + std::string(op) + "' is the training step's own"), std::string::npos)
        << error_of(bad);
  }
  // data.classes other than the logits' width (it failed at run time only when a label fell
  // outside the logits, and trained on a subset of them silently when smaller).
  for (const char* classes : {"classes: 4", "classes: 7"}) {
    bad = g;
    bad.replace(bad.find("classes: 5"), 10, classes);
    EXPECT_NE(error_of(bad).find("model.logits 'logits' is float32[32,5]: 5 classes in its last dimension, but the data has " +
                                 std::string(classes + 9)),
              std::string::npos)
        << error_of(bad);
  }
}

// A key given where it does not apply is refused, naming it and where it applies (each was read
// and ignored: milestones without type: step kept lr constant, fashion-mnist with size: 100 trained
// on 60000 examples, checkpoint.every without a dir wrote nothing).
TEST(Config, KeysThatDoNotApplyAreRefused) {
  const std::string model = "model: {type: resnet, depth: 8, width: 4}\n";
  const std::string data = "data: {source: synthetic, shape: [3, 8, 8], batch: 2}\n";
  const std::string train = "train: {steps: 1}\n";
  EXPECT_EQ(error_of(model + data + train + "schedule: {type: step, milestones: [1], gamma: 0.5}\n"), "");
  const std::pair<std::string, std::string> cases[] = {
      {model + data + train + "schedule: {milestones: [1], gamma: 0.1}\n",
       "schedule.milestones: expected no milestones here: milestones applies to schedule.type step; the schedule is constant "
       "(schedule.type's default), got a list"},
      {model + data + train + "schedule: {type: cosine, gamma: 0.1}\n", "schedule.gamma: expected no gamma here"},
      {model + data + train + "schedule: {type: step, milestones: [1], min_lr: 0.1}\n",
       "schedule.min_lr: expected no min_lr here: min_lr applies to schedule.type cosine; the schedule is step"},
      {model + "data: {source: fashion-mnist, batch: 2, size: 100}\n" + train,
       "data.size: expected no size here: size describes synthetic data (data.source is fashion-mnist, whose files fix it)"},
      {model + "data: {source: cifar10, path: /nonexistent, batch: 2, classes: 4}\n" + train, "data.classes: expected no classes here"},
      {model + "data: {source: synthetic, shape: [3, 8, 8], batch: 2, path: /x}\n" + train, "data.path: expected no path here"},
      {model + "data: {source: synthetic, shape: [3, 8, 8], batch: 2, steps: 7}\n" + train, "data.steps: expected no steps here"},
      {model + data + train + "checkpoint: {every: 1}\n",
       "checkpoint.every: expected no every here: checkpoints go to checkpoint.dir, which is not given"},
      {model + "data: {source: synthetic, shape: [3, 8, 8], batch: 2, eval: false}\ntrain: {steps: 1, eval_every: 1}\n",
       "train.eval_every: expected no eval_every here: data.eval is false"},
  };
  for (const auto& [yaml, want] : cases) EXPECT_NE(error_of(yaml).find(want), std::string::npos) << yaml << "\n" << error_of(yaml);
}

// Mutations of valid configs (byte flips, deletions, duplicated lines, swapped values): loading
// and building either succeed or throw mnemo::Error; nothing else escapes and nothing crashes.
TEST(Config, MutationFuzzOnlyEverThrowsMnemoErrors) {
  std::vector<std::string> seeds;
  for (const auto& f : std::filesystem::directory_iterator(kConfigDir))
    if (f.path().extension() == ".yaml" && f.path().filename() != "resnet1000-imagenet.yaml") seeds.push_back(read(f.path()));
  std::mt19937 rng(7);
  const std::string alphabet = " :-[]{},#\n\t\"'0123456789abcxyz.e";
  int errors = 0, ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      const size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: s.erase(pos, 1 + rng() % 8); break;
        case 2: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        default: {
          const size_t a = s.rfind('\n', pos), b = s.find('\n', pos);
          if (a != std::string::npos && b != std::string::npos) s.insert(b, s.substr(a, b - a));
        }
      }
    }
    try {
      Config c = parse_config(s, "fuzz.yaml");
      if (c.data.source.find("synthetic") == 0 && c.data.batch <= 256) {
        DataShape ds = static_data_shape(c);
        if (numel(ds.sample) * c.data.batch < (1 << 22)) build_model(c, ds, c.data.batch);
      }
      ++ok;
    } catch (const Error& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find("fuzz.yaml"), std::string::npos) << "error without the file name: " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-mnemo exception " << e.what() << " for:\n" << s;
    }
  }
  EXPECT_GT(errors, 500);
  EXPECT_GT(ok, 100);
}

}  // namespace
}  // namespace mnemo::test
