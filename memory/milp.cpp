// The programmes of memory/milp.h, handed to CBC through its C interface.
#include "memory/milp.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace mnemo {

Solved run_milp(const Lp& lp, double seconds, double cutoff, double relative_gap, const std::vector<double>* mip_start,
                bool preprocess, bool root_only) {
  const int cols = static_cast<int>(lp.lo.size()), rows = static_cast<int>(lp.rows.size());
  // Column-major (CBC's loadProblem).
  std::vector<int> count(cols, 0);
  for (const Lp::Row& r : lp.rows)
    for (const auto& [c, v] : r.terms) ++count[c];
  std::vector<CoinBigIndex> start(cols + 1, 0);
  for (int c = 0; c < cols; ++c) start[c + 1] = start[c] + count[c];
  std::vector<int> index(start[cols]);
  std::vector<double> value(start[cols]);
  std::vector<CoinBigIndex> at(start.begin(), start.end() - 1);
  std::vector<double> rlo(rows), rhi(rows);
  for (int i = 0; i < rows; ++i) {
    for (const auto& [c, v] : lp.rows[i].terms) index[at[c]] = i, value[at[c]++] = v;
    rlo[i] = std::isfinite(lp.rows[i].lo) ? lp.rows[i].lo : -std::numeric_limits<double>::max();
    rhi[i] = std::isfinite(lp.rows[i].hi) ? lp.rows[i].hi : std::numeric_limits<double>::max();
  }
  Cbc_Model* m = Cbc_newModel();
  Cbc_loadProblem(m, cols, rows, start.data(), index.data(), value.data(), lp.lo.data(), lp.hi.data(), lp.obj.data(), rlo.data(),
                  rhi.data());
  bool mip = false;
  for (int c = 0; c < cols; ++c)
    if (lp.integer[c]) Cbc_setInteger(m, c), mip = true;
  Cbc_setLogLevel(m, 0);
  const double limit = std::max(0.05, seconds);
  Cbc_setMaximumSeconds(m, limit);
  // Wall-clock seconds, as the modes' SECONDS promise: CBC counts CPU time by default, and beside
  // another busy process it ran twice as long (tests/order_test.cpp).
  Cbc_setParameter(m, "timeMode", "elapsed");
  if (cutoff < kInf) Cbc_setCutoff(m, cutoff);
  Cbc_setAllowableFractionGap(m, relative_gap);
  if (!preprocess) Cbc_setParameter(m, "preprocess", "off");
  if (root_only) {
    // The heuristics are what takes time at the root (the 5005-node ResNet's programme: 2.5 s with
    // them, 0.3 s without, the same bound); they seek solutions, which a bound does not need.
    Cbc_setParameter(m, "maxNodes", "0");
    Cbc_setParameter(m, "heuristicsOnOff", "off");
  }
  std::vector<int> all;
  if (mip_start) {
    all.resize(cols);
    for (int c = 0; c < cols; ++c) all[c] = c;
    Cbc_setMIPStartI(m, cols, all.data(), mip_start->data());
  }
  const auto t0 = std::chrono::steady_clock::now();
  Cbc_solve(m);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Solved s;
  s.optimal = Cbc_isProvenOptimal(m);
  s.infeasible = Cbc_isProvenInfeasible(m);
  s.time_limit = Cbc_isSecondsLimitReached(m);
  const double* x = Cbc_bestSolution(m);
  if (!x && !mip && s.optimal) x = Cbc_getColSolution(m);  // an LP's optimum (CBC keeps no "best solution" for it)
  if (s.infeasible && mip && (mip_start || took >= 0.5 * limit)) {
    // CBC 2.10's preprocessing, entered with the time nearly spent by the root LP, can report
    // "cut generators found to be infeasible" for a programme whose start is feasible: not proven,
    // and whatever CBC holds then is not trusted (no solution, no bound). Seen without a start too
    // (2026-11-28: the root of the 5005-node ResNet's programme with 39 gaps, entered with 2 s
    // left, said no plan below the family's was feasible, where the exact solver proves 6% less
    // in 40 s): a claim made after half the time is not believed either.
    s.infeasible = false;
    s.claimed_infeasible = true;
    x = nullptr;
  }
  if (x && !s.infeasible) {
    s.solution = true;
    s.x.assign(x, x + cols);
    for (int c = 0; c < cols; ++c) s.objective += lp.obj[c] * s.x[c];  // (CBC's own value is 0 after a pure LP)
  }
  // A MIP's best possible value holds at a time limit too; an LP's value only at its optimum. CBC
  // gives the incumbent's value (or its "infinity") where it has no bound of its own: unknown.
  s.bound = mip ? Cbc_getBestPossibleObjValue(m) : s.optimal ? s.objective : 0;
  const bool unknown = s.claimed_infeasible || !std::isfinite(s.bound) || std::abs(s.bound) >= 1e30 ||
                       (mip && !s.optimal && s.solution && s.bound >= s.objective - 1e-9 * std::max(1.0, std::abs(s.objective)));
  if (unknown) s.bound = -kInf;
  Cbc_deleteModel(m);
  return s;
}

}  // namespace mnemo
