// The cost rules that primitives get from their flags (prims/ids/all.def): one FLOP per
// result element for elementwise arithmetic, comparisons, logic, select and conversions,
// one transcendental per element for the math functions (as XLA's cost analysis counts
// them: their real price depends on the math library), nothing for a primitive whose
// result is its operand's buffer. Every other family's rules sit beside its shape rules
// (prims/<family>_rules.cc); primitives defined by ops (custom_vjp_call) get theirs by
// tracing their impl (transforms/cost_analysis.cc), control flow with its own rules.
#include "prims/cost_util.h"
#include "prims/registry.h"

namespace kiln {
namespace {

Cost elementwise_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                      const Params&) {
  return cost::moves_all(inputs, outputs, cost::elements(outputs[0]));
}

Cost transcendental_cost(std::span<const AbstractValue> inputs,
                         std::span<const AbstractValue> outputs, const Params&) {
  Cost result = cost::moves_all(inputs, outputs);
  result.transcendentals = cost::elements(outputs[0]);
  return result;
}

// The result is the operand's buffer (kAliasesOperand) or the primitive only marks a value
// for the transformations: nothing is computed or moved.
Cost free_cost(std::span<const AbstractValue>, std::span<const AbstractValue>, const Params&) {
  return Cost{};
}

}  // namespace

void register_cost_rules(PrimTable& table) {
  for (const PrimDef& def : table.all()) {
    PrimDef& entry = table[def.id];
    if (entry.cost != nullptr) continue;  // the family's own rule
    if (entry.has_flag(kAliasesOperand)) {
      entry.cost = free_cost;
    } else if (entry.has_flag(kTranscendental)) {
      entry.cost = transcendental_cost;
    } else if (entry.has_flag(kElementwise)) {
      entry.cost = elementwise_cost;
    }
  }
}

}  // namespace kiln
