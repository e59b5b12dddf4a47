// Grouping a program's equations into the steps an executable runs: one kernel per
// equation, except that chains of elementwise equations over one shape become a single
// fused step (one loop over cache-sized tiles, see fused_kernel.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ir/program.h"

namespace kiln::detail {

struct StepPlan {
  // Equation indices in program order; more than one only for a fused step.
  std::vector<size_t> equations;
  bool fused() const { return equations.size() > 1; }
};

// Whether an equation can be a member of a fused group (elementwise, one kernel, no alias).
bool fusible(const Program& program, const Equation& equation);

// Steps in an order that respects every dependency. Without fusion, one step per equation
// in program order.
std::vector<StepPlan> plan_steps(const Program& program, bool fuse);

// The steps as text: each unfused equation on its own line, fused groups as
// "fused[n] { ... }" blocks, or "fused[n] (<note>) { ... }" where notes[s] is not empty.
std::string steps_to_string(const Program& program, const std::vector<StepPlan>& steps,
                            const std::vector<std::string>& notes = {});

// What a trace and the roofline call a step: its name stack and primitive,
// "mlp/dense1/dot_general", or for a fused step the scope of its first scoped equation and
// its primitives, "mlp/dense1/fused[3](add,max,mul)" (the first four, then "...").
std::string step_trace_name(const Program& program, const StepPlan& step);

}  // namespace kiln::detail
