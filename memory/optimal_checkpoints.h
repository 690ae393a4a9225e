// Optimal gradient checkpoints on arbitrary computation graphs (Feng & Huang, "Re-forwarding" and
// "Optimal Gradient Checkpoint Search for Arbitrary Computation Graphs").
//
// The model: vertices are tensors with a memory cost l(v), edges the ops. A checkpoint set K is
// kept through the forward pass; every other vertex is dropped and recomputed once (m = 1) in the
// backward pass, one independent segment at a time. An independent segment (IS) [s, t] is a set
// of vertices whose edges stay inside the set plus its source s and target t. The objective is
//     sum_{v in K} l(v) + max over segments of (sum of l over the segment's vertices)
// where the segments are the connected groups of dropped vertices; K is valid when each group is
// entered from one kept vertex and left to one kept vertex (an IS). mnemo adds a virtual source S
// (feeding every vertex without a computed input) and target T (fed by every vertex nobody reads),
// both of cost 0 and always kept.
//
// The search (the papers' Alg. 1-6, with faster constructions):
//  * the division tree: the whole graph [S, T] is the root; an IS divides into
//      branch      its branches: the connected parts of its interior (and a direct edge s -> t);
//      linear      the segments between its splitting vertices, which are exactly the dominators of
//                  t (from s) inside the IS: one dominator pass instead of the papers' per-vertex test;
//      complicate  its maximal split: the largest proper ISs [a, b]; an IS holding v has a among
//                  v's dominators and b among its post-dominators, so only those pairs are tried
//                  (the papers try every vertex pair);
//    vertices of a complicate IS outside every member are its connecting vertices.
//  * for a max term C, Alg. 5 on the tree: an IS whose cost is <= C stays one segment; a larger one
//    is broken: a branch IS into its branches, a complicate IS into its members (its connecting
//    vertices become checkpoints), a linear IS by the least-cost path over its accessibility graph
//    (checkpoints among the splitting vertices, each run between two of them <= C; members above
//    C are broken recursively and force their ends). The path is a sliding-window minimum: O(k)
//    for k splitting vertices instead of the papers' O(k^2) edges.
//  * the max terms: the papers try the cost of every IS; a solution found under C whose largest
//    segment is B < C is also the solution for every max term in [B, C], so the loop goes from C =
//    the whole graph's cost to C = B - 1 each time, and stops once the checkpoints alone cost more
//    than the best objective found (the checkpoint cost only grows as C shrinks).
// Complexity: the tree in O(n + e) per IS level for branch and linear ISs, O(p * n_c) for a
// complicate IS of n_c vertices and p (dominator, post-dominator) pairs tried; each max term
// O(n + e); docs/MEMORY.md records measured times.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/gradient.h"

namespace mnemo {

struct CheckpointGraph {
  std::vector<int64_t> cost;                 // l(v); vertex 0 is S, the last is T (both cost 0)
  std::vector<std::vector<int>> succ, pred;  // sorted, no duplicates; every edge goes to a larger id
  std::vector<std::vector<int>> nodes;       // the forward nodes a vertex stands for (a compute node and its views)
  int size() const { return static_cast<int>(cost.size()); }
  int source() const { return 0; }
  int target() const { return size() - 1; }
};

// A graph of vertices 0..n-1 with costs `cost` and edges (a, b), a < b: vertex i becomes i + 1, and
// S and T are added.
CheckpointGraph make_checkpoint_graph(const std::vector<int64_t>& cost, const std::vector<std::pair<int, int>>& edges);
// A forward graph's: one vertex per compute node the loss depends on (views merged into the node
// whose memory they alias), its cost the bytes of its outputs. Leaves (inputs, params) and nodes
// the loss does not read (running statistics for the state updates) are not vertices: they are
// always kept.
CheckpointGraph checkpoint_graph(const Graph& forward, int loss);

enum class SegmentKind { linear, branch, complicate };

struct Segment {
  SegmentKind kind = SegmentKind::branch;
  int s = 0, t = 0;
  std::vector<int> interior;  // sorted
  int64_t cost = 0;           // sum of l over the interior
  bool edge = false;          // the edge s -> t belongs to this IS (which then divides as a branch IS)
  // linear: the splitting vertices in order (u_1..u_k), children[j] the member between u_j and
  //         u_{j+1} (u_0 = s, u_{k+1} = t), -1 where that member is a bare edge;
  // complicate: the connecting vertices, children its members with a non-empty interior;
  // branch: children its branches.
  std::vector<int> split;
  std::vector<int> children;
};

struct DivisionTree {
  std::vector<Segment> segments;  // [0] is the whole graph [S, T] (when it has an interior)
};
DivisionTree division_tree(const CheckpointGraph& g);

struct CheckpointSolution {
  int64_t max_term = 0;           // C: every segment of the papers' accounting is <= C
  int64_t checkpoint_bytes = 0;   // sum of l over the checkpoints
  int64_t max_segment_bytes = 0;  // the largest group of dropped vertices
  int64_t objective() const { return checkpoint_bytes + max_segment_bytes; }
  int64_t paper_max = 0;          // the largest segment in the papers' accounting (<= C; the next max term is below it)
  std::vector<int> checkpoints;   // sorted vertices (S and T not listed)
};

// Alg. 5: the least checkpoint cost with every segment <= C; C >= 0 always has a solution.
CheckpointSolution solve_max_term(const CheckpointGraph& g, const DivisionTree& tree, int64_t max_term);

struct OptimalSearch {
  std::vector<CheckpointSolution> solutions;  // every distinct one visited (checkpoints not filled in), C decreasing
  size_t best = 0;                            // the least objective (ties: the larger C)
  int max_terms = 0;                          // solve_max_term calls
};
// The max-term loop; solutions with an objective within `slack` of the best are all kept
// (the loop runs until the checkpoint cost alone exceeds (1 + slack) * the best objective).
OptimalSearch optimal_checkpoints(const CheckpointGraph& g, const DivisionTree& tree, double slack = 0.0);
// Indices into s.solutions, least objective first (ties: the larger max term, found first).
std::vector<size_t> by_objective(const OptimalSearch& s);

// The objective of kept set `kept` (per vertex; S and T are always kept), or -1 when it is not
// valid (a group of dropped vertices entered from, or leaving to, more than one kept vertex).
int64_t checkpoint_objective(const CheckpointGraph& g, const std::vector<bool>& kept, int64_t* max_segment = nullptr);

// Beyond the papers: their segments have one entry and one exit (their assumption 1), so a
// dense block's concatenations, each read from several kept layer outputs, can only be kept, and
// keeping every concatenation costs quadratic memory. This greedy pass drops checkpoints (largest
// first) while the objective, taken over groups with any number of entries (every group's entries
// are kept, so the recompute is still one local forward), goes down. Returns the refined set
// (sorted; objective and largest group filled in).
CheckpointSolution refine_checkpoints(const CheckpointGraph& g, const CheckpointSolution& start);

// m(v) = 0 for the nodes of the checkpoints and leaves, 1 for every other node.
MirrorPlan checkpoint_mirror_plan(const CheckpointGraph& g, const std::vector<int>& checkpoints, size_t forward_size);

}  // namespace mnemo
