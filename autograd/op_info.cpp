// backward_reads: see op_info.h.
#include "autograd/op_info.h"

#include <algorithm>

#include "core/graph.h"

namespace mnemo {

BackwardReads backward_reads(const OpDef& op) {
  BackwardReads r;
  if (!op.grad || !op.sample) return r;
  r.differentiable = true;
  Graph g;
  std::vector<EntryRef> in;
  for (size_t i = 0; i < op.sample->inputs.size(); ++i) in.push_back(g.input("x" + std::to_string(i), op.sample->inputs[i]));
  const int v = g.add(op.name, in, op.sample->attrs, "op");
  const Node fwd_copy = g.node(v);  // grad grows the node vector: keep a stable copy
  GradContext ctx{fwd_copy, in, {}, {}};
  for (size_t j = 0; j < g.node(v).outputs.size(); ++j) {
    ctx.outputs.push_back({v, static_cast<int>(j)});
    const bool saved = std::count(op.saved_outputs.begin(), op.saved_outputs.end(), static_cast<int>(j));
    if (saved || !is_float(g.node(v).outputs[j].dtype)) {
      ctx.dout.emplace_back(std::nullopt);
    } else {
      EntryRef dy = g.input("dy" + std::to_string(j), g.node(v).outputs[j]);
      ctx.dout.emplace_back(dy);
    }
  }
  const size_t first = g.size();
  op.grad(g, ctx);
  for (size_t id = first; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<int>(id));
    r.backward_ops.push_back(n.op->name);
    for (const EntryRef& e : n.inputs) {
      for (size_t i = 0; i < in.size(); ++i)
        if (e == in[i] && !std::count(r.inputs.begin(), r.inputs.end(), static_cast<int>(i))) r.inputs.push_back(static_cast<int>(i));
      if (e.node == v && !std::count(r.outputs.begin(), r.outputs.end(), e.index)) r.outputs.push_back(e.index);
    }
  }
  std::sort(r.inputs.begin(), r.inputs.end());
  std::sort(r.outputs.begin(), r.outputs.end());
  return r;
}

}  // namespace mnemo
