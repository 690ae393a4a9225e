// Optimal gradient checkpoints (see optimal_checkpoints.h).
#include "memory/optimal_checkpoints.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

#include "core/error.h"

namespace mnemo {
namespace {

void finish_edges(CheckpointGraph& g) {
  const int n = g.size();
  for (int v = 0; v < n; ++v) {
    for (auto* list : {&g.succ[v], &g.pred[v]}) {
      std::sort(list->begin(), list->end());
      list->erase(std::unique(list->begin(), list->end()), list->end());
    }
  }
  // S feeds every vertex without a predecessor, T reads every vertex without a successor.
  const int S = 0, T = n - 1;
  for (int v = 1; v < T; ++v) {
    if (g.pred[v].empty()) g.pred[v].push_back(S), g.succ[S].push_back(v);
    if (g.succ[v].empty()) g.succ[v].push_back(T), g.pred[T].push_back(v);
  }
  std::sort(g.succ[S].begin(), g.succ[S].end());
  std::sort(g.pred[T].begin(), g.pred[T].end());
  if (n == 2) g.succ[S] = {T}, g.pred[T] = {S};
}

}  // namespace

CheckpointGraph make_checkpoint_graph(const std::vector<int64_t>& cost, const std::vector<std::pair<int, int>>& edges) {
  const int n = static_cast<int>(cost.size());
  CheckpointGraph g;
  g.cost.assign(n + 2, 0);
  g.succ.resize(n + 2);
  g.pred.resize(n + 2);
  g.nodes.resize(n + 2);
  for (int i = 0; i < n; ++i) {
    MNEMO_CHECK(cost[i] >= 0) << "checkpoint graph: vertex " << i << " has negative cost " << cost[i];
    g.cost[i + 1] = cost[i];
  }
  for (const auto& [a, b] : edges) {
    MNEMO_CHECK(a >= 0 && a < b && b < n) << "checkpoint graph: edge (" << a << ", " << b << ") is not a < b < " << n;
    g.succ[a + 1].push_back(b + 1);
    g.pred[b + 1].push_back(a + 1);
  }
  finish_edges(g);
  return g;
}

CheckpointGraph checkpoint_graph(const Graph& fwd, int loss) {
  const int n = static_cast<int>(fwd.size());
  // Only what the loss depends on: side outputs (batch norm's running statistics, read by the
  // state updates at the end of the step) would otherwise all feed T and join every layer to the
  // end of the graph.
  MNEMO_CHECK(loss >= 0 && loss < n) << "checkpoint graph: loss node " << loss << " is not in the graph of " << n << " nodes";
  std::vector<char> needed(n, 0);
  needed[loss] = 1;
  for (int v = loss; v >= 0; --v)
    if (needed[v])
      for (const EntryRef& e : fwd.node(v).inputs) needed[e.node] = 1;
  std::vector<int> vertex_of(n, -1);
  CheckpointGraph g;
  g.cost.push_back(0);  // S
  g.nodes.emplace_back();
  for (int v = 0; v < n; ++v) {
    const Node& node = fwd.node(v);
    if (!needed[v]) continue;
    if (node.is(OpKind::view)) {
      vertex_of[v] = node.inputs.empty() ? -1 : vertex_of[node.inputs[0].node];
      if (vertex_of[v] >= 0) g.nodes[vertex_of[v]].push_back(v);
      continue;
    }
    if (node.op->kind != OpKind::compute) continue;
    vertex_of[v] = g.size();
    int64_t bytes = 0;
    for (const TensorType& t : node.outputs) bytes += static_cast<int64_t>(t.bytes());
    g.cost.push_back(bytes);
    g.nodes.push_back({v});
  }
  g.cost.push_back(0);  // T
  g.nodes.emplace_back();
  g.succ.resize(g.size());
  g.pred.resize(g.size());
  for (int v = 0; v < n; ++v) {
    const Node& node = fwd.node(v);
    if (node.op->kind != OpKind::compute || !needed[v]) continue;
    const int x = vertex_of[v];
    for (const EntryRef& e : node.inputs) {
      const int u = vertex_of[e.node];
      if (u < 0 || u == x) continue;
      g.succ[u].push_back(x);
      g.pred[x].push_back(u);
    }
  }
  finish_edges(g);
  return g;
}

namespace {

// Builds the division tree breadth first: each IS is divided with per-vertex scratch arrays
// (stamps instead of clearing), its members queued.
class TreeBuilder {
 public:
  TreeBuilder(const CheckpointGraph& g, DivisionTree& tree)
      : g_(g), t_(tree), in_(g.size(), 0), mark_(g.size(), 0), idom_(g.size(), -1), ipdom_(g.size(), -1),
        tin_(g.size(), 0), tout_(g.size(), 0), ptin_(g.size(), 0), ptout_(g.size(), 0), aux_(g.size(), -1),
        member_(g.size(), 0) {}

