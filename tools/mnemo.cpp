// The mnemo command: train, grad, plan, curve, bench, ops, graph (see --help and the README).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <sstream>
#include <system_error>

#include "autograd/allreduce.h"
#include "autograd/op_info.h"
#include "core/error.h"
#include "memory/mirror_planner.h"
#include "ops/fully_connected.h"
#include "train/config/config.h"
#include "train/config/files.h"
#include "train/session/safetensors.h"
#include "train/config/onnx_import.h"
#include "train/session/inspect.h"
#include "train/session/pipeline.h"
#include "train/session/session.h"
#include "train/session/curve.h"
#include "train/session/device_state.h"

#include <nlohmann/json.hpp>

namespace {

const char* kind_name(mnemo::OpKind k) {
  switch (k) {
    case mnemo::OpKind::compute: return "compute";
    case mnemo::OpKind::view: return "view";
    case mnemo::OpKind::input: return "input";
    case mnemo::OpKind::param: return "param";
  }
  return "?";
}

std::string list(const std::vector<int>& v, const char* prefix) {
  std::string s;
  for (int i : v) s += (s.empty() ? "" : ",") + std::string(prefix) + std::to_string(i);
  return s.empty() ? "-" : s;
}

void print_ops() {
  std::printf("%-24s %-8s %-12s %-22s %s\n", "op", "kind", "in-place", "backward reads", "backward ops");
  for (const mnemo::OpDef* d : mnemo::op_registry().all()) {
    std::string inplace;
    for (const auto& o : d->inplace)
      inplace += (inplace.empty() ? "" : ",") + ("in" + std::to_string(o.input) + "->out" + std::to_string(o.output));
    const mnemo::BackwardReads r = mnemo::backward_reads(*d);
    std::string reads = !r.differentiable ? "(no grad)" : list(r.inputs, "in") + " " + list(r.outputs, "out");
    std::string bops;
    for (const auto& b : r.backward_ops)
      if (bops.find(b) == std::string::npos) bops += (bops.empty() ? "" : ",") + b;
    std::printf("%-24s %-8s %-12s %-22s %s\n", d->name.c_str(), kind_name(d->kind), inplace.empty() ? "-" : inplace.c_str(),
                reads.c_str(), bops.empty() ? "-" : bops.c_str());
  }
}

// A config file, or an ONNX model imported on the fly (`batch`: its batch size when > 0; a
// config's data.batch is overridden by it, as bench's --batch does: it was ignored).
mnemo::Config config_or_onnx(const std::string& path, int64_t batch) {
  if (!mnemo::is_onnx_path(path)) {
    mnemo::Config c = mnemo::load_config(path);
    if (batch > 0) mnemo::set_batch(c, batch);
    return c;
  }
  const mnemo::OnnxImport imp = mnemo::import_onnx(path, {batch});
  for (const std::string& note : imp.notes) std::fprintf(stderr, "mnemo: note: %s\n", note.c_str());
  return mnemo::parse_config(imp.yaml, path);
}

int run_import(const std::string& model, const std::string& out, std::string weights, int64_t batch, int64_t steps) {
  const mnemo::OnnxImport imp = mnemo::import_onnx(model, {batch, steps});
  // Build the imported model before writing anything: a config mnemo cannot build is never written.
  const mnemo::Config c = mnemo::parse_config(imp.yaml, out);
  const mnemo::Pipeline p = mnemo::build_pipeline(c, mnemo::static_data_shape(c), c.data.batch);
  if (!imp.weights.empty() && weights.empty())
    weights = (out.size() > 5 && out.ends_with(".yaml") ? out.substr(0, out.size() - 5) : out) + ".safetensors";
  mnemo::check_not_the_same_file(out, "-o", {{"the ONNX model", model}, {"--weights", imp.weights.empty() ? "" : weights}});
  if (!imp.weights.empty()) mnemo::check_not_the_same_file(weights, "--weights", {{"the ONNX model", model}});
  if (!imp.weights.empty()) {
    std::vector<std::pair<std::string, mnemo::TensorView>> views;
    for (const auto& [name, t] : imp.weights) views.push_back({name, t.view()});
    mnemo::write_safetensors(weights, views, {{"format", "mnemo-weights-1"}, {"source", model}});
  }
  mnemo::write_file_atomically(out, imp.yaml, "config file");
  const mnemo::ModelStats st = mnemo::model_stats(p.model.builder);
  // (the tensors count the running statistics too; the values are the trainable ones, as plan's "parameters")
  std::printf("%s: %lld nodes, %lld parameter tensors (%lld trainable values), batch %lld, data %s -> wrote %s\n", model.c_str(),
              static_cast<long long>(imp.nodes), static_cast<long long>(imp.params), static_cast<long long>(st.params),
              static_cast<long long>(c.data.batch), mnemo::shape_str(p.data.sample).c_str(), out.c_str());
  for (const std::string& note : imp.notes) std::printf("note: %s\n", note.c_str());
  if (imp.weights.empty())
    std::printf("the model carries no weights (a structure-only export): training starts from mnemo's initialisation\n");
  else
    std::printf("wrote its %zu initializers to %s; train from them with: mnemo train %s --init %s\n", imp.weights.size(),
                weights.c_str(), out.c_str(), weights.c_str());
  return 0;
}

int run_plan(const std::string& path, const std::string& modes, bool json, const std::string& device_name, int64_t batch,
             const std::string& order, double placement_seconds, int ranks) {
  mnemo::Config c = config_or_onnx(path, batch);
  if (!device_name.empty()) c.device = device_name;  // (the model's layout depends on it)
  mnemo::use_config_threads(c);
  if (!order.empty()) c.order = order;
  if (placement_seconds >= 0) c.placement_seconds = placement_seconds;
  // Workspace sizes are the backend's (cuDNN's algorithms on a GPU), so a device plan needs the device.
  const std::unique_ptr<mnemo::Device> device = mnemo::open_run_device(c, device_name);
  const mnemo::DataShape ds = mnemo::static_data_shape(c);
  MNEMO_CHECK(c.data.batch % ranks == 0) << path << ": data.batch " << c.data.batch << " does not divide over --ranks " << ranks;
  // (parallel.reduce_one_rank: a one-rank step keeps the all-reduce nodes too)
  const mnemo::Pipeline p = mnemo::build_pipeline(c, ds, c.data.batch / ranks, ranks, ranks == 1 && c.parallel.reduce_one_rank);
  const bool reduces = ranks > 1 || p.reduce_one_rank;
  const std::vector<std::string> list = modes == "all" ? mnemo::all_memory_modes() : std::vector<std::string>{modes};
  for (const std::string& m : list) mnemo::parse_memory_mode(m);  // a bad mode fails before any output
  nlohmann::json out = {{"format", "mnemo-plan-1"}, {"config", path}, {"device", device ? device->name() : "cpu"},
                        {"model", c.model_type}, {"layout", p.model.layout_name()},
                        {"layers", p.model.layers},
                        {"batch", c.data.batch}, {"ranks", ranks}, {"forward_nodes", p.model.builder.graph().size()},
                        {"modes", nlohmann::json::array()}};
  const mnemo::ModelStats stats = mnemo::model_stats(p.model.builder);
  if (!p.model.head.empty()) out["head"] = p.model.head;
  out["params"] = stats.params;
  out["forward_flops"] = stats.forward_flops;
  out["forward_matmul_flops"] = stats.matmul_flops;
  if (!json) {
    std::printf("%s: %s%s, %d layers, %lld parameters, %.3g GFLOP per forward pass, batch %lld, %zu forward nodes, planned for %s\n",
                path.c_str(), c.model_type.c_str(), p.model.report_note().c_str(), p.model.layers, static_cast<long long>(stats.params), stats.forward_flops / 1e9,
                static_cast<long long>(c.data.batch), p.model.builder.graph().size(), device ? device->name().c_str() : "the CPU");
    if (reduces)
      std::printf("one rank of %d (data parallelism, docs/PARALLEL.md): batch %lld per rank, gradients all-reduced in buckets "
                  "(param_grad includes the bucket buffers)\n",
                  ranks, static_cast<long long>(c.data.batch / ranks));
    std::printf("%-13s %11s %10s %10s %11s %10s %10s %11s %11s %6s %9s %8s %7s\n", "mode", "feature_map", "param_grad", "workspace",
                "arena", "params", "optimizer", "total", "max_live", "frag", "recompute", "rec_cost", "plan_s");
  }
  for (const std::string& m : list) {
    const mnemo::MirrorResult mr = mnemo::plan_pipeline(c, p, m, device.get());
    const mnemo::MemoryReport& r = mr.planned.report;
    nlohmann::json j = mnemo::to_json(r);
    nlohmann::json search = nlohmann::json::array();
    for (const mnemo::SearchStep& s : mr.search)
      if (mr.budget_bytes >= 0)
        search.push_back({{"origin", s.origin}, {"parameter", s.budget}, {"count", s.kept_cuts}, {"objective_bytes", s.objective_bytes},
                          {"pruned", s.pruned}, {"max_live_bytes", s.max_live_bytes},
                          {"feature_map_bytes", s.pruned ? nlohmann::json() : nlohmann::json(s.feature_map_bytes)},
                          {"arena_bytes", s.pruned ? nlohmann::json() : nlohmann::json(s.arena_bytes)},
                          {"total_bytes", s.pruned ? nlohmann::json() : nlohmann::json(s.total_bytes)},
                          {"recompute_flops", s.recompute_flops}, {"recompute_cost", s.recompute_cost},
                          {"fits", s.pruned && !s.too_big ? nlohmann::json() : nlohmann::json(s.fits)}, {"chosen", s.chosen}});
      else if (!s.origin.empty() && s.pruned)  // not packed: only its live-bytes bound is known
        search.push_back({{"max_term", s.budget}, {"checkpoints", s.kept_cuts}, {"objective_bytes", s.objective_bytes}, {"origin", s.origin},
                          {"pruned", true}, {"max_live_bytes", s.max_live_bytes}, {"feature_map_bytes", nullptr},
                          {"workspace_bytes", nullptr}, {"arena_bytes", nullptr}, {"recompute_flops", nullptr}, {"chosen", false}});
      else if (!s.origin.empty())
        search.push_back({{"max_term", s.budget}, {"checkpoints", s.kept_cuts}, {"objective_bytes", s.objective_bytes}, {"origin", s.origin},
                          {"pruned", false}, {"max_live_bytes", s.max_live_bytes}, {"feature_map_bytes", s.feature_map_bytes},
                          {"workspace_bytes", s.workspace_bytes}, {"arena_bytes", s.arena_bytes}, {"recompute_flops", s.recompute_flops},
                          {"chosen", s.chosen}});
      else
        search.push_back({{"budget", s.budget}, {"kept_cuts", s.kept_cuts}, {"feature_map_bytes", s.feature_map_bytes},
                          {"workspace_bytes", s.workspace_bytes}, {"arena_bytes", s.arena_bytes}, {"recompute_flops", s.recompute_flops},
                          {"chosen", s.chosen}});
    if (!mr.search.empty()) j["search"] = search;
    if (mr.budget_bytes >= 0) {
      j["budget_bytes"] = mr.budget_bytes;
      j["least_feasible_bytes"] = mr.least_feasible;
      j["fill_levels"] = mr.fill_levels;
      j["fill_levels_skipped"] = mr.fill_levels_skipped;
      j["fill_repairs"] = mr.fill_repairs;
      j["fill_remembered"] = mr.fill_remembered;
      j["lower_bound_cost"] = mr.lower_bound_cost;
      j["lower_bound_over"] = mr.bound_over_01 ? "0/1 mirror plans" : "every mirror plan";
      j["solver"] = {{"status", mr.solver_status}, {"solves", mr.solver_solves}, {"gaps", mr.solver_gaps},
                     {"cuts", mr.solver_cuts}, {"seconds", mr.solver_seconds}};
      if (mr.search_moves >= 0)
        j["local_search"] = {{"moves", mr.search_moves}, {"taken", mr.search_taken}, {"evaluations", mr.search_evaluations},
                             {"remembered", mr.search_remembered},
                             {"local_optimum", mr.search_local_optimum}, {"from_cost", mr.search_from_cost},
                             {"seconds", mr.local_search_seconds}};
    }
    if (mr.model_optimum >= 0) {
      j["model_optimum_bytes"] = mr.model_optimum;
      j["model_objective_bytes"] = mr.model_objective;
      j["max_terms"] = mr.max_terms;
      j["division_segments"] = mr.tree_segments;
      j["search_seconds"] = mr.search_seconds;
      j["pruned_candidates"] = mr.pruned;
    }
    if (mr.chen_total >= 0)
      j["chen"] = {{"filled", mr.filled}, {"total_bytes", mr.chen_total}, {"recompute_flops", mr.chen_recompute_flops},
                   {"recompute_cost", mr.chen_recompute_cost}};
    const mnemo::OrderReport& o = mr.order;
    if (o.order != "default")
      j["order"] = {{"order", o.order}, {"chosen", o.chosen}, {"default_peak_bytes", o.default_peak}, {"peak_bytes", o.peak},
                    {"bound_bytes", o.bound >= 0 ? nlohmann::json(o.bound) : nlohmann::json()}, {"status", o.status},
                    {"moved", o.moved}, {"region", o.region}, {"seconds", o.seconds}};
    if (reduces) j["allreduce"] = mnemo::describe_buckets(mr.training, c.parallel.bucket_bytes);
    out["modes"].push_back(j);
    if (json) continue;
    std::printf("%-13s %11s %10s %10s %11s %10s %10s %11s %11s %5.2f%% %8.1f%% %7.1f%% %7.3f\n", r.mode.c_str(),
                mnemo::format_bytes(r.feature_map_bytes).c_str(), mnemo::format_bytes(r.param_grad_bytes).c_str(),
                mnemo::format_bytes(r.workspace_bytes).c_str(), mnemo::format_bytes(r.arena_bytes).c_str(),
                mnemo::format_bytes(r.param_bytes).c_str(),
                mnemo::format_bytes(r.optimizer_bytes).c_str(), mnemo::format_bytes(r.total_bytes).c_str(),
                mnemo::format_bytes(r.max_live_bytes).c_str(), 100 * r.fragmentation,
                100 * mnemo::recompute_overhead(r), 100 * mnemo::recompute_cost_overhead(r), r.planning_seconds);
    if (r.arena_bytes > r.max_live_bytes)
      std::printf("    placement: %s; no packing of these buffers is below %s (arena %+.2f%% above it), %.2f s\n", r.placement.c_str(),
                  mnemo::format_bytes(r.arena_bound_bytes).c_str(),
                  r.arena_bound_bytes ? 100.0 * static_cast<double>(r.arena_bytes - r.arena_bound_bytes) / static_cast<double>(r.arena_bound_bytes) : 0.0,
                  r.placement_seconds);
    if (reduces) std::printf("    all-reduce: %s\n", j["allreduce"].get<std::string>().c_str());
    if (mr.chen_total >= 0)
      std::printf("    %s: Chen's plan total %s, recompute %.3g GFLOP; %s\n", mr.filled ? "filled" : "not filled",
                  mnemo::format_bytes(mr.chen_total).c_str(), mr.chen_recompute_flops / 1e9,
                  mr.filled ? "kept back at its own peak (the most recompute per byte first), it recomputes less in no more memory (or as much in less)"
                            : "no fill at its own peak packs as low and recomputes less: Chen's plan kept");
    if (o.order != "default") {
      std::printf("    order %s: %s order chosen, live-bytes peak %s (default order %s, %+.1f%%), %d of %d nodes after the forward pass moved, %.2f s",
                  o.order.c_str(), o.chosen.c_str(), mnemo::format_bytes(o.peak).c_str(), mnemo::format_bytes(o.default_peak).c_str(),
                  o.default_peak ? 100.0 * static_cast<double>(o.peak - o.default_peak) / static_cast<double>(o.default_peak) : 0.0,
                  o.moved, o.region, o.seconds);
      if (o.bound >= 0)
        std::printf("; no order peaks below %s (%s): gap %.2f%%", mnemo::format_bytes(o.bound).c_str(), o.status.c_str(),
                    o.peak ? 100.0 * static_cast<double>(o.peak - o.bound) / static_cast<double>(o.peak) : 0.0);
      else if (!o.status.empty())
        std::printf("; %s", o.status.c_str());
      std::printf("\n");
    }
    if (mr.model_optimum >= 0)
      std::printf("    papers' objective: optimum %s, chosen plan %s%s; %d max terms, "
                  "%d segments in the division tree, search %.3f s; "
                  "%zu candidates scored, %d stopped at their live-bytes bound\n",
                  mnemo::format_bytes(mr.model_optimum).c_str(), mr.model_objective >= 0 ? mnemo::format_bytes(mr.model_objective).c_str() : "-",
                  std::any_of(mr.search.begin(), mr.search.end(), [](const mnemo::SearchStep& s) { return s.chosen && s.origin == "refined"; })
                      ? " (refined: its groups may have several entries)"
                      : "",
                  mr.max_terms, mr.tree_segments, mr.search_seconds, mr.search.size(), mr.pruned);
    if (mr.budget_bytes >= 0) {
      const double rec = mr.planned.report.recompute_cost;
      std::printf("    budget %s: the least recompute cost whose total fits, among %zu plans (least total %s): %.3g G "
                  "(%.3g GFLOP; cost: FLOPs or bytes moved x %g, whichever is larger, per op); no %s that fits costs less "
                  "than %.3g G (proven bound): gap %.1f%%\n",
                  mnemo::format_bytes(mr.budget_bytes).c_str(), mr.search.size(), mnemo::format_bytes(mr.least_feasible).c_str(), rec / 1e9,
                  mr.planned.report.recompute_flops / 1e9, mr.planned.report.balance, mr.bound_over_01 ? "0/1 mirror plan" : "mirror plan",
                  mr.lower_bound_cost / 1e9, rec > 0 ? 100 * (rec - mr.lower_bound_cost) / rec : 0.0);
      std::printf("    solver: %s (%d solves, %d gaps modelled, %d plans cut off, %.2f s)\n", mr.solver_status.c_str(), mr.solver_solves,
                  mr.solver_gaps, mr.solver_cuts, mr.solver_seconds);
      if (mr.search_moves >= 0)
        std::printf("    local search: from the family's choice (%.3g G), %d moves tried, %d taken, %d plans evaluated (%d met "
                    "again, not built), %.2f s: %s\n",
                    mr.search_from_cost / 1e9, mr.search_moves, mr.search_taken, mr.search_evaluations, mr.search_remembered,
                    mr.local_search_seconds,
                    mr.search_local_optimum ? "a local optimum (no move improves it)" : "stopped at its time limit");
      std::printf("    fills: %d live-bytes levels filled from the top; %d below them not filled (their knapsack bound exceeds the "
                  "recompute cost chosen); %d fills repaired at their peak; %d plans met again, not built\n",
                  mr.fill_levels, mr.fill_levels_skipped, mr.fill_repairs, mr.fill_remembered);
      for (const mnemo::SearchStep& s : mr.search) {
        const std::string param = s.origin == "sublinear" || s.origin.rfind("fill", 0) == 0 || s.origin.rfind("paper", 0) == 0 || s.origin.rfind("refined", 0) == 0
                                      ? mnemo::format_bytes(static_cast<int64_t>(s.budget))
                                  : s.origin == "recursive" ? "depth " + std::to_string(static_cast<int>(s.budget))
                                  : s.origin == "keep-back" ? std::to_string(static_cast<int>(s.budget)) + " kept"
                                                            : "";
        if (s.pruned && s.too_big)
          std::printf("    %-12s %10s: live bytes %10s above the arena limit: too big, not packed\n", s.origin.c_str(), param.c_str(),
                      mnemo::format_bytes(s.max_live_bytes).c_str());
        else if (s.pruned)
          std::printf("    %-12s %10s: live bytes %10s, recompute %7.3g GFLOP, cost %7.3g G: not packed (not needed for the choice)\n",
                      s.origin.c_str(), param.c_str(), mnemo::format_bytes(s.max_live_bytes).c_str(), s.recompute_flops / 1e9,
                      s.recompute_cost / 1e9);
        else
          std::printf("    %-12s %10s: total %10s %s, recompute %7.3g GFLOP, cost %7.3g G%s\n", s.origin.c_str(), param.c_str(),
                      mnemo::format_bytes(s.total_bytes).c_str(), s.fits ? "fits   " : "too big", s.recompute_flops / 1e9,
                      s.recompute_cost / 1e9, s.chosen ? "  <- chosen" : "");
      }
    } else
    for (const mnemo::SearchStep& s : mr.search)
      if (!s.origin.empty()) {
        char result[160];
        if (s.pruned)
          std::snprintf(result, sizeof result, "live bytes %10s > the best arena: not packed", mnemo::format_bytes(s.max_live_bytes).c_str());
        else
          std::snprintf(result, sizeof result, "feature maps %10s, arena %10s, recompute %.3g GFLOP%s",
                        mnemo::format_bytes(s.feature_map_bytes).c_str(), mnemo::format_bytes(s.arena_bytes).c_str(),
                        s.recompute_flops / 1e9, s.chosen ? "  <- chosen" : "");
        const bool cuts = s.origin == "sublinear";
        std::printf("    %-9s %s %10s: %4d %s, objective %10s, %s\n", s.origin.c_str(), cuts ? "budget  " : "max term",
                    mnemo::format_bytes(static_cast<int64_t>(s.budget)).c_str(), s.kept_cuts, cuts ? "cuts       " : "checkpoints",
                    s.objective_bytes >= 0 ? mnemo::format_bytes(s.objective_bytes).c_str() : "-", result);
      }
      else
      std::printf("    budget %10s: %3d cuts kept, feature maps %10s, workspace %9s, arena %10s, recompute %.3g GFLOP%s\n",
                  mnemo::format_bytes(static_cast<int64_t>(s.budget)).c_str(), s.kept_cuts, mnemo::format_bytes(s.feature_map_bytes).c_str(),
                  mnemo::format_bytes(s.workspace_bytes).c_str(), mnemo::format_bytes(s.arena_bytes).c_str(), s.recompute_flops / 1e9,
                  s.chosen ? "  <- chosen" : "");
  }
  if (json) std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear at once in logs and pipes
  // A write past the file-size limit (ulimit -f) then fails with EFBIG, which the writers report,
  // instead of killing the process; a closed pipe gives EPIPE instead of a silent death.
  std::signal(SIGXFSZ, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"mnemo: static-graph deep learning with built-in gradient checkpointing"};
  // A time limit in seconds, [0, kMaxTimeLimitSeconds]: CLI::Range alone let "nan" through (it compares).
  const std::string seconds_range = "[0, " + std::to_string(static_cast<int64_t>(mnemo::kMaxTimeLimitSeconds)) + "]";
  const CLI::Validator seconds_limit(
      [seconds_range](std::string& s) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end || !(d >= 0 && d <= mnemo::kMaxTimeLimitSeconds)) return "expected seconds in " + seconds_range + ", got '" + s + "'";
        return {};
      },
      "SECONDS in " + seconds_range);
  app.set_version_flag("--version", []() -> std::string {
    std::string gemm;
    try {
      gemm = mnemo::ops::cpu_gemm_library();
    } catch (const mnemo::Error& e) {
      gemm = e.what();
    }
    return std::string("mnemo ") + MNEMO_VERSION + " (CPU backward GEMMs: " + gemm + ")";
  });
  app.require_subcommand(1);
  app.add_subcommand("ops", "list every registered op: kind, in-place options, forward entries its backward reads");
  auto* graph = app.add_subcommand("graph", "print a built-in model's graph as text, JSON or Graphviz DOT");
  std::string model = "cnn", format = "text";
  int mirror = -1;
  graph->add_option("model", model, "mlp, cnn or lstm")->check(CLI::IsMember({"mlp", "cnn", "lstm"}))->capture_default_str();
  graph->add_option("--format", format, "text, json or dot")->check(CLI::IsMember({"text", "json", "dot"}))->capture_default_str();
  graph->add_option("--training", mirror, "print the training graph with mirror count m(v) = N for every node (0: plain backprop)")
      ->check(CLI::NonNegativeNumber);
  auto* plan = app.add_subcommand("plan", "plan a config's training-step memory per allocation mode (shapes only, nothing runs)");
  std::string plan_config, plan_modes = "all";
  bool plan_json = false;
  plan->add_option("config", plan_config, "config file (YAML) or ONNX model (.onnx, imported on the fly)")->required()->check(CLI::ExistingFile);
  int64_t plan_batch = 0;
  plan->add_option("--batch", plan_batch, "the batch size, overriding the config's data.batch (ONNX models: also when the model leaves it open)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  plan->add_option("--memory", plan_modes, std::string(mnemo::kMemoryModeNames) + ", or all")
      ->capture_default_str();
  plan->add_flag("--json", plan_json, "print the report as JSON (docs/MEMORY.md)");
  std::string plan_device, plan_order;
  const auto orders = CLI::IsMember({"default", "greedy", "optimal", "updates-last"});
  plan->add_option("--order", plan_order, "schedule order: default, greedy, optimal or updates-last (overrides the config; docs/MEMORY.md)")
      ->check(orders);
  double plan_placement = -1;
  plan->add_option("--placement-seconds", plan_placement,
                   "time limit of the exact placement per plan, 0: best fit only (overrides the config's placement_seconds; docs/MEMORY.md)")
      ->check(seconds_limit);
  plan->add_option("--device", plan_device, "plan for cpu, cuda or cuda:N (workspace sizes are the device's); default: the config's");
  int plan_ranks = 1;
  plan->add_option("--ranks", plan_ranks, "plan one rank of a data-parallel run over this many ranks (docs/PARALLEL.md)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  auto* imp = app.add_subcommand("import", "convert an ONNX model into a graph config, and its weights into safetensors (docs/FORMATS.md)");
  std::string import_model, import_out, import_weights;
  int64_t import_batch = 0, import_steps = 100;
  imp->add_option("model", import_model, "ONNX file")->required()->check(CLI::ExistingFile);
  imp->add_option("-o,--output", import_out, "the config file to write (YAML)")->required();
  imp->add_option("--weights", import_weights, "where the initializers' data goes (default: the config's name with .safetensors)");
  imp->add_option("--batch", import_batch, "the batch size (when the model leaves it open, or to change it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  imp->add_option("--steps", import_steps, "train.steps of the written config")->check(CLI::Range(int64_t{1}, int64_t{1000000000}))
      ->capture_default_str();
  auto* train = app.add_subcommand("train", "train the model of a config file (see docs/CONFIG.md)");
  mnemo::TrainOptions topt;
  train->add_option("config", topt.config, "config file (YAML)")->required()->check(CLI::ExistingFile);
  train->add_option("--memory", topt.memory, std::string("memory mode (") + mnemo::kMemoryModeNames + "), overrides the config");
  train->add_option("--order", topt.order, "schedule order: default, greedy or optimal (overrides the config)")->check(orders);
  const std::string placement_help = "time limit of the exact placement, 0: best fit only (overrides the config's placement_seconds)";
  train->add_option("--placement-seconds", topt.placement_seconds, placement_help)->check(seconds_limit);
  train->add_option("--steps", topt.steps, "train this many steps (overrides train.steps/epochs)")
      ->check(CLI::Range(int64_t{1}, mnemo::kMaxSteps));
  train->add_option("--resume", topt.resume, "continue from this checkpoint")->check(CLI::ExistingFile);
  train->add_option("--device", topt.device, "cpu, cuda or cuda:N (overrides the config)");
  train->add_option("--save-init", topt.save_init, "write the weights the run would start from (safetensors: the config's initialisation, or --init's or --resume's) and exit");
  train->add_option("--init", topt.init, "start from these weights (safetensors; names as docs/FORMATS.md)")->check(CLI::ExistingFile);
  train->add_option("--checkpoint", topt.checkpoint, "also write the final checkpoint to this file");
  train->add_flag("!--no-eval", topt.eval, "skip the test-set evaluation at the end (train.eval_every's evaluations still run)");
  train->add_flag("--profile", topt.profile, "print the time spent per op");
  train->add_flag("--force", topt.force, "skip the pre-flight check that the planned step fits the device's memory");
  train->add_flag("--eager", topt.eager, "on a GPU: launch kernels node by node instead of replaying the captured step (CUDA graph)");
  auto* grad = app.add_subcommand("grad", "one forward/backward on given weights and batch; writes the loss and every parameter gradient");
  mnemo::GradOptions gopt;
  grad->add_option("config", gopt.config, "config file (YAML)")->required()->check(CLI::ExistingFile);
  grad->add_option("--weights", gopt.weights, "weights (safetensors; names as docs/FORMATS.md)")->required()->check(CLI::ExistingFile);
  grad->add_option("--batch", gopt.batch, "batch (safetensors with 'data' and 'labels')")->required()->check(CLI::ExistingFile);
  grad->add_option("--out", gopt.out, "output file (safetensors: 'loss', 'grad/<param>')")->required();
  grad->add_option("--memory", gopt.memory, "memory mode, overrides the config");
  grad->add_option("--order", gopt.order, "schedule order, overrides the config")->check(orders);
  grad->add_option("--device", gopt.device, "cpu, cuda or cuda:N (overrides the config)");
  grad->add_flag("--force", gopt.force, "skip the pre-flight check that the planned step fits the device's memory");
  auto* bench = app.add_subcommand("bench", "time training steps of a config (synthetic batches of its shapes)");
  mnemo::BenchOptions bopt;
  bench->add_option("config", bopt.config, "config file (YAML)")->required()->check(CLI::ExistingFile);
  bench->add_option("--memory", bopt.memory, "memory mode, overrides the config");
  bench->add_option("--order", bopt.order, "schedule order, overrides the config")->check(orders);
  bench->add_option("--placement-seconds", bopt.placement_seconds, placement_help)->check(seconds_limit);
  bench->add_option("--steps", bopt.steps, "timed steps")->check(CLI::Range(1, 1000000))->capture_default_str();
  bench->add_option("--warmup", bopt.warmup, "untimed steps first")->check(CLI::Range(0, 1000000))->capture_default_str();
  bench->add_option("--batch", bopt.batch, "batch size, overrides the config")->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  bench->add_flag("--json", bopt.json, "one JSON line");
  bench->add_option("--device", bopt.device, "cpu, cuda or cuda:N (overrides the config)");
  bench->add_flag("--force", bopt.force, "skip the pre-flight check that the planned step fits the device's memory");
  bench->add_flag("--eager", bopt.eager, "on a GPU: launch kernels node by node instead of replaying the captured step (CUDA graph)");
  auto* curve = app.add_subcommand("curve", "memory vs depth / sequence length / batch per memory mode, or the time-memory trade-off "
                                            "of budget=SIZE (--vary budget): CSV and plots");
  mnemo::CurveOptions copt;
  std::string curve_modes = "share,sublinear";
  curve->add_option("model", copt.model, "resnet, lstm or a config file")->required();
  curve->add_option("--vary", copt.vary, "depth, seq, batch or budget")->check(CLI::IsMember({"depth", "seq", "batch", "budget"}))->capture_default_str();
  curve->add_option("--values", copt.values, "values of the varied quantity (budget: MiB)")->delimiter(',');
  curve->add_option("--budgets", copt.budgets, "--vary budget: this many budgets from share's total down to the least feasible")
      ->check(CLI::Range(2, 200));
  curve->add_option("--memory", curve_modes, "comma-separated memory modes")->capture_default_str();
  curve->add_option("--out", copt.out, "output directory")->capture_default_str();
  curve->add_flag("!--no-plot", copt.plot, "write the CSV only");
  curve->add_option("--device", copt.device, "plan for cpu, cuda or cuda:N (the device's workspace sizes)")->capture_default_str();
  try {
    app.parse(argc, argv);
    // An option given with an empty value ("--checkpoint $OUT" with OUT unset) is an error: it
    // read as the option not given (a run trained and saved no final checkpoint, silently).
    for (const CLI::App* sub : app.get_subcommands())
      for (const CLI::Option* o : sub->get_options())
        if (o->count() > 0)
          for (const std::string& r : o->results())
            if (r.empty()) throw CLI::ValidationError(o->get_name(), "expected a value, got an empty string");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A first word that is no command (a typo, `mnemo trian`): CLI11 says only that a command is
    // required. Name the word and the commands.
    // An unknown option with no command after it (`mnemo --bogus`) is reported the same way.
    if (app.get_subcommands().empty() && argc > 1) {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
        names += (names.empty() ? "" : ", ") + sub->get_name();
      const std::string word = argv[1];
      const std::string what = word[0] == '-' ? "option '" + word + "' before a command" : "unknown command '" + word + "'";
      std::cerr << "mnemo: error: " << what << " (mnemo COMMAND [options]; the commands: " << names
                << ")\nRun 'mnemo --help' for what each does.\n";
      return 2;
    }
    // A bad command line is a usage error (exit 2) with a sentence, like every other error.
    std::cerr << "mnemo: error: " << e.what() << "\nRun 'mnemo --help' (or 'mnemo COMMAND --help') for the options.\n";
    return 2;
  }
  int rc = 0;
  try {
    (void)mnemo::ops::cpu_gemm_library();  // a bad MNEMO_CPU_GEMM fails every command at once, with its message
    // Under mpirun only `train` is data-parallel; any other command would run one copy per rank
    // (two benches competing for the cores, two grads writing one file).
    if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); n && std::string(n) != "1" && !app.got_subcommand("train"))
      MNEMO_FAIL() << "mnemo " << app.get_subcommands().front()->get_name() << " under mpirun with " << n
                   << " ranks: only 'mnemo train' runs data-parallel; run it without mpirun (every rank would run its own copy)";
    if (app.got_subcommand("ops")) print_ops();
    if (app.got_subcommand("train")) rc = mnemo::run_train(topt);
    if (app.got_subcommand("grad")) rc = mnemo::run_grad(gopt);
    if (app.got_subcommand("bench")) rc = mnemo::run_bench(bopt);
    if (app.got_subcommand("curve")) {
      std::stringstream ss(curve_modes);
      for (std::string m; std::getline(ss, m, ',');)
        if (!m.empty()) copt.modes.push_back(m);
      rc = mnemo::run_curve(copt);
    }
    if (app.got_subcommand("plan")) rc = run_plan(plan_config, plan_modes, plan_json, plan_device, plan_batch, plan_order, plan_placement, plan_ranks);
    if (app.got_subcommand("import")) rc = run_import(import_model, import_out, import_weights, import_batch, import_steps);
    if (app.got_subcommand("graph")) {
      const mnemo::Graph g = mnemo::small_model_graph(model, mirror);
      std::cout << (format == "json" ? g.to_json().dump(1) + "\n" : format == "dot" ? g.to_dot() : g.to_text());
    }
  } catch (const mnemo::Error& e) {
    std::cerr << "mnemo: error: " << e.what() << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {  // every failure ends in a message, never an abort
    std::cerr << "mnemo: error: " << e.code().message() << ": " << e.path1().string()
              << (e.path2().empty() ? "" : " -> " + e.path2().string()) << " (" << e.what() << ")\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "mnemo: error: out of memory (an allocation failed; a smaller batch or another memory mode may fit: "
                 "see mnemo plan)\n";
    return 1;
  } catch (const std::system_error& e) {
    std::cerr << "mnemo: error: " << e.what() << " (" << e.code().message() << ")\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "mnemo: error: " << e.what() << "\n";
    return 1;
  }
  // Output that could not be written (a full disk, a closed pipe, the file-size limit) is an error.
  std::cout.flush();
  const bool out_failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (out_failed) {
    std::cerr << "mnemo: error: writing the output failed (" << std::strerror(errno ? errno : EIO) << ")\n";
    return 1;
  }
  return rc;
}
