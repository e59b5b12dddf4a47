// Constant folding (passes.h): equations whose operands all have known values are run at
// compile time with the kernels eager mode uses (so the folded values are the bits the
// program would compute), on the compiling thread rather than behind the device's queue,
// and their results become constants.
// An equation whose run fails stays in the program, so the error surfaces when the program
// runs, exactly as it would eagerly.
#include <vector>

#include "prims/bind.h"
#include "prims/ids/custom.h"
#include "transforms/passes/passes.h"
#include "transforms/passes/program_rewrite.h"

namespace kiln {
namespace {

bool may_fold(const PrimDef& prim) {
  // Primitives defined by ops (custom_vjp_call, control flow) run user functions and may
  // be large; they are left to run with the program. An optimization barrier is never
  // folded (it has an impl rule too; the explicit test says why it stays).
  return prim.impl == nullptr && prim.id != prim::optimization_barrier;
}

int64_t result_elements(const Program& program, const Equation& equation) {
  int64_t total = 0;
  for (VarId var : equation.outputs) total += program.aval(var).num_elements();
  return total;
}

// Computes the equation's results now from `operands`; false if that failed (the failure
// is the program's to report when it runs).
bool run_now(const Equation& equation, const std::vector<Array>& operands, const Program& program,
             std::vector<Array>& results) {
  try {
    InterpreterScope scope(immediate_interpreter());
    results = bind(equation.prim, operands, equation.params, equation.site);
    for (const Array& result : results) result.block_until_ready(equation.site);
  } catch (const Error&) {
    return false;
  }
  // The types come from the same shape rule as the recorded ones; a difference would mean
  // the program was not well typed, and folding would change it.
  if (results.size() != equation.outputs.size()) return false;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!(results[i].aval() == program.aval(equation.outputs[i]))) return false;
  }
  return true;
}

}  // namespace

Program fold_constants(const Program& program, const ConstantFoldingOptions& options) {
  ProgramRewrite rewrite(program);
  for (size_t i = 0; i < program.constants.size(); ++i) rewrite.keep_constant(i);

  std::vector<Array> operands;
  for (const Equation& equation : program.equations) {
    bool foldable = may_fold(prim_def(equation.prim)) &&
                    result_elements(program, equation) <= options.max_folded_elements;
    operands.clear();
    for (VarId var : equation.inputs) {
      if (!foldable) break;
      const Array& value = rewrite.constant_value(rewrite[var]);
      foldable = is_concrete(value);
      operands.push_back(value);
    }
    std::vector<Array> results;
    if (!foldable || !run_now(equation, operands, program, results)) {
      rewrite.copy_equation(equation);
      continue;
    }
    for (size_t r = 0; r < results.size(); ++r) {
      rewrite.map(equation.outputs[r], rewrite.add_constant(std::move(results[r])));
    }
  }
  return rewrite.finish();
}

}  // namespace kiln