  void run() {
    std::vector<int> interior;
    for (int v = 1; v < g_.target(); ++v) interior.push_back(v);
    if (interior.empty()) return;
    add(g_.source(), g_.target(), std::move(interior), false);
    for (size_t id = 0; id < t_.segments.size(); ++id) divide(static_cast<int>(id));
  }

 private:
  bool has_edge(int a, int b) const { return std::binary_search(g_.succ[a].begin(), g_.succ[a].end(), b); }
  int add(int s, int t, std::vector<int> interior, bool edge) {
    Segment seg;
    seg.s = s, seg.t = t, seg.edge = edge;
    for (int v : interior) seg.cost += g_.cost[v];
    seg.interior = std::move(interior);
    t_.segments.push_back(std::move(seg));
    return static_cast<int>(t_.segments.size()) - 1;
  }
  bool inside(int v) const { return in_[v] == stamp_; }  // in the current IS's interior

  void divide(int id) {
    const int s = t_.segments[id].s, t = t_.segments[id].t;
    const std::vector<int> interior = t_.segments[id].interior;
    ++stamp_;
    for (int v : interior) in_[v] = stamp_;
    const bool direct = t_.segments[id].edge;
    // Branches: the connected parts of the interior.
    std::vector<std::vector<int>> parts;
    ++mark_stamp_;
    for (int v0 : interior) {
      if (mark_[v0] == mark_stamp_) continue;
      parts.emplace_back();
      std::vector<int> stack{v0};
      mark_[v0] = mark_stamp_;
      while (!stack.empty()) {
        const int v = stack.back();
        stack.pop_back();
        parts.back().push_back(v);
        for (const auto* list : {&g_.succ[v], &g_.pred[v]})
          for (int u : *list)
            if (inside(u) && mark_[u] != mark_stamp_) mark_[u] = mark_stamp_, stack.push_back(u);
      }
      std::sort(parts.back().begin(), parts.back().end());
    }
    if (parts.size() + (direct ? 1 : 0) >= 2) {
      t_.segments[id].kind = SegmentKind::branch;
      for (std::vector<int>& p : parts) {
        const int c = add(s, t, std::move(p), false);
        t_.segments[id].children.push_back(c);
      }
      return;
    }
    // One part, no direct edge: the dominators of t are the splitting vertices.
    dominators(s, t, interior);
    std::vector<int> chain;
    for (int u = idom_[t]; u != s; u = idom_[u]) chain.push_back(u);
    std::reverse(chain.begin(), chain.end());
    if (!chain.empty()) {
      t_.segments[id].kind = SegmentKind::linear;
      // Each vertex belongs to the member after the nearest splitting vertex dominating it
      // (ids are topological, so a vertex's immediate dominator is assigned before it).
      for (size_t j = 0; j < chain.size(); ++j) aux_[chain[j]] = static_cast<int>(j) + 1;
      std::vector<std::vector<int>> members(chain.size() + 1);
      for (int v : interior) {
        if (aux_[v] > 0) continue;
        const int p = idom_[v];
        const int m = p == s ? 0 : aux_[p] > 0 ? aux_[p] : member_[p];
        member_[v] = m;
        members[m].push_back(v);
      }
      for (int u : chain) aux_[u] = -1;
      t_.segments[id].split = chain;
      for (std::vector<int>& mem : members) {
        const int c = mem.empty() ? -1 : add(0, 0, std::move(mem), false);
        t_.segments[id].children.push_back(c);
      }
      // Ends of each member: u_j and u_{j+1}.
      for (size_t j = 0; j < t_.segments[id].children.size(); ++j) {
        const int c = t_.segments[id].children[j];
        if (c < 0) continue;
        t_.segments[c].s = j == 0 ? s : chain[j - 1];
        t_.segments[c].t = j == chain.size() ? t : chain[j];
        t_.segments[c].edge = has_edge(t_.segments[c].s, t_.segments[c].t);
      }
      return;
    }
    complicate(id, s, t, interior);
  }

