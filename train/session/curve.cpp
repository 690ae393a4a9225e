// Memory curves (see curve.h).
#include "train/session/curve.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "train/config/files.h"
#include "train/session/device_state.h"
#include "train/session/pipeline.h"
#include "train/session/session.h"

namespace mnemo {

// --memory's modes: each one known, none twice (each point was planned twice, its CSV rows repeated).
static void check_memory_modes(const std::vector<std::string>& modes) {
  for (size_t i = 0; i < modes.size(); ++i) {
    parse_memory_mode(modes[i]);
    MNEMO_CHECK(std::find(modes.begin(), modes.begin() + i, modes[i]) == modes.begin() + i) << "--memory: " << modes[i] << " is given twice";
  }
}

std::vector<int> bottleneck_blocks_for_depth(int64_t depth) {
  switch (depth) {
    case 50: return {3, 4, 6, 3};
    case 101: return {3, 4, 23, 3};
    case 152: return {3, 8, 36, 3};
    case 200: return {3, 24, 36, 3};
  }
  MNEMO_CHECK(depth >= 26 && (depth - 2) % 3 == 0)
      << "--values: an ImageNet-style bottleneck ResNet has 3 * blocks + 2 layers (at least 26), got depth " << depth;
  const int rest = static_cast<int>((depth - 2) / 3) - 6;
  const int s2 = std::max(1, (rest + 2) / 4);
  return {3, s2, rest - s2, 3};
}

namespace {

Config base_config(const std::string& model) {
  if (model == "resnet")
    // (plain activations: the paper's graph, the same plan on every machine)
    return parse_config("model: {type: resnet, style: imagenet, block: bottleneck, blocks: [3, 4, 6, 3], layout: plain}\n"
                        "data: {source: synthetic, shape: [3, 224, 224], classes: 1000, batch: 32}\n"
                        "optimizer: {momentum: 0.9}\ntrain: {steps: 1}\n",
                        "resnet (ImageNet-style, batch 32, 3x224x224)");
  if (model == "lstm")
    return parse_config("model: {type: lstm, layers: 4, hidden: 1024, per_step: true, head: ops}\n"
                        "data: {source: synthetic-seq, shape: [64, 50], classes: 5000, batch: 64}\n"
                        "optimizer: {momentum: 0.9}\ntrain: {steps: 1}\n",
                        "lstm (the paper's: 4 x 1024, batch 64, input 50, 5000 classes)");
  return load_config(model);
}

Config with_value(Config c, const std::string& vary, int64_t v) {
  if (vary == "batch") {
    MNEMO_CHECK(v >= 1) << "--values: a batch must be >= 1, got " << v;
    set_batch(c, v);
  } else if (vary == "depth") {
    MNEMO_CHECK(c.model_type == "resnet") << "--vary depth needs a ResNet model, " << c.file << " is a " << c.model_type;
    if (c.resnet.style == "cifar") {
      c.resnet.depth = static_cast<int>(v);
      c.resnet.blocks.clear();
    } else {
      c.resnet.blocks = bottleneck_blocks_for_depth(v);
      c.resnet.block = "bottleneck";
    }
  } else if (vary == "seq") {
    MNEMO_CHECK(c.model_type == "lstm" && c.data.shape.size() == 2) << "--vary seq needs an LSTM on synthetic sequences";
    MNEMO_CHECK(v >= 1) << "--values: a sequence length must be >= 1, got " << v;
    c.data.shape[0] = v;
    c.lstm.steps = v;
  } else {
    MNEMO_FAIL() << "--vary must be depth, seq or batch, got '" << vary << "'";
  }
  return c;
}

// A gnuplot single-quoted string literal: quotes are doubled.
std::string gp_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("''") : std::string(1, ch);
  return q + "'";
}

double slope(const std::vector<std::pair<double, double>>& xy) {
  if (xy.size() < 2) return NAN;
  double mx = 0, my = 0;
  for (const auto& [x, y] : xy) mx += std::log(x), my += std::log(y);
  mx /= xy.size(), my /= xy.size();
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : xy) sxy += (std::log(x) - mx) * (std::log(y) - my), sxx += (std::log(x) - mx) * (std::log(x) - mx);
  return sxx > 0 ? sxy / sxx : NAN;
}

}  // namespace

