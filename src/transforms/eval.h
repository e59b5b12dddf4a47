// Running a Program: each equation is bound again with the values of its operands, under
// whichever interpreter is current (eager execution, or an enclosing trace, which is how
// transformations compose).
#pragma once

#include <span>
#include <vector>

#include "ir/program.h"

namespace kiln {

// Values of every variable after running `program` on `inputs` (indexed by VarId).
std::vector<Array> eval_program_env(const Program& program, std::span<const Array> inputs,
                                    CallSite site);
// The program's outputs for `inputs`.
std::vector<Array> eval_program(const Program& program, std::span<const Array> inputs,
                                CallSite site);
// Checks that `inputs` match the program's input types, naming the first that does not.
void check_program_inputs(const Program& program, std::span<const Array> inputs, CallSite site);

}  // namespace kiln