  // Immediate dominators (from s) and their tree's DFS intervals, over s, the interior and t;
  // vertex ids are topological, so one pass in id order suffices (Cooper, Harvey, Kennedy).
  void dominators(int s, int t, const std::vector<int>& interior) {
    idom_[s] = s;
    auto intersect = [&](int a, int b) {
      while (a != b) {
        while (a > b) a = idom_[a];
        while (b > a) b = idom_[b];
      }
      return a;
    };
    auto visit = [&](int v) {
      int d = -1;
      for (int p : g_.pred[v])  // (an edge s -> t is not this IS's: it divides as a branch IS)
        if ((p == s && v != t) || inside(p)) d = d < 0 ? p : intersect(d, p);
      MNEMO_ASSERT(d >= 0) << "division tree: vertex " << v << " has no predecessor in its segment";
      idom_[v] = d;
    };
    for (int v : interior) visit(v);
    visit(t);
  }

  void post_dominators(int s, int t, const std::vector<int>& interior) {
    ipdom_[t] = t;
    auto intersect = [&](int a, int b) {
      while (a != b) {
        while (a < b) a = ipdom_[a];
        while (b < a) b = ipdom_[b];
      }
      return a;
    };
    auto visit = [&](int v) {
      int d = -1;
      for (int q : g_.succ[v])
        if ((q == t && v != s) || inside(q)) d = d < 0 ? q : intersect(d, q);
      MNEMO_ASSERT(d >= 0) << "division tree: vertex " << v << " has no successor in its segment";
      ipdom_[v] = d;
    };
    for (auto it = interior.rbegin(); it != interior.rend(); ++it) visit(*it);
    visit(s);
  }

  // DFS intervals of a tree given by parent links over `verts` (root: parent[root] == root).
  void intervals(const std::vector<int>& verts, int root, const std::vector<int>& parent, std::vector<int>& tin,
                 std::vector<int>& tout, std::vector<int>* order) {
    std::map<int, std::vector<int>> kids;
    for (int v : verts)
      if (v != root) kids[parent[v]].push_back(v);
    int clock = 0;
    std::vector<std::pair<int, size_t>> stack{{root, 0}};
    tin[root] = clock++;
    if (order) order->push_back(root);
    while (!stack.empty()) {
      auto& [v, i] = stack.back();
      auto k = kids.find(v);
      if (k != kids.end() && i < k->second.size()) {
        const int c = k->second[i++];
        tin[c] = clock++;
        if (order) order->push_back(c);
        stack.push_back({c, 0});
      } else {
        tout[v] = clock;
        stack.pop_back();
      }
    }
  }

