// Fusion of elementwise chains into steps (see step_plan.h).
//
// Every equation starts as a group of its own. Visited in program order, a fusible
// equation merges with the groups that produce its operands when they share its shape
// (several of them when it joins two chains, as an optimizer's update does) unless the
// merge would put a group on a cycle: a path that leaves the merged group through an
// equation outside it and comes back. The groups then form an acyclic graph and run as
// steps in a topological order of it.
#include "jit/step_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>
#include <utility>

#include "prims/ids/shape.h"
#include "prims/params_walk.h"

namespace kiln::detail {
namespace {

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

// The equations as a graph of groups: every equation starts in a group of its own, and
// fusion merges groups. A merge is allowed only when the graph of groups stays acyclic, so
// that the groups can run one after another as steps.
class FusionGraph {
 public:
  explicit FusionGraph(const Program& program)
      : program_(program),
        group_of_(program.equations.size()),
        members_(program.equations.size()),
        fusible_(program.equations.size()),
        consumers_(program.equations.size()),
        visited_(program.equations.size(), 0) {
    std::vector<int64_t> producer(program.num_vars(), -1);
    for (size_t e = 0; e < program.equations.size(); ++e) {
      const Equation& equation = program.equations[e];
      group_of_[e] = e;
      members_[e] = {e};
      fusible_[e] = fusible(program, equation);
      for (VarId in : equation.inputs) {
        int64_t p = producer[static_cast<size_t>(in)];
        if (p >= 0 && (consumers_[static_cast<size_t>(p)].empty() ||
                       consumers_[static_cast<size_t>(p)].back() != e)) {
          consumers_[static_cast<size_t>(p)].push_back(e);
        }
      }
      for (VarId out : equation.outputs)
        producer[static_cast<size_t>(out)] = static_cast<int64_t>(e);
    }
    producer_ = std::move(producer);
  }

  // Merges fusible equation e with the groups that produce its operands (those of its
  // shape), taking them in operand order and skipping any that would close a cycle.
  void fuse_with_producers(size_t e) {
    const Equation& equation = program_.equations[e];
    std::vector<size_t> chosen{group_of_[e]};
    // A broadcast member reads its operand whole (not tile by tile), so it cannot join
    // the group that computes that operand.
    if (equation.prim != prim::broadcast_in_dim) {
      const Shape& shape = program_.aval(equation.outputs[0]).shape;
      for (VarId in : equation.inputs) {
        int64_t p = producer_[static_cast<size_t>(in)];
        if (p < 0 || !fusible_[static_cast<size_t>(p)]) continue;
        size_t g = group_of_[static_cast<size_t>(p)];
        if (std::find(chosen.begin(), chosen.end(), g) != chosen.end()) continue;
        if (program_.aval(in).shape != shape || group_shape(g) != shape) continue;
        chosen.push_back(g);
        if (!broadcasts_read_outside(chosen) || !acyclic_if_merged(chosen, e)) chosen.pop_back();
      }
    }
    merge(chosen);
  }

  // The groups in an order that respects every dependency: among the groups ready to run,
  // the one whose last equation comes first in the program (so without fusion the steps
  // are the equations in program order).
  std::vector<StepPlan> schedule() const {
    const size_t n = program_.equations.size();
    std::vector<size_t> pending(n, 0);  // per group: producing groups not yet scheduled
    std::vector<std::vector<size_t>> successors(n);
    for (size_t g = 0; g < n; ++g) {
      if (members_[g].empty()) continue;
      for (size_t m : members_[g]) {
        for (size_t c : consumers_[m]) {
          size_t h = group_of_[c];
          if (h == g ||
              std::find(successors[g].begin(), successors[g].end(), h) != successors[g].end()) {
            continue;
          }
          successors[g].push_back(h);
          ++pending[h];
        }
      }
    }
    using Entry = std::pair<size_t, size_t>;  // (last equation, group)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
    for (size_t g = 0; g < n; ++g) {
      if (!members_[g].empty() && pending[g] == 0) ready.emplace(members_[g].back(), g);
    }
    std::vector<StepPlan> steps;
    while (!ready.empty()) {
      size_t g = ready.top().second;
      ready.pop();
      steps.push_back(StepPlan{members_[g]});
      for (size_t h : successors[g]) {
        if (--pending[h] == 0) ready.emplace(members_[h].back(), h);
      }
    }
    return steps;
  }

 private:
  const Shape& group_shape(size_t g) const {
    return program_.aval(program_.equations[members_[g][0]].outputs[0]).shape;
  }

