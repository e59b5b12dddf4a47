// The primitive registry: one PrimDef per primitive of prims/ids/all.def, holding all of that
// primitive's rules side by side. Rules are filled in by explicit registration calls from
// register_all(); nothing registers itself from a static initialiser.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/compute_pool.h"
#include "kiln/array.h"
#include "kiln/cost_types.h"
#include "kiln/error.h"
#include "kiln/shape.h"
#include "prims/params.h"
#include "prims/prim_id.h"
#include "prims/spmd_text.h"

namespace kiln {

// Static facts of a primitive, a column of its family's list (prims/ids/all.def).
enum PrimFlags : uint32_t {
  // Each result element depends only on the operand elements at its position (operands
  // broadcast): batches with the elementwise rule, fuses under jit.
  kElementwise = 1u << 0,
  kNotDifferentiable = 1u << 1,
  // The output is the operand's buffer reinterpreted (same bytes, new shape): eager mode
  // shares the buffer instead of running a kernel. (For the variadic optimization_barrier:
  // output i is operand i.)
  kAliasesOperand = 1u << 2,
  // An elementwise math function (exp, tanh, pow...): costed as one transcendental per
  // result element instead of one FLOP.
  kTranscendental = 1u << 3,
};

// A kernel sees its operands and results as dense row-major buffers with their types.
struct KernelInput {
  const void* data;
  const AbstractValue* aval;
};
struct KernelOutput {
  void* data;
  const AbstractValue* aval;
};
struct KernelCall {
  std::span<const KernelInput> inputs;
  std::span<const KernelOutput> outputs;
  const Params& params;
  ComputePool& pool;
};
using KernelFn = void (*)(const KernelCall& call);
// Whether a fast kernel handles a call with these operand and result types and params (a
// layout, a dtype): the dispatcher (kernel_for) runs the reference kernel for the others,
// so a fast kernel never calls the reference itself.
using KernelSupportFn = bool (*)(std::span<const AbstractValue> inputs,
                                 std::span<const AbstractValue> outputs, const Params& params);

struct PrimDef;

// What a rule needs to report an error in the user's terms.
struct RuleContext {
  const PrimDef& prim;
  CallSite site;
  [[noreturn]] void fail(const std::string& message, const std::string& hint = {}) const;
};

// What a VJP rule sees: the primal operands and results, one cotangent per result (an
// empty Array means zero), and which operands need a cotangent. Rules are written with
// ordinary ops, so they trace, and gradients of gradients work.
struct VjpArgs {
  std::span<const Array> inputs;
  std::span<const Array> outputs;
  std::span<const Array> cotangents;
  const Params& params;
  CallSite site;
  std::span<const bool> wanted;
};
// One cotangent per operand (an empty Array means zero or not wanted).
using VjpFn = std::vector<Array> (*)(const VjpArgs& args);

// What a JVP rule (forward mode) sees: the primitive, its primal operands and results, and
// one tangent per operand (an empty Array means zero: an operand that is not floating
// point, or one that does not depend on the differentiated inputs; at least one is set).
// Rules are written with ordinary ops, as the VJP rules are, so they trace and batch:
// jit(jvp(f)), vmap(jvp(f)) (jacfwd) and jvp(grad(f)) (hessian) compose.
struct JvpArgs {
  PrimId prim;
  std::span<const Array> inputs;
  std::span<const Array> outputs;
  std::span<const Array> tangents;
  const Params& params;
  CallSite site;
};
// One tangent per result (an empty Array means zero), of the result's shape and dtype.
using JvpFn = std::vector<Array> (*)(const JvpArgs& args);

// Eager meaning in terms of ops, for primitives that are functions of arrays rather than
// kernels (custom_vjp_call, the control-flow primitives, the remat markers). The eager
// interpreter calls it instead of queueing a kernel.
using ImplFn = std::vector<Array> (*)(std::span<const Array> inputs, const Params& params,
                                      CallSite site);

// What a batching rule (vmap) sees: the operands, each with the axis that carries the
// batch or kNotBatched, the batch size, and the params of one example. Rules are written
// with ordinary ops and binds, which run under the interpreter around the vmap, so vmap
// composes with tracing, grad and another vmap.
inline constexpr int64_t kNotBatched = -1;
struct BatchArgs {
  std::span<const Array> inputs;
  std::span<const int64_t> dims;  // per operand: its batch axis, or kNotBatched
  const Params& params;
  CallSite site;
  int64_t size;  // the batch size
};
// The batched results and the axis that carries the batch in each (kNotBatched when a
// result is the same for every example).
struct BatchResult {
  std::vector<Array> outputs;
  std::vector<int64_t> dims;
};
using BatchFn = BatchResult (*)(const BatchArgs& args);

using AbstractEvalFn = std::vector<AbstractValue> (*)(std::span<const AbstractValue> inputs,
                                                      const Params& params,
                                                      const RuleContext& context);

// FLOPs (one multiply-add = 2, as XLA counts), transcendentals and bytes of one
// application to operands and results of these types (see kiln/cost_types.h).
using CostFn = Cost (*)(std::span<const AbstractValue> inputs,
                        std::span<const AbstractValue> outputs, const Params& params);

// What a sharding rule sees (jit with in_shardings, src/sharding/spmd_partitioner.cc): the
// whole operands' and results' types, each operand's `sharding` the spec it has now (one
// entry per dimension), and the mesh's axes.
struct ShardingArgs {
  std::span<const AbstractValue> inputs;
  std::span<const AbstractValue> outputs;
  const Params& params;
  const std::vector<spmd::AxisText>& mesh;
};
// How a primitive runs on blocks: the spec each operand must have (the partitioner inserts
// the collectives that bring it there), the spec of each result's blocks, the mesh axes over
// which the results are partial sums (each device holds a term; the value is their sum),
// and the params the blocks run with where the whole params name shapes. A rule that
// cannot partition its primitive says why in `refusal`.
struct ShardingDecision {
  std::vector<ShardingSpec> operands;
  std::vector<ShardingSpec> results;
  std::vector<std::string> partial_sum_axes;
  std::optional<Params> block_params;
  std::string refusal;
};
using ShardingFn = ShardingDecision (*)(const ShardingArgs& args);

struct PrimDef {
  PrimId id{};
  std::string_view name;
  int arity = 0;  // -1: variadic
  Family family{};
  size_t params_index = 0;  // which alternative of Params this primitive takes
  uint32_t flags = 0;
  AbstractEvalFn abstract_eval = nullptr;
  KernelFn ref_kernel = nullptr;  // required (or impl): the plain, obviously-correct kernel
  KernelFn cpu_kernel = nullptr;  // optional fast CPU kernel
  KernelSupportFn cpu_supports = nullptr;  // which calls cpu_kernel takes; null: every call
  VjpFn vjp = nullptr;                     // required unless kNotDifferentiable
  JvpFn jvp = nullptr;                     // required unless kNotDifferentiable (forward mode)
  ImplFn impl = nullptr;                   // instead of kernels, for primitives defined by ops
  // For a primitive with an impl: whether jit may still run this call as a kernel step
  // (ref_kernel) of a compiled program (pallas_call in compiled mode). Null: never.
  bool (*jit_runs_kernel)(const Params& params) = nullptr;
  BatchFn batch = nullptr;        // required: how vmap runs the primitive on a batch
  CostFn cost = nullptr;          // required: FLOPs and bytes, for cost_analysis
  ShardingFn sharding = nullptr;  // required: how jit's in_shardings partition it