  // The maximal split of a complicate IS: for every interior vertex v, the largest proper IS
  // [a, b] holding v, with a a dominator and b a post-dominator of v. An IS [a, b]'s interior is
  // made of vertices a dominates and b post-dominates; the largest one is the union of the
  // connected parts of that set whose edges stay inside the part and {a, b}.
  void complicate(int id, int s, int t, const std::vector<int>& interior) {
    t_.segments[id].kind = SegmentKind::complicate;
    post_dominators(s, t, interior);
    std::vector<int> verts = interior;
    verts.push_back(s);
    verts.push_back(t);
    std::vector<int> dom_order;  // vertices by dominator-tree preorder
    intervals(verts, s, idom_, tin_, tout_, &dom_order);
    intervals(verts, t, ipdom_, ptin_, ptout_, nullptr);
    auto post_dominates = [&](int b, int w) { return ptin_[b] < ptin_[w] && ptin_[w] < ptout_[b]; };  // strictly
    std::map<std::pair<int, int>, int> memo;  // (a, b) -> index into found (-1: none)
    std::vector<std::vector<int>> found;
    std::vector<std::pair<int, int>> ends;
    auto largest_is = [&](int a, int b) {
      auto it = memo.find({a, b});
      if (it != memo.end()) return it->second;
      // Candidates in a's dominator subtree that b post-dominates.
      std::vector<int> cand;
      ++mark_stamp_;
      for (int k = tin_[a] + 1; k < tout_[a]; ++k) {
        const int w = dom_order[k];
        if (w != t && w != b && inside(w) && post_dominates(b, w)) cand.push_back(w), mark_[w] = mark_stamp_;
      }
      // Connected parts among the candidates; keep the closed ones.
      std::vector<int> result;
      const int part_stamp = ++mark_stamp_;
      const int cand_stamp = part_stamp - 1;
      for (int w0 : cand) {
        if (mark_[w0] != cand_stamp) continue;
        std::vector<int> part, stack{w0};
        mark_[w0] = part_stamp;
        bool closed = true;
        while (!stack.empty()) {
          const int w = stack.back();
          stack.pop_back();
          part.push_back(w);
          for (int p : g_.pred[w]) {
            if (p == a) continue;
            if (mark_[p] == cand_stamp) mark_[p] = part_stamp, stack.push_back(p);
            else if (mark_[p] != part_stamp) closed = false;
          }
          for (int q : g_.succ[w]) {
            if (q == b) continue;
            if (mark_[q] == cand_stamp) mark_[q] = part_stamp, stack.push_back(q);
            else if (mark_[q] != part_stamp) closed = false;
          }
        }
        if (closed) result.insert(result.end(), part.begin(), part.end());
      }
      int index = -1;
      if (!result.empty()) {
        std::sort(result.begin(), result.end());
        index = static_cast<int>(found.size());
        found.push_back(std::move(result));
        ends.push_back({a, b});
      }
      memo[{a, b}] = index;
      return index;
    };
    std::vector<int> best(g_.size(), -1);
    for (int v : interior) {
      int choice = -1;
      for (int a = idom_[v];; a = idom_[a]) {
        for (int b = ipdom_[v];; b = ipdom_[b]) {
          if (!(a == s && b == t)) {
            const int k = largest_is(a, b);
            if (k >= 0 && std::binary_search(found[k].begin(), found[k].end(), v) &&
                (choice < 0 || found[k].size() > found[choice].size()))
              choice = k;
          }
          if (b == t) break;
        }
        if (a == s) break;
      }
      best[v] = choice;
    }
    // The members must partition the vertices they hold (the maximal split is unique).
    std::vector<int> members;
    for (int v : interior) {
      if (best[v] < 0) {
        t_.segments[id].split.push_back(v);
        continue;
      }
      if (std::find(members.begin(), members.end(), best[v]) == members.end()) {
        members.push_back(best[v]);
        for (int w : found[best[v]])
          MNEMO_ASSERT(best[w] == best[v]) << "division tree: members of a complicate segment overlap at vertex " << w;
      }
    }
    for (int k : members) {
      const int c = add(ends[k].first, ends[k].second, found[k], has_edge(ends[k].first, ends[k].second));
      t_.segments[id].children.push_back(c);
    }
  }

  const CheckpointGraph& g_;
  DivisionTree& t_;
  std::vector<int> in_, mark_, idom_, ipdom_, tin_, tout_, ptin_, ptout_, aux_, member_;
  int stamp_ = 0, mark_stamp_ = 0;
};

}  // namespace

DivisionTree division_tree(const CheckpointGraph& g) {
  DivisionTree tree;
  TreeBuilder(g, tree).run();
  return tree;
}

namespace {

class Solver {
 public:
  Solver(const CheckpointGraph& g, const DivisionTree& tree, int64_t c, std::vector<char>& kept)
      : g_(g), tree_(tree), c_(c), kept_(kept) {}
  int64_t paper_max = 0;

  // The least checkpoint cost inside IS `id` (its ends already kept) with every segment <= C.
  int64_t solve(int id) {
    const Segment& seg = tree_.segments[id];
    int64_t total = 0;
    if (seg.kind == SegmentKind::linear) return linear(seg);
    if (seg.kind == SegmentKind::complicate)
      for (int x : seg.split) kept_[x] = 1, total += g_.cost[x];
    for (int c : seg.children) total += member(c);
    return total;
  }

 private:
  int64_t member(int c) {
    const int64_t cost = tree_.segments[c].cost;
    if (cost > c_) return solve(c);
    paper_max = std::max(paper_max, cost);
    return 0;
  }

