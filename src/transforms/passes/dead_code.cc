// Dead code elimination (passes.h): one backward sweep marks what reaches an output, then
// the program is rebuilt with the live equations and constants. Inputs always stay: they
// are the program's signature, used or not.
#include <vector>

#include "transforms/passes/passes.h"
#include "transforms/passes/program_rewrite.h"

namespace kiln {

Program eliminate_dead_code(const Program& program) {
  std::vector<bool> live(program.num_vars(), false);
  for (VarId var : program.outputs) live[static_cast<size_t>(var)] = true;
  // An equation is live when any of its results is (a multi-result equation such as sort
  // or threefry2x32 stays whole). No primitive has effects yet; one that had would stay
  // here whether its results are used or not.
  std::vector<bool> keep(program.equations.size(), false);
  for (size_t i = program.equations.size(); i-- > 0;) {
    const Equation& equation = program.equations[i];
    for (VarId var : equation.outputs) {
      if (live[static_cast<size_t>(var)]) keep[i] = true;
    }
    if (!keep[i]) continue;
    for (VarId var : equation.inputs) live[static_cast<size_t>(var)] = true;
  }

  ProgramRewrite rewrite(program);
  for (size_t i = 0; i < program.constants.size(); ++i) {
    if (live[static_cast<size_t>(program.constants[i])]) rewrite.keep_constant(i);
  }
  for (size_t i = 0; i < program.equations.size(); ++i) {
    if (keep[i]) rewrite.copy_equation(program.equations[i]);
  }
  return rewrite.finish();
}

}  // namespace kiln
