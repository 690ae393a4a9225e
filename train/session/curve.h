// `mnemo curve`: memory (and recompute) versus depth, sequence length or batch, per memory mode,
// from exact static plans (shapes only: nothing runs). Writes DIR/curve.csv (one row per value
// and mode, docs/MEMORY.md column names), DIR/slopes.csv (log-log slope of feature_map_bytes and
// total_bytes per mode) and log-log plots DIR/feature_map.png and DIR/total.png drawn by gnuplot,
// one line per mode, like Chen et al. Fig. 5a / 6a.
// --vary budget: one config, `budget=SIZE` planned at each budget (MiB values, or --budgets N
// from share's total down to the least feasible total), beside the --memory modes as points:
// DIR/curve.csv (mode "budget" rows carry the budget in bytes as value) and DIR/tradeoff.png
// (total bytes against recompute overhead).
#pragma once
#include <string>
#include <vector>

namespace mnemo {

struct CurveOptions {
  std::string model;                // "resnet" (ImageNet-style, batch 32, 3x224x224), "lstm" (the paper's) or a config file
  std::string vary = "depth";       // depth (ResNet), seq (LSTM), batch (any)
  std::vector<int64_t> values;      // vary budget: MiB
  int budgets = 0;                  // vary budget: this many budgets from share's total to the least feasible
  std::vector<std::string> modes;   // memory modes
  std::string out = "out/curve";
  bool plot = true;
  std::string device = "cpu";       // plan for this device (its workspace sizes): cpu, cuda, cuda:N
};

int run_curve(const CurveOptions& opt);

// ImageNet-style bottleneck block counts for a depth (3 * blocks + 2 layers): the standard ones
// for 50/101/152/200, otherwise stages 1 and 4 hold 3 blocks and the rest is split 1:3 between
// stages 2 and 3 (about the 3/80/247/3 of configs/resnet1000-imagenet.yaml). Throws if depth - 2 is not a multiple of 3.
std::vector<int> bottleneck_blocks_for_depth(int64_t depth);

}  // namespace mnemo
