// The mnemo command: `mnemo --version`, `mnemo ops`, `mnemo demo` (see --help).
#include <CLI/CLI.hpp>
#include <iostream>

#include "autograd/op_info.h"
#include "core/error.h"
#include "train/demo.h"
#include "train/inspect.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mnemo: static-graph deep learning with built-in gradient checkpointing"};
  app.set_version_flag("--version", std::string("mnemo ") + MNEMO_VERSION);
  app.require_subcommand(1);
  app.add_subcommand("ops", "list every registered op: kind, in-place options, forward entries its backward reads");
  auto* demo = app.add_subcommand("demo", "train a small conv net for a few steps on synthetic data, printing the loss");
  mnemo::DemoOptions opt;
  demo->add_option("--steps", opt.steps, "training steps")->check(CLI::PositiveNumber)->capture_default_str();
  demo->add_option("--batch", opt.batch, "batch size")->check(CLI::PositiveNumber)->capture_default_str();
  demo->add_option("--lr", opt.lr, "learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  demo->add_option("--threads", opt.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber)->capture_default_str();
  demo->add_option("--seed", opt.seed, "random seed")->capture_default_str();
  auto* graph = app.add_subcommand("graph", "print a built-in model's graph as text, JSON or Graphviz DOT");
  std::string model = "cnn", format = "text";
  int mirror = -1;
  graph->add_option("model", model, "mlp, cnn or lstm")->check(CLI::IsMember({"mlp", "cnn", "lstm"}))->capture_default_str();
  graph->add_option("--format", format, "text, json or dot")->check(CLI::IsMember({"text", "json", "dot"}))->capture_default_str();
  graph->add_option("--training", mirror, "print the training graph with mirror count m(v) = N for every node (0: plain backprop)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    if (app.got_subcommand("ops")) print_ops();
    if (app.got_subcommand("demo")) return mnemo::run_demo(opt);
    if (app.got_subcommand("graph")) {
      const mnemo::Graph g = mnemo::small_model_graph(model, mirror);
      std::cout << (format == "json" ? g.to_json().dump(1) + "\n" : format == "dot" ? g.to_dot() : g.to_text());
    }
  } catch (const mnemo::Error& e) {
    std::cerr << "mnemo: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
