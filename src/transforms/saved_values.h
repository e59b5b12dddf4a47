// Replaying a traced program with some equations' results kept from an earlier run.
//
// The replay binds every other equation again, and stands a small custom function in for
// each saved one: its forward returns the saved results; its backward is the equation's own
// VJP rule, evaluated at the replayed operands and the saved results. Differentiating the
// replay therefore gives the program's own gradient without recomputing what was saved.
// kiln::checkpoint saves what its policy names (src/transforms/checkpoint.cc); scan's VJP
// saves each step's costly results, so its backward pass does not run the body forward
// again (src/transforms/control_flow/scan_rules.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ir/program.h"

namespace kiln::detail {

// Per equation of `program`: the id of the custom function that stands for its saved
// results, or -1 where `saved` is false. The functions depend only on the equations'
// primitives and parameters, so they are registered once per program text and mask and
// shared by every later call (a loss traced anew each step registers nothing new).
std::vector<int64_t> saved_value_functions(std::shared_ptr<const Program> program,
                                           const std::vector<bool>& saved);

// The results of the saved equations, in program order, from the values of every variable
// of a run of `program` (eval_program_env).
std::vector<Array> saved_results(const Program& program, std::span<const int64_t> saved_ids,
                                 std::span<const Array> env);

// `program` on `operands`, each saved equation replaced by its values from `saved`, taken in
// the order saved_results() lists them.
std::vector<Array> replay_with_saved(const Program& program, std::span<const int64_t> saved_ids,
                                     std::span<const Array> operands, std::span<const Array> saved);

}  // namespace kiln::detail
