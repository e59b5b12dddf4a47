// Forward-mode differentiation of a Program, for the control-flow JVP rules, which
// differentiate their bodies (the public entry points are in kiln/jvp.h).
#pragma once

#include <span>
#include <vector>

#include "ir/program.h"

namespace kiln::detail {

struct ProgramJvp {
  std::vector<Array> outputs;   // the program's results at the primal inputs
  std::vector<Array> tangents;  // their tangents (an empty Array means zero)
};
// Runs `program` on `inputs` under the current interpreter and pushes `tangents` (one per
// input, an empty Array meaning zero) forward through each equation's JVP rule.
ProgramJvp jvp_program(const Program& program, std::span<const Array> inputs,
                       std::span<const Array> tangents, CallSite site);

}  // namespace kiln::detail
