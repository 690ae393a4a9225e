// `mnemo curve`: CSV rows per value and mode, slopes, plots (when gnuplot exists), and errors.
#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "train/session/curve.h"

namespace mnemo::test {
namespace {

TEST(Curve, WritesCsvSlopesAndPlots) {
  const std::string out = (std::filesystem::temp_directory_path() / ("mnemo_curve_" + std::to_string(::getpid()))).string();
  CurveOptions o;
  o.model = MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml";
  o.vary = "depth";
  o.values = {14, 26, 56};
  o.modes = {"share", "sublinear"};
  o.out = out;
  o.plot = std::system("gnuplot --version > /dev/null 2>&1") == 0;
  ASSERT_EQ(run_curve(o), 0);
  std::ifstream csv(out + "/curve.csv");
  std::string line;
  int rows = 0;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("model,vary,value,layers,mode,feature_map_bytes", 0), 0u) << line;
  std::map<std::string, std::vector<long long>> fm;
  while (std::getline(csv, line)) {
    ++rows;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    fm[f[4]].push_back(std::stoll(f[5]));
  }
  EXPECT_EQ(rows, 6);
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(fm["sublinear"][i], fm["share"][i]);
  EXPECT_LT(fm["share"][0], fm["share"][2]);
  EXPECT_TRUE(std::filesystem::exists(out + "/slopes.csv"));
  if (o.plot) {
    EXPECT_GT(std::filesystem::file_size(out + "/feature_map.png"), 1000u);
  }
  std::filesystem::remove_all(out);
}

TEST(Curve, BadArgumentsAreClearErrors) {
  CurveOptions o;
  o.model = "lstm";
  o.vary = "depth";
  o.values = {16};
  o.modes = {"share"};
  o.out = (std::filesystem::temp_directory_path() / "mnemo_curve_bad").string();
  EXPECT_THROW(run_curve(o), Error);  // depth of an LSTM
  o.model = "resnet";
  o.values = {60};  // not 3k + 2
  EXPECT_THROW(run_curve(o), Error);
  o.values = {50};
  o.modes = {"shared"};
  EXPECT_THROW(run_curve(o), Error);
  std::filesystem::remove_all(o.out);
  for (int64_t depth : {50, 299, 1001}) {
    const std::vector<int> b = bottleneck_blocks_for_depth(depth);
    EXPECT_EQ(3 * (b[0] + b[1] + b[2] + b[3]) + 2, depth);
  }
}

}  // namespace
}  // namespace mnemo::test