  // Least-cost path s = u_0 .. u_{k+1} = t over the accessibility graph: u_i -> u_j when the run
  // of members i..j-1 and splitting vertices between them is <= C (all unexpanded), or j = i + 1
  // with member i expanded (its own checkpoints added).
  int64_t linear(const Segment& seg) {
    const std::vector<int>& u = seg.split;
    const int k = static_cast<int>(u.size());
    auto lu = [&](int j) { return j >= 1 && j <= k ? g_.cost[u[j - 1]] : int64_t{0}; };
    auto mc = [&](int m) { return seg.children[m] < 0 ? int64_t{0} : tree_.segments[seg.children[m]].cost; };
    std::vector<int64_t> prefix(k + 2, 0);  // A[j] = sum_{m<j} c_m + sum_{1<=m<j} l(u_m)
    for (int j = 1; j <= k + 1; ++j) prefix[j] = prefix[j - 1] + mc(j - 1) + (j >= 2 ? lu(j - 1) : 0);
    auto run = [&](int i, int j) { return prefix[j] - prefix[i] - lu(i); };
    std::vector<int64_t> dist(k + 2, 0);
    std::vector<int> from(k + 2, -1);
    std::vector<char> expanded(k + 1, 0);
    std::deque<int> window;
    int lo = 0;
    for (int j = 1; j <= k + 1; ++j) {
      const int m = j - 1;
      if (mc(m) > c_) {
        expanded[m] = 1;
        window.clear();
        lo = j;
        dist[j] = dist[j - 1] + solve(seg.children[m]);
        from[j] = j - 1;
      } else {
        while (!window.empty() && dist[window.back()] >= dist[j - 1]) window.pop_back();
        window.push_back(j - 1);
        while (run(lo, j) > c_) ++lo;
        while (window.front() < lo) window.pop_front();
        dist[j] = dist[window.front()];
        from[j] = window.front();
      }
      dist[j] += lu(j);
    }
    for (int j = k + 1; j > 0; j = from[j]) {
      const int i = from[j];
      if (!expanded[j - 1]) paper_max = std::max(paper_max, run(i, j));
      if (i >= 1) kept_[u[i - 1]] = 1;
    }
    return dist[k + 1];
  }

  const CheckpointGraph& g_;
  const DivisionTree& tree_;
  const int64_t c_;
  std::vector<char>& kept_;
};

// The groups of dropped vertices (connected through dropped vertices; S and T count as kept):
// the largest group's cost, and whether every group is entered from one kept vertex and left to
// one (the papers' validity).
struct Groups {
  int64_t largest = 0;
  bool valid = true;
};
template <class Kept>
Groups scan_groups(const CheckpointGraph& g, const Kept& kept) {
  const int n = g.size();
  auto is_kept = [&](int v) { return v == 0 || v == n - 1 || kept[v]; };
  std::vector<char> seen(n, 0);
  Groups out;
  std::vector<int> stack;
  for (int v0 = 1; v0 < n - 1; ++v0) {
    if (is_kept(v0) || seen[v0]) continue;
    int64_t group = 0;
    int entry = -1, exit = -1;
    stack.assign(1, v0);
    seen[v0] = 1;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      group += g.cost[v];
      for (const bool forward : {false, true}) {
        int& end = forward ? exit : entry;
        for (int w : forward ? g.succ[v] : g.pred[v]) {
          if (is_kept(w)) {
            out.valid &= end < 0 || end == w;
            end = w;
          } else if (!seen[w]) {
            seen[w] = 1, stack.push_back(w);
          }
        }
      }
    }
    out.largest = std::max(out.largest, group);
  }
  return out;
}

}  // namespace

CheckpointSolution solve_max_term(const CheckpointGraph& g, const DivisionTree& tree, int64_t max_term) {
  MNEMO_CHECK(max_term >= 0) << "optimal checkpoints: max term " << max_term << " is negative";
  std::vector<char> kept(g.size(), 0);
  CheckpointSolution sol;
  sol.max_term = max_term;
  if (!tree.segments.empty()) {
    Solver solver(g, tree, max_term, kept);
    if (tree.segments[0].cost > max_term) {
      sol.checkpoint_bytes = solver.solve(0);
    } else {
      solver.paper_max = tree.segments[0].cost;
    }
    sol.paper_max = solver.paper_max;
  }
  for (int v = 1; v < g.size() - 1; ++v)
    if (kept[v]) sol.checkpoints.push_back(v);
  sol.max_segment_bytes = scan_groups(g, kept).largest;
  return sol;
}

