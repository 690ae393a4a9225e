// The op registry API. An op is defined once, in ops/<file>.cpp, as an OpDef: attribute parsing into
// a typed params struct, shape/dtype inference, a grad function that *builds backward nodes*
// (never computes; the nodes it reads are the op's minimal backward dependencies), in-place
// options, workspace size, a cost estimate for the planners, and kernels per backend.
// core knows no particular op: the table is filled by ops/ (see ops/all_ops.cpp.in).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"

namespace mnemo {

class Graph;
struct Node;

// Output `index` of node `node`: the unit of data flow ("entry").
struct EntryRef {
  int32_t node = -1;
  int32_t index = 0;
  bool valid() const { return node >= 0; }
  auto operator<=>(const EntryRef&) const = default;
};

struct Cost {
  double flops = 0;  // floating-point operations of one call
  double bytes = 0;  // bytes read + written by one call
  // A roofline estimate of its time in FLOP-equivalents: the call is bound by its FLOPs or by its
  // bytes at `balance` FLOPs per byte moved (the machine's FLOP rate over its memory bandwidth),
  // whichever takes longer. balance 0: FLOPs alone.
  double roofline(double balance) const { return flops > balance * bytes ? flops : balance * bytes; }
};
// Bytes of all inputs and outputs: OpDef::cost's default (node_cost), and what most ops' own cost
// functions count as their traffic.
inline double io_bytes(std::span<const TensorType> in, std::span<const TensorType> out) {
  double b = 0;
  for (const TensorType& t : in) b += static_cast<double>(t.bytes());
  for (const TensorType& t : out) b += static_cast<double>(t.bytes());
  return b;
}
// The machine balance the planners' cost estimates assume by default (FLOPs per byte; measured on
// the CPU and the GPUs mnemo runs on: docs/MEMORY.md "Recompute cost").
inline constexpr double kDefaultBalance = 10.0;

// What a kernel sees: views of its inputs and outputs (outputs first in the kernel helpers'
// signatures), its parsed params and its planned workspace. Outputs are uninitialised memory that
// the kernel must overwrite entirely; where the op declares an in-place option, out.data may equal
// in.data and the kernel must be correct in that case.
struct KernelContext {
  std::span<const TensorView> in;
  std::span<const TensorView> out;
  const void* params = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* device = nullptr;       // the device's kernel context (cuda/: streams and handles); null on the CPU
  const void* state = nullptr;  // the node's prepared state (PreparedKernel::state), or null

  template <class P>
  const P& p() const { return *static_cast<const P*>(params); }
};
using Kernel = void (*)(const KernelContext&);
using CpuKernel = Kernel;

// A kernel made ready for one node, once, when the plan is made: the function, its per-node state
// (e.g. a oneDNN primitive or a cuDNN algorithm choice; null when the op needs none) and the exact
// workspace bytes that state runs with. The planner reserves `workspace` bytes and the executor
// passes `state` to every call, so the two cannot disagree.
struct PreparedKernel {
  Kernel run = nullptr;
  std::shared_ptr<const void> state;
  size_t workspace = 0;
};

// What a grad function sees for one forward node. `inputs`/`outputs` are the entries backward
// must read: the forward ones, or their recomputed (mirrored) copies under a mirror plan.
// `dout[j]` is the gradient of output j, or nullopt when no gradient reaches it.
struct GradContext {
  const Node& node;
  std::vector<EntryRef> inputs;
  std::vector<EntryRef> outputs;
  std::vector<std::optional<EntryRef>> dout;