  bool has_flag(PrimFlags flag) const { return (flags & flag) != 0; }
};

// The table every registration function fills: the primitives of prims/ids/all.def in its
// order, each found from its id through the position of its family's first row.
class PrimTable {
 public:
  PrimTable();
  PrimDef& operator[](PrimId id) { return defs_[index_of(id)]; }
  const PrimDef& operator[](PrimId id) const { return defs_[index_of(id)]; }
  std::span<const PrimDef> all() const { return defs_; }
  // Whether `id` names a primitive (an id read from elsewhere may hold any bits).
  bool contains(PrimId id) const;
  // The primitive's position in all().
  size_t index_of(PrimId id) const {
    return family_start_[static_cast<size_t>(family_of(id))] + row_of(id);
  }

 private:
  std::vector<PrimDef> defs_;
  // Where each family's rows start in defs_, and one past the last family's.
  std::array<size_t, kNumFamilies + 1> family_start_{};
};

// Runs every registration function once (thread-safe) and returns the finished table.
const PrimTable& register_all();
inline const PrimDef& prim_def(PrimId id) {
  return register_all()[id];
}
std::string_view prim_name(PrimId id);
std::span<const PrimDef> all_prims();

// The kernel that runs a call with these types and params: the fast kernel where there is
// one that supports the call (and `reference_only` is false), else the reference kernel.
KernelFn kernel_for(const PrimDef& prim, std::span<const AbstractValue> inputs,
                    std::span<const AbstractValue> outputs, const Params& params,
                    bool reference_only);

// What to do instead of differentiating through a primitive that is not differentiable
// (for the errors of grad and jvp).
std::string not_differentiable_hint(const PrimDef& prim);

// Registration functions, one per family of rules or kernels.
void register_elementwise_rules(PrimTable& table);
void register_shape_rules(PrimTable& table);
void register_index_rules(PrimTable& table);
void register_reduce_rules(PrimTable& table);
void register_contract_rules(PrimTable& table);
void register_window_rules(PrimTable& table);
void register_random_rules(PrimTable& table);
void register_sort_rules(PrimTable& table);
void register_ref_kernels(PrimTable& table);
void register_vjp_rules(PrimTable& table);
void register_jvp_rules(PrimTable& table);  // after every family's VJP and impl rules
void register_custom_vjp(PrimTable& table);
void register_control_flow_rules(PrimTable& table);
void register_control_flow_transforms(PrimTable& table);
void register_batch_rules(PrimTable& table);
void register_cost_rules(PrimTable& table);
void register_traced_cost_rules(PrimTable& table);  // primitives defined by ops (impl)
void register_pallas_call(PrimTable& table);        // src/pallas/kernel_call_prim.cc
void register_remat_prims(PrimTable& table);
void register_spmd_rules(PrimTable& table);       // shape rules (prims/spmd_rules.cc)
void register_spmd_transforms(PrimTable& table);  // impl, VJP, batching (src/sharding/)
void register_compiled_spmd(PrimTable& table);    // shard_map's compiled impl (src/jit/)
void register_cpu_kernels(PrimTable& table);
void register_sharding_rules(PrimTable& table);

// Shared checks for the rules.
// Window and convolution parameters (sizes, strides, dilations, padding) beyond this
// magnitude are rejected, which keeps the rules' size arithmetic far from overflow.
inline constexpr int64_t kParamLimit = int64_t{1} << 32;
int64_t normalize_axis(int64_t axis, int64_t rank, const RuleContext& context,
                       std::string_view what = "axis");

}  // namespace kiln
