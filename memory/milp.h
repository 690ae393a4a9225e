// Mixed-integer programmes for the planners' exact solvers (budget=SIZE's, memory/budget_exact.h;
// the schedule order's, memory/order.h), solved by COIN-OR CBC. Internal to memory/.
#pragma once
#include <limits>
#include <utility>
#include <vector>

namespace mnemo {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A programme under construction: columns with bounds and costs, rows as sparse lists; minimised.
struct Lp {
  std::vector<double> lo, hi, obj;
  std::vector<char> integer;
  struct Row {
    std::vector<std::pair<int, double>> terms;
    double lo, hi;
  };
  std::vector<Row> rows;
  int add_col(double l, double h, double c, bool is_int) {
    lo.push_back(l), hi.push_back(h), obj.push_back(c), integer.push_back(is_int);
    return static_cast<int>(lo.size()) - 1;
  }
  void add_row(std::vector<std::pair<int, double>> terms, double l, double h) { rows.push_back({std::move(terms), l, h}); }
};

struct Solved {
  bool solution = false, optimal = false, infeasible = false, time_limit = false;
  bool claimed_infeasible = false;  // CBC said infeasible although a start was given, or late: not believed
  double objective = 0;  // of the solution, when there is one
  double bound = 0;      // proven: no solution is below it (a MIP's best possible value; an LP's optimum); -kInf: none
  std::vector<double> x;
};

// Solves `lp` with CBC within `seconds`; `cutoff` < kInf: only solutions below it are sought; CBC
// stops when its incumbent is within `relative_gap` of its bound. `start` (a value per column): a
// feasible solution CBC starts from (it may leave columns for CBC to complete). `preprocess` false:
// without CBC's (Cgl's) preprocessing. With a start given, or made after half of `seconds`, CBC's
// claim of infeasibility of a MIP is not believed: `claimed_infeasible`, no solution, no bound
// (-kInf). `root_only`: the root node alone (the cutting planes on the LP relaxation, after the
// preprocessing when asked; no primal heuristics, no branching), for its bound: the LP's
// strengthened by the cuts.
Solved run_milp(const Lp& lp, double seconds, double cutoff, double relative_gap, const std::vector<double>* start = nullptr,
                bool preprocess = true, bool root_only = false);

}  // namespace mnemo
