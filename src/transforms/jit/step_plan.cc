// Fusion of elementwise chains into steps (see step_plan.h).
//
// Equations are visited in program order. A fusible equation joins the open group that
// produced one of its operands (when the shapes agree), else opens a group of its own. A
// group runs where its last member stands, so it must stop growing ("close") as soon as
// anything outside it reads one of its values: that reader runs after the group. Under
// that rule every step's operands are computed before it, and the steps, ordered by the
// position of their last equation, respect every dependency.
#include "transforms/jit/step_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "prims/params_walk.h"

namespace kiln::detail {
namespace {

// A group's members share one output shape: the fused loop walks its elements once.
const Shape& group_shape(const Program& program, const Equation& first) {
  return program.aval(first.outputs[0]).shape;
}

// External operands of a member must be the group's shape or broadcast to it by size-1
// axes of equal rank, or be a single element: the fused loop expands those per tile.
bool operand_fits(const AbstractValue& operand, const Shape& shape) {
  if (operand.num_elements() == 1) return true;
  if (operand.shape.rank() != shape.rank()) return false;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (operand.shape[axis] != shape[axis] && operand.shape[axis] != 1) return false;
  }
  return true;
}

}  // namespace

bool fusible(const Program& program, const Equation& equation) {
  const PrimDef& prim = prim_def(equation.prim);
  if (prim.impl != nullptr || prim.has_flag(kAliasesOperand)) return false;
  if (prim.ref_kernel == nullptr && prim.cpu_kernel == nullptr) return false;
  const Shape& shape = program.aval(equation.outputs[0]).shape;
  if (shape.num_elements() == 0) return false;
  for (VarId out : equation.outputs) {
    if (program.aval(out).shape != shape) return false;
  }
  if (equation.prim == PrimId::broadcast_in_dim) {
    // A broadcast member is an expansion of its (external) operand into the tile.
    return true;
  }
  if (!prim.has_flag(kElementwise)) return false;
  for (VarId in : equation.inputs) {
    if (!operand_fits(program.aval(in), shape)) return false;
  }
  return true;
}

std::vector<StepPlan> plan_steps(const Program& program, bool fuse) {
  const size_t n = program.equations.size();
  std::vector<StepPlan> steps;
  if (!fuse) {
    for (size_t i = 0; i < n; ++i) steps.push_back({{i}});
    return steps;
  }
  struct Group {
    std::vector<size_t> members;
    bool open = true;
  };
  std::vector<Group> groups;
  std::vector<int64_t> group_of_var(program.num_vars(), -1);  // producing group, if any
  std::vector<int64_t> group_of_equation(n, -1);
  auto close_readers_groups = [&](const Equation& equation, int64_t except) {
    for (VarId in : equation.inputs) {
      int64_t g = group_of_var[static_cast<size_t>(in)];
      if (g >= 0 && g != except) groups[static_cast<size_t>(g)].open = false;
    }
  };
  for (size_t i = 0; i < n; ++i) {
    const Equation& equation = program.equations[i];
    if (!fusible(program, equation)) {
      close_readers_groups(equation, -1);
      continue;
    }
    const Shape& shape = program.aval(equation.outputs[0]).shape;
    int64_t join = -1;
    // A broadcast member reads its operand whole, so it can only start a group or join one
    // that did not produce that operand.
    if (equation.prim != PrimId::broadcast_in_dim) {
      for (VarId in : equation.inputs) {
        int64_t g = group_of_var[static_cast<size_t>(in)];
        if (g < 0 || !groups[static_cast<size_t>(g)].open) continue;
        const Equation& first = program.equations[groups[static_cast<size_t>(g)].members[0]];
        if (group_shape(program, first) == shape && program.aval(in).shape == shape) {
          join = g;
          break;
        }
      }
    }
    close_readers_groups(equation, join);
    if (join < 0) {
      join = static_cast<int64_t>(groups.size());
      groups.push_back({});
    }
    groups[static_cast<size_t>(join)].members.push_back(i);
    group_of_equation[i] = join;
    for (VarId out : equation.outputs) group_of_var[static_cast<size_t>(out)] = join;
  }
  // Order: each step at the position of its last equation.
  std::map<size_t, StepPlan> by_position;
  for (size_t i = 0; i < n; ++i) {
    if (group_of_equation[i] < 0) by_position.emplace(i, StepPlan{{i}});
  }
  for (Group& group : groups) by_position.emplace(group.members.back(), StepPlan{group.members});
  for (auto& [position, step] : by_position) steps.push_back(std::move(step));
  return steps;
}

std::string steps_to_string(const Program& program, const std::vector<StepPlan>& steps) {
  auto var_text = [&](VarId var) { return fmt::format("v{}", var); };
  auto equation_text = [&](const Equation& equation) {
    std::string text;
    for (VarId out : equation.outputs) {
      text += fmt::format("{}{}:{}", text.empty() ? "" : " ", var_text(out),
                          program.aval(out).to_string());
    }
    text += fmt::format(" = {}", prim_name(equation.prim));
    std::string params = format_params(equation.params);
    if (!params.empty()) text += "[" + params + "]";
    for (VarId in : equation.inputs) text += " " + var_text(in);
    return text;
  };
  std::string text;
  for (const StepPlan& step : steps) {
    if (!step.fused()) {
      text += equation_text(program.equations[step.equations[0]]) + "\n";
      continue;
    }
    text += fmt::format("fused[{}] {{\n", step.equations.size());
    for (size_t index : step.equations)
      text += "  " + equation_text(program.equations[index]) + "\n";
    text += "}\n";
  }
  return text;
}

}  // namespace kiln::detail
