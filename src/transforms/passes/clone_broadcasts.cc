// Cloning cheap broadcasts into their consumers (passes.h). A broadcast of a small value
// that several elementwise equations read would otherwise be one fused loop's result,
// written to memory in full for the others to read back; with a copy per consumer, the
// fusion planner puts each copy in its consumer's loop, where it costs nothing.
#include <algorithm>
#include <vector>

#include "prims/ids/shape.h"
#include "prims/registry.h"
#include "transforms/passes/passes.h"
#include "transforms/passes/program_rewrite.h"

namespace kiln {
namespace {

// A broadcast whose operand is at most this fraction of its result: reading the operand
// again in each consumer's loop costs little next to the result it would write.
constexpr int64_t kCheapBroadcastRatio = 8;

bool cheap_broadcast(const Program& program, const Equation& equation) {
  if (equation.prim != prim::broadcast_in_dim) return false;
  const int64_t operand = program.aval(equation.inputs[0]).num_elements();
  const int64_t result = program.aval(equation.outputs[0]).num_elements();
  return operand * kCheapBroadcastRatio <= result;
}

// An equation the fusion planner could put in one loop with a broadcast of `shape`.
bool elementwise_over(const Program& program, const Equation& equation, const Shape& shape) {
  return prim_def(equation.prim).has_flag(kElementwise) &&
         program.aval(equation.outputs[0]).shape == shape;
}

}  // namespace

Program clone_broadcasts(const Program& program) {
  // Per value: the equation computing it when that is a cheap broadcast, else -1.
  std::vector<int64_t> broadcast_of(program.num_vars(), -1);
  for (size_t i = 0; i < program.equations.size(); ++i) {
    if (cheap_broadcast(program, program.equations[i]))
      broadcast_of[static_cast<size_t>(program.equations[i].outputs[0])] = static_cast<int64_t>(i);
  }
  std::vector<bool> read_once(program.num_vars(), false);  // its first reader has been copied
  ProgramRewrite rewrite(program);
  for (size_t i = 0; i < program.constants.size(); ++i) rewrite.keep_constant(i);
  std::vector<VarId> original(program.num_vars(), -1);
  for (const Equation& equation : program.equations) {
    // The first reader uses the broadcast itself; each later elementwise reader gets its
    // own copy, made just before it (copy_equation maps the value to the copy meanwhile).
    std::vector<VarId> cloned;
    for (VarId in : equation.inputs) {
      const int64_t producer = broadcast_of[static_cast<size_t>(in)];
      if (producer < 0 || std::find(cloned.begin(), cloned.end(), in) != cloned.end()) continue;
      if (!read_once[static_cast<size_t>(in)]) continue;
      if (!elementwise_over(program, equation, program.aval(in).shape)) continue;
      rewrite.copy_equation(program.equations[static_cast<size_t>(producer)]);
      cloned.push_back(in);
    }
    rewrite.copy_equation(equation);
    for (VarId in : cloned) rewrite.map(in, original[static_cast<size_t>(in)]);
    for (VarId in : equation.inputs) read_once[static_cast<size_t>(in)] = true;
    if (cheap_broadcast(program, equation)) {
      VarId out = equation.outputs[0];
      original[static_cast<size_t>(out)] = rewrite[out];
    }
  }
  return rewrite.finish();
}

}  // namespace kiln