namespace {

const char* kCsvHeader =
    "model,vary,value,layers,mode,feature_map_bytes,workspace_bytes,param_bytes,param_grad_bytes,optimizer_bytes,"
    "input_bytes,total_bytes,max_live_bytes,fragmentation,step_flops,recompute_flops,recompute_overhead,planning_seconds,"
    "balance,step_cost,recompute_cost,recompute_cost_overhead\n";

void csv_row(std::ostream& csv, const CurveOptions& opt, int64_t v, int layers, const std::string& m, const MemoryReport& r) {
  csv << opt.model << ',' << opt.vary << ',' << v << ',' << layers << ',' << m << ',' << r.feature_map_bytes << ','
      << r.workspace_bytes << ',' << r.param_bytes << ',' << r.param_grad_bytes << ',' << r.optimizer_bytes << ','
      << r.input_bytes << ',' << r.total_bytes << ',' << r.max_live_bytes << ',' << r.fragmentation << ',' << r.step_flops
      << ',' << r.recompute_flops << ',' << recompute_overhead(r) << ',' << r.planning_seconds << ',' << r.balance << ',' << r.step_cost
      << ',' << r.recompute_cost << ',' << recompute_cost_overhead(r) << '\n';
  csv.flush();
}

// Runs DIR/plot.gp; false (with a message) when gnuplot fails or is missing.
bool run_gnuplot(const std::string& dir) {
  const std::string cmd = "gnuplot '" + dir + "/plot.gp' 2>&1";
  if (std::system(cmd.c_str()) == 0) return true;
  std::fprintf(stderr, "mnemo curve: gnuplot failed or is not installed (apt-get install gnuplot-nox); the CSV is written\n");
  return false;
}

// --vary budget: the time-memory trade-off of budget=SIZE on one config.
int run_budget_curve(const CurveOptions& opt) {
  MNEMO_CHECK(opt.values.empty() != (opt.budgets == 0)) << "--vary budget: give either --values (MiB) or --budgets N";
  for (int64_t v : opt.values) MNEMO_CHECK(v >= 1 && v <= 1 << 30) << "--values: each budget must be in [1, 2^30] MiB, got " << v;
  check_memory_modes(opt.modes);
  Config c = base_config(opt.model);
  if (!opt.device.empty()) c.device = opt.device;  // (the model's layout depends on it)
  use_config_threads(c);
  const std::unique_ptr<Device> device = open_device(opt.device);
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  // The family's light reports and fills hold for every SIZE: planned once for all of them.
  const std::shared_ptr<BudgetMemo> memo = make_budget_memo();
  const MirrorResult top = plan_pipeline(c, p, "budget=1x", device.get(), true, memo);
  const int64_t share = plan_pipeline(c, p, "share", device.get()).planned.report.total_bytes;
  const int64_t least = top.least_feasible;
  std::vector<int64_t> budgets;
  for (int64_t v : opt.values) budgets.push_back(v << 20);
  for (int k = 0; k < opt.budgets; ++k) budgets.push_back(share - (share - least) * k / (opt.budgets - 1));
  std::printf("%s: share's total %s, the least feasible budget %s; %zu budgets\n", c.file.c_str(), format_bytes(share).c_str(),
              format_bytes(least).c_str(), budgets.size());
  std::filesystem::create_directories(opt.out);
  // Every file is made in memory and written when the curve is done, each atomically: a run that
  // fails leaves the last good curve as it was.
  const std::string csv_path = opt.out + "/curve.csv";
  std::ostringstream csv, line;
  csv << kCsvHeader;
  std::map<std::string, std::string> dat;  // mode -> its point
  const auto t0 = std::chrono::steady_clock::now();
  size_t done = 0;
  for (int64_t b : budgets) {
    ++done;
    if (b < least) {
      std::printf("[%zu/%zu] budget %s: below the least feasible %s, skipped\n", done, budgets.size(), format_bytes(b).c_str(),
                  format_bytes(least).c_str());
      continue;
    }
    const MirrorResult mr = plan_pipeline(c, p, "budget=" + std::to_string(b), device.get(), true, memo);
    const MemoryReport& r = mr.planned.report;
    csv_row(csv, opt, b, p.model.layers, "budget", r);
    line << r.total_bytes / 1073741824.0 << ' ' << 100 * recompute_cost_overhead(r) << ' ' << b / 1073741824.0 << '\n';
    std::printf("[%zu/%zu] budget %10s: total %10s, recompute %5.1f%% (cost %5.1f%%), planned in %.2f s (elapsed %.0f s)\n", done,
                budgets.size(), format_bytes(b).c_str(), format_bytes(r.total_bytes).c_str(), 100 * recompute_overhead(r),
                100 * recompute_cost_overhead(r), r.planning_seconds,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::fflush(stdout);
  }
  for (const std::string& m : opt.modes) {
    const MirrorResult mr = plan_pipeline(c, p, m, device.get());
    const MemoryReport& r = mr.planned.report;
    csv_row(csv, opt, 0, p.model.layers, m, r);
    std::ostringstream d;
    d << r.total_bytes / 1073741824.0 << ' ' << 100 * recompute_cost_overhead(r) << '\n';
    dat[m] = d.str();
    std::printf("%-13s total %10s, recompute %5.1f%% (cost %5.1f%%)\n", m.c_str(), format_bytes(r.total_bytes).c_str(), 100 * recompute_overhead(r),
                100 * recompute_cost_overhead(r));
  }
  write_file_atomically(csv_path, csv.str(), "curve file");
  std::printf("wrote %s\n", csv_path.c_str());
  if (!opt.plot) return 0;
  write_file_atomically(opt.out + "/budget.dat", line.str(), "curve file");
  for (const auto& [m, text] : dat) write_file_atomically(opt.out + "/" + m + ".dat", text, "curve file");
  std::ostringstream gp;
  gp << "set terminal pngcairo size 900,600 noenhanced\nset output " << gp_quote(opt.out + "/tradeoff.png") << "\n"
     << "set grid\nset key top right\nset xlabel 'total bytes of the step (GiB, exact plan)'\n"
     << "set ylabel 'recompute cost (% of the plain step: FLOPs or bytes moved x " << top.planned.report.balance << " per op)'\n"
     << "set title " << gp_quote(c.file + ": budget=SIZE, least recompute cost that fits") << "\nplot "
     << gp_quote(opt.out + "/budget.dat") << " using 1:2 with linespoints lw 2 title 'budget=SIZE'";
  for (const std::string& m : opt.modes)
    gp << ", " << gp_quote(opt.out + "/" + m + ".dat") << " using 1:2 with points pt 7 ps 2 title " << gp_quote(m);
  gp << "\n";
  write_file_atomically(opt.out + "/plot.gp", gp.str(), "curve file");
  if (!run_gnuplot(opt.out)) return 1;
  std::printf("plot: %s/tradeoff.png\n", opt.out.c_str());
  return 0;
}

}  // namespace

int run_curve(const CurveOptions& opt) {
  if (opt.vary == "budget") return run_budget_curve(opt);
  MNEMO_CHECK(opt.budgets == 0) << "--budgets needs --vary budget";
  MNEMO_CHECK(!opt.values.empty()) << "--values: give at least one value";
  MNEMO_CHECK(opt.values.size() <= 1000) << "--values: at most 1000 values, got " << opt.values.size();
  for (int64_t v : opt.values)
    MNEMO_CHECK(v >= 1 && v <= 100000) << "--values: each value must be in [1, 100000], got " << v;
  MNEMO_CHECK(!opt.modes.empty()) << "--memory: give at least one memory mode";
  check_memory_modes(opt.modes);
  Config base = base_config(opt.model);
  if (!opt.device.empty()) base.device = opt.device;  // (the model's layout depends on it)
  use_config_threads(base);
  const std::unique_ptr<Device> device = open_device(opt.device);
  // Every value's model first (an error names the value, not only the config's key it sets), and
  // no value twice.
  std::set<int64_t> seen;
  for (int64_t v : opt.values) {
    MNEMO_CHECK(seen.insert(v).second) << "--values: " << v << " is given twice";
    try {
      const Config c = with_value(base, opt.vary, v);
      (void)build_pipeline(c, static_data_shape(c), c.data.batch);
    } catch (const Error& e) {
      throw Error("--vary " + opt.vary + " --values " + std::to_string(v) + ": " + e.what());
    }
  }
  std::filesystem::create_directories(opt.out);
  // Every file is made in memory and written when the curve is done, each atomically: a run that
  // fails leaves the last good curve as it was.
  const std::string csv_path = opt.out + "/curve.csv";
  std::ostringstream csv;
  csv << kCsvHeader;
  std::map<std::string, std::vector<std::pair<double, double>>> fm, total;
  const size_t jobs = opt.values.size() * opt.modes.size();
  size_t done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t v : opt.values) {
    const Config c = with_value(base, opt.vary, v);
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    for (const std::string& m : opt.modes) {
      const MirrorResult mr = plan_pipeline(c, p, m, device.get());
      const MemoryReport& r = mr.planned.report;
      const double overhead = recompute_overhead(r);
      csv_row(csv, opt, v, p.model.layers, m, r);
      const double x = opt.vary == "depth" ? p.model.layers : static_cast<double>(v);
      fm[m].push_back({x, static_cast<double>(r.feature_map_bytes)});
      total[m].push_back({x, static_cast<double>(r.total_bytes)});
      ++done;
      std::printf("[%zu/%zu] %s %lld (%d layers) %-13s feature maps %10s  total %10s  recompute %5.1f%%  planned in %.2f s  (elapsed %.0f s)\n",
                  done, jobs, opt.vary.c_str(), static_cast<long long>(v), p.model.layers, m.c_str(),
                  format_bytes(r.feature_map_bytes).c_str(), format_bytes(r.total_bytes).c_str(), 100 * overhead,
                  r.planning_seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      std::fflush(stdout);
    }
  }
  // Slopes need two values (a fit through one point is no slope: its fields are left empty).
  std::ostringstream sl;
  sl << "mode,feature_map_slope,total_slope\n";
  const bool sloped = opt.values.size() >= 2;
  if (sloped) std::printf("log-log slopes (memory ~ %s^slope):\n", opt.vary.c_str());
  else std::printf("log-log slopes: need two values or more, one given (slopes.csv has empty fields)\n");
  for (const std::string& m : opt.modes) {
    if (!sloped) {
      sl << m << ",,\n";
      continue;
    }
    sl << m << ',' << slope(fm[m]) << ',' << slope(total[m]) << '\n';
    std::printf("  %-13s feature maps %.3f, total %.3f\n", m.c_str(), slope(fm[m]), slope(total[m]));
  }
  write_file_atomically(csv_path, csv.str(), "curve file");
  write_file_atomically(opt.out + "/slopes.csv", sl.str(), "curve file");
  std::printf("wrote %s and %s/slopes.csv\n", csv_path.c_str(), opt.out.c_str());
  if (!opt.plot) return 0;
  // One data file per mode, one gnuplot script for the two plots.
  for (const std::string& m : opt.modes) {
    std::ostringstream d;
    for (size_t i = 0; i < fm[m].size(); ++i)
      d << fm[m][i].first << ' ' << fm[m][i].second / 1073741824.0 << ' ' << total[m][i].second / 1073741824.0 << '\n';
    write_file_atomically(opt.out + "/" + m + ".dat", d.str(), "curve file");
  }
  const std::string xlabel = opt.vary == "depth" ? "layers" : opt.vary == "seq" ? "sequence length" : "batch size";
  std::ostringstream gp;
  for (const auto& [file, col, title] : {std::tuple<std::string, int, std::string>{"feature_map.png", 2, "feature map memory (static plan)"},
                                         {"total.png", 3, "total memory of one training step"}}) {
    gp << "set terminal pngcairo size 900,600 noenhanced\nset output " << gp_quote(opt.out + "/" + file) << "\n"
       << "set logscale xy\nset grid\nset key top left\nset xlabel " << gp_quote(xlabel) << "\nset ylabel 'GiB'\n"
       << "set title " << gp_quote(base.file + ": " + title) << "\nplot ";
    for (size_t i = 0; i < opt.modes.size(); ++i)
      gp << (i ? ", " : "") << gp_quote(opt.out + "/" + opt.modes[i] + ".dat") << " using 1:" << col
         << " with linespoints lw 2 title " << gp_quote(opt.modes[i]);
    gp << "\n";
  }
  write_file_atomically(opt.out + "/plot.gp", gp.str(), "curve file");
  if (!run_gnuplot(opt.out)) return 1;
  std::printf("plots: %s/feature_map.png, %s/total.png\n", opt.out.c_str(), opt.out.c_str());
  return 0;
}

}  // namespace mnemo
