// The two identity primitives of rematerialization (kiln::checkpoint, kiln/checkpoint.h):
// optimization_barrier (variadic; output i is operand i) and checkpoint_name[name] (marks
// a value for a save_named policy). Both are identities for every rule: the impl returns
// the operands themselves (no copy, no kernel queued), the VJP passes cotangents through,
// the batching rule keeps each batch axis where it is. What makes the barrier useful is
// that the jit passes leave it alone (transforms/passes/passes.h).
#include <cstring>

#include <fmt/format.h>

#include "prims/bind.h"
#include "prims/ids/custom.h"
#include "prims/registry.h"

namespace kiln {
namespace {

std::vector<AbstractValue> identity_rule(std::span<const AbstractValue> inputs, const Params&,
                                         const RuleContext&) {
  return std::vector<AbstractValue>(inputs.begin(), inputs.end());
}

std::vector<AbstractValue> checkpoint_name_rule(std::span<const AbstractValue> inputs,
                                                const Params& params, const RuleContext& context) {
  const std::string& name = std::get<CheckpointNameParams>(params).name;
  if (name.empty() || name.find_first_of("\"\\\n") != std::string::npos) {
    context.fail(fmt::format("the name must be non-empty, without quotes, backslashes or line "
                             "breaks, got \"{}\"",
                             name),
                 "names are printed quoted in program text; use plain words like \"attn_out\"");
  }
  return {inputs[0]};
}

// Eager meaning: the operands themselves (the arrays are shared, nothing is copied).
std::vector<Array> identity_impl(std::span<const Array> inputs, const Params&, CallSite) {
  return std::vector<Array>(inputs.begin(), inputs.end());
}

// The plain definition for backends that run kernels: each result is a copy of its operand.
void copy_kernel(const KernelCall& call) {
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    size_t bytes = static_cast<size_t>(call.outputs[i].aval->size_bytes());
    if (bytes > 0) std::memcpy(call.outputs[i].data, call.inputs[i].data, bytes);
  }
}

// Linear and the identity: each operand's cotangent is its result's (empty means zero).
std::vector<Array> identity_vjp(const VjpArgs& args) {
  std::vector<Array> cts(args.inputs.size());
  for (size_t i = 0; i < cts.size(); ++i) {
    if (args.wanted[i]) cts[i] = args.cotangents[i];
  }
  return cts;
}

// The batched operands go through the same primitive, each keeping its batch axis.
BatchResult identity_batch(const BatchArgs& args, PrimId id) {
  std::vector<Array> outputs = bind(id, args.inputs, args.params, args.site);
  return BatchResult{std::move(outputs), std::vector<int64_t>(args.dims.begin(), args.dims.end())};
}

}  // namespace

void register_remat_prims(PrimTable& table) {
  for (PrimId id : {prim::optimization_barrier, prim::checkpoint_name}) {
    PrimDef& def = table[id];
    def.impl = identity_impl;
    def.ref_kernel = copy_kernel;
    def.vjp = identity_vjp;
  }
  table[prim::optimization_barrier].abstract_eval = identity_rule;
  table[prim::checkpoint_name].abstract_eval = checkpoint_name_rule;
  table[prim::optimization_barrier].batch = [](const BatchArgs& args) {
    return identity_batch(args, prim::optimization_barrier);
  };
  table[prim::checkpoint_name].batch = [](const BatchArgs& args) {
    return identity_batch(args, prim::checkpoint_name);
  };
}

}  // namespace kiln
