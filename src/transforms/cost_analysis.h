// Costs of programs, summed from the primitives' cost rules (kiln/cost_types.h). Used by
// kiln::cost_analysis and by the cost rules of primitives that hold or run programs
// (control flow, custom_vjp_call), which cost their sub-programs with program_cost.
#pragma once

#include "ir/program.h"
#include "kiln/cost_types.h"

namespace kiln {

// The cost of one equation of `program`, from its primitive's cost rule.
Cost equation_cost(const Program& program, const Equation& equation);
// The sum over the program's equations (run once each; a loop's rule multiplies its body).
Cost program_cost(const Program& program);

}  // namespace kiln