  bool broadcasts_read_outside(const std::vector<size_t>& groups) const {
    for (size_t g : groups) {
      for (size_t m : members_[g]) {
        const Equation& equation = program_.equations[m];
        if (equation.prim != prim::broadcast_in_dim) continue;
        int64_t p = producer_[static_cast<size_t>(equation.inputs[0])];
        if (p >= 0 && std::find(groups.begin(), groups.end(), group_of_[static_cast<size_t>(p)]) !=
                          groups.end()) {
          return false;
        }
      }
    }
    return true;
  }

  // Whether merging `groups` keeps the graph of groups acyclic: no path may leave them and
  // come back. Only groups merged so far (every member at or before `latest`, the equation
  // being fused) can lead back; a later equation is still a group of its own, whose
  // consumers all come after it.
  bool acyclic_if_merged(const std::vector<size_t>& groups, size_t latest) {
    auto in_merge = [&](size_t g) {
      return std::find(groups.begin(), groups.end(), g) != groups.end();
    };
    ++epoch_;
    std::vector<size_t> frontier;
    for (size_t g : groups) {
      for (size_t m : members_[g]) {
        for (size_t c : consumers_[m]) {
          size_t h = group_of_[c];
          if (in_merge(h) || visited_[h] == epoch_) continue;
          visited_[h] = epoch_;
          frontier.push_back(h);
        }
      }
    }
    while (!frontier.empty()) {
      size_t g = frontier.back();
      frontier.pop_back();
      if (members_[g].front() > latest) continue;
      for (size_t m : members_[g]) {
        for (size_t c : consumers_[m]) {
          size_t h = group_of_[c];
          if (in_merge(h)) return false;
          if (visited_[h] == epoch_) continue;
          visited_[h] = epoch_;
          frontier.push_back(h);
        }
      }
    }
    return true;
  }

  void merge(const std::vector<size_t>& groups) {
    size_t into = groups[0];
    for (size_t i = 1; i < groups.size(); ++i) {
      for (size_t m : members_[groups[i]]) group_of_[m] = into;
      members_[into].insert(members_[into].end(), members_[groups[i]].begin(),
                            members_[groups[i]].end());
      members_[groups[i]].clear();
    }
    std::sort(members_[into].begin(), members_[into].end());
  }

  const Program& program_;
  std::vector<size_t> group_of_;  // per equation
  std::vector<std::vector<size_t>>
      members_;                // per group id, in program order; empty if merged away
  std::vector<bool> fusible_;  // per equation
  std::vector<std::vector<size_t>> consumers_;  // per equation: the equations reading its results
  std::vector<int64_t> producer_;               // per variable: its equation, or -1
  std::vector<uint64_t> visited_;  // per group: the epoch of the last search that saw it
  uint64_t epoch_ = 0;
};

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
  if (equation.prim == prim::broadcast_in_dim) {
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
  FusionGraph graph(program);
  for (size_t i = 0; i < n; ++i) {
    if (fusible(program, program.equations[i])) graph.fuse_with_producers(i);
  }
  return graph.schedule();
}

std::string steps_to_string(const Program& program, const std::vector<StepPlan>& steps,
                            const std::vector<std::string>& notes) {
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
  for (size_t s = 0; s < steps.size(); ++s) {
    const StepPlan& step = steps[s];
    if (!step.fused()) {
      text += equation_text(program.equations[step.equations[0]]) + "\n";
      continue;
    }
    const bool noted = s < notes.size() && !notes[s].empty();
    text +=
        fmt::format("fused[{}] {}{{\n", step.equations.size(), noted ? "(" + notes[s] + ") " : "");
    for (size_t index : step.equations)
      text += "  " + equation_text(program.equations[index]) + "\n";
    text += "}\n";
  }
  return text;
}

std::string step_trace_name(const Program& program, const StepPlan& step) {
  std::string scope;
  for (size_t index : step.equations) {
    if (!program.equations[index].scope.empty()) {
      scope = program.equations[index].scope + "/";
      break;
    }
  }
  if (!step.fused())
    return scope + std::string(prim_name(program.equations[step.equations[0]].prim));
  std::string prims;
  constexpr size_t kNamed = 4;
  for (size_t i = 0; i < step.equations.size() && i < kNamed; ++i) {
    if (i > 0) prims += ",";
    prims += prim_name(program.equations[step.equations[i]].prim);
  }
  if (step.equations.size() > kNamed) prims += ",...";
  return fmt::format("{}fused[{}]({})", scope, step.equations.size(), prims);
}

}  // namespace kiln::detail