  template <class P>
  const P& p() const;
};
// Adds backward nodes to `g` and returns the gradient of every input (nullopt: none, e.g. labels).
using GradFn = std::function<std::vector<std::optional<EntryRef>>(Graph& g, const GradContext& c)>;

using ParseFn = std::function<std::shared_ptr<const void>(const Attrs&)>;
using InferFn = std::function<std::vector<TensorType>(const void* params, std::span<const TensorType> in)>;
using CostFn = std::function<Cost(const void* params, std::span<const TensorType> in,
                                  std::span<const TensorType> out)>;
using WorkspaceFn = std::function<size_t(const void* params, std::span<const TensorType> in,
                                         std::span<const TensorType> out)>;
// Per-node preparation on the CPU: the state the kernel will run with and its exact workspace.
struct Prepared {
  std::shared_ptr<const void> state;
  size_t workspace = 0;
};
using PrepareFn = std::function<Prepared(const void* params, std::span<const TensorType> in,
                                         std::span<const TensorType> out)>;

// Where the value of a node comes from.
enum class OpKind : uint8_t {
  compute,  // a kernel writes the outputs
  view,     // output 0 aliases input 0 (reshape, flatten): no kernel runs, no memory is planned
  input,    // bound from outside each step (data, labels)
  param,    // bound to the parameter store (weights; running statistics with trainable=false)
};

struct InplaceOption {
  int input;
  int output;
};

// What planners and passes may know about an op. Each op declares its traits in its own
// registration; planners read traits, never op names.
struct OpTraits {
  bool elementwise = false;      // output element i depends only on input elements i (activations, add, mul)
  bool cheap_recompute = false;  // recomputing it costs little against the bytes it saves (normalisation,
                                 // activations, pooling): the drop-bn-relu planner drops exactly these
  bool reduction = false;        // reduces over an axis (pooling, global pooling, losses, sums)
  bool updates_state = false;    // writes persistent state through `updates` (the optimiser): never
                                 // recomputed, and skipped when a step is replayed for diagnosis
  bool step_machinery = false;   // inserted by the training step's passes (the gradients' all-reduce,
                                 // the loss check): a model graph cannot use it
};

// The backends whose kernels an op has: the CPU kernel is OpDef::cpu, the CUDA kernel is
// registered in cuda/ops_<file>.cpp. The registry tests check each claim against the kernels.
struct Backends {
  bool cpu = true;
  bool cuda = true;
};

// An example use of the op: the registry-driven tests and `mnemo ops` instantiate it.
struct OpSample {
  Attrs attrs;
  std::vector<TensorType> inputs;
  int64_t int_high = 1;  // integer inputs are drawn from [0, int_high)
};

struct OpDef {
  std::string name;
  std::string doc;          // one line: what it computes
  std::string file;         // ops/<file>.cpp that registered it (set by the registry)
  OpKind kind = OpKind::compute;
  int min_inputs = 0;
  int max_inputs = 0;       // -1: any number
  ParseFn parse;            // default: accepts no attributes
  InferFn infer;            // required: throws mnemo::Error on bad input types
  GradFn grad;              // null: not differentiable (backward-only ops)
  std::vector<int> saved_outputs;  // outputs that carry saved statistics, never differentiated
  // The op a recomputed copy of a node runs instead of this one (autograd/gradient.h's mirrors),
  // or null to run this op again: given the node's params, the name of an op that takes the
  // same params and the node's inputs followed by its saved outputs (the forward node's, which
  // stay live for it; backward reads them too; they must be the node's last outputs), and gives
  // the node's other outputs, in order, bitwise, reading the saved statistics instead of
  // recomputing them (batch_norm in training: y in one pass over x instead of three). Its cost
  // is the recompute cost the planners see (recompute_cost, core/graph.h).
  const char* (*recompute_as)(const void* params) = nullptr;
  std::vector<InplaceOption> inplace;
  // An optional input added into output 0 (out = in[accumulates] + the op's own result), taken in
  // place when the planner allows (declare it in `inplace`): the gradient pass sums a gradient into
  // such a node instead of adding an `add` node (weights read at many steps: one GEMM accumulating
  // into the running sum instead of a GEMM into a temporary plus an add). -1: none.
  int accumulates = -1;
  // Outputs that are always their input's memory, updated in place (input j -> output j): the
  // optimiser's parameter and velocity. The input must be a param node; nothing is planned for the
  // output (like a view), and the op must declare traits.updates_state.
  std::vector<InplaceOption> updates;
  OpTraits traits;
  Backends backends;        // every compute op has a CPU and a CUDA kernel unless it says otherwise
  CostFn cost;              // default: flops 0, bytes = inputs + outputs
  WorkspaceFn workspace;    // default: 0 (stateless kernels)
  PrepareFn prepare;        // default: no state, `workspace` bytes (ops whose CPU kernel keeps per-node state)
  CpuKernel cpu = nullptr;
  std::optional<OpSample> sample;  // required for compute ops (tests use it)
};

class OpRegistry {
 public:
  void begin_file(std::string file) { file_ = std::move(file); }
  void add(OpDef def);  // throws on a duplicate name or a missing infer function
  const OpDef* find(const std::string& name) const;
  const OpDef& get(const std::string& name) const;  // throws, listing the known ops
  std::vector<const OpDef*> all() const;            // sorted by name

 private:
  std::string file_;
  std::map<std::string, std::unique_ptr<OpDef>> ops_;
};

// The registry of every op in ops/ (defined by the generated table, built on first use).
const OpRegistry& op_registry();
// The stems of the files in ops/ at configure time (the tests check each one registered ops).
const std::vector<std::string>& op_source_files();

// Helpers for op files.
template <class P>
ParseFn parse_with(P (*fn)(AttrReader&), const std::string& op) {
  return [fn, op](const Attrs& a) -> std::shared_ptr<const void> {
    AttrReader r(a, op);
    auto p = std::make_shared<P>(fn(r));
    r.finish();
    return p;
  };
}

}  // namespace mnemo

// Opens the registration function of ops/<stem>.cpp:  MNEMO_REGISTER_OPS(relu) { registry.add(...); }
#define MNEMO_REGISTER_OPS(stem) void mnemo_register_ops_##stem(::mnemo::OpRegistry& registry)