OptimalSearch optimal_checkpoints(const CheckpointGraph& g, const DivisionTree& tree, double slack) {
  OptimalSearch out;
  int64_t c = tree.segments.empty() ? 0 : tree.segments[0].cost;
  int64_t best = INT64_MAX;
  while (true) {
    CheckpointSolution sol = solve_max_term(g, tree, c);
    ++out.max_terms;
    if (static_cast<double>(sol.checkpoint_bytes) > (1.0 + slack) * static_cast<double>(best)) break;
    sol.checkpoints.clear();
    sol.checkpoints.shrink_to_fit();
    if (sol.objective() < best) best = sol.objective(), out.best = out.solutions.size();
    const int64_t next = sol.paper_max - 1;
    out.solutions.push_back(std::move(sol));
    if (next < 0) break;
    c = next;
  }
  return out;
}

std::vector<size_t> by_objective(const OptimalSearch& s) {
  std::vector<size_t> order(s.solutions.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s.solutions[a].objective() < s.solutions[b].objective(); });
  return order;
}

int64_t checkpoint_objective(const CheckpointGraph& g, const std::vector<bool>& kept, int64_t* max_segment) {
  const int n = g.size();
  MNEMO_CHECK(static_cast<int>(kept.size()) == n) << "checkpoint objective: " << kept.size() << " flags for " << n << " vertices";
  const Groups groups = scan_groups(g, kept);
  if (!groups.valid) return -1;
  int64_t sum = 0;
  for (int v = 1; v < n - 1; ++v)
    if (kept[v]) sum += g.cost[v];
  if (max_segment) *max_segment = groups.largest;
  return sum + groups.largest;
}

CheckpointSolution refine_checkpoints(const CheckpointGraph& g, const CheckpointSolution& start) {
  const int n = g.size();
  std::vector<char> kept(n, 0);
  for (int v : start.checkpoints) kept[v] = 1;
  int64_t sum = start.checkpoint_bytes;
  int64_t largest = scan_groups(g, kept).largest;
  std::vector<int> order = start.checkpoints;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return g.cost[a] > g.cost[b]; });
  // Group sizes by union-find over the dropped vertices: dropping v merges v with the groups of
  // its dropped neighbours; the largest group is the max of the old largest and the merged one
  // (groups only grow as checkpoints are dropped).
  std::vector<int> parent(n);
  std::vector<int64_t> size(n, 0);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  auto dropped = [&](int w) { return w > 0 && w < n - 1 && !kept[w]; };
  for (int v = 1; v < n - 1; ++v) size[v] = g.cost[v];
  for (int v = 1; v < n - 1; ++v)
    if (dropped(v))
      for (int w : g.succ[v])
        if (dropped(w)) {
          const int a = find(v), b = find(w);
          if (a != b) parent[b] = a, size[a] += size[b];
        }
  for (int v : order) {
    // The group v would join: itself and its dropped neighbours' groups (each counted once).
    int64_t merged = g.cost[v];
    std::vector<int> roots;
    for (const auto* list : {&g.succ[v], &g.pred[v]})
      for (int w : *list)
        if (dropped(w)) {
          const int r = find(w);
          if (std::find(roots.begin(), roots.end(), r) == roots.end()) roots.push_back(r), merged += size[r];
        }
    const int64_t new_largest = std::max(largest, merged);
    if (sum - g.cost[v] + new_largest >= sum + largest) continue;
    kept[v] = 0;
    sum -= g.cost[v];
    largest = new_largest;
    for (int r : roots) parent[r] = v, size[v] += size[r];
  }
  CheckpointSolution out;
  out.max_term = start.max_term;
  out.paper_max = start.paper_max;
  for (int v = 1; v < n - 1; ++v)
    if (kept[v]) out.checkpoints.push_back(v);
  out.checkpoint_bytes = sum;
  out.max_segment_bytes = largest;
  return out;
}

MirrorPlan checkpoint_mirror_plan(const CheckpointGraph& g, const std::vector<int>& checkpoints, size_t forward_size) {
  MirrorPlan m(forward_size, 0);
  for (int v = 1; v < g.size() - 1; ++v)
    for (int node : g.nodes[v]) m.at(node) = 1;
  for (int v : checkpoints)
    for (int node : g.nodes.at(v)) m.at(node) = 0;
  return m;
}

}  // namespace mnemo
