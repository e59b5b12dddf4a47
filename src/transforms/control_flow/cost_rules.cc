// Cost rules of the control-flow primitives, from their sub-programs' costs
// (program_cost): scan costs its body times its length; cond costs its most expensive
// branch (by FLOPs, then transcendentals, then bytes: an upper bound for the branch that
// runs); while_loop costs one evaluation of its condition and body, a lower bound, since
// the number of iterations is known only when it runs.
#include "prims/ids/control_flow.h"
#include "transforms/control_flow/control_flow_rules.h"
#include "transforms/cost_analysis.h"

namespace kiln::control_flow {
namespace {

Cost scan_cost(std::span<const AbstractValue>, std::span<const AbstractValue>,
               const Params& params) {
  const auto& p = std::get<ScanParams>(params);
  return program_cost(*p.body.program) * static_cast<double>(p.length);
}

Cost cond_cost(std::span<const AbstractValue>, std::span<const AbstractValue>,
               const Params& params) {
  const auto& p = std::get<CondParams>(params);
  Cost most;
  auto key = [](const Cost& c) { return std::tuple{c.flops, c.transcendentals, c.bytes()}; };
  for (const ProgramRef& branch : p.branches) {
    Cost cost = program_cost(*branch.program);
    if (key(cost) > key(most)) most = cost;
  }
  return most;
}

Cost while_cost(std::span<const AbstractValue>, std::span<const AbstractValue>,
                const Params& params) {
  const auto& p = std::get<WhileParams>(params);
  return program_cost(*p.cond.program) + program_cost(*p.body.program);
}

}  // namespace

void register_control_flow_costs(PrimTable& table) {
  table[prim::scan].cost = scan_cost;
  table[prim::cond].cost = cond_cost;
  table[prim::while_loop].cost = while_cost;
}

}  // namespace kiln::control_flow
