// The planner's memory estimate by part (see memory_report.h).
#include "profile/memory_report.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "jit/memory_plan.h"

namespace kiln::profile {

bool in_backward_pass(const std::string& scope) {
  return scope == "grad" || scope.starts_with("grad/") || scope.ends_with("/grad") ||
         scope.find("/grad/") != std::string::npos;
}

MemoryEstimate estimate_memory(const detail::Executable& executable, int64_t params_bytes,
                               int64_t optimizer_state_bytes) {
  using detail::Storage;
  const MemoryPlanReport& report = executable.memory_plan().report;
  MemoryEstimate estimate;
  estimate.params_bytes = params_bytes;
  estimate.optimizer_state_bytes = optimizer_state_bytes;
  estimate.other_input_bytes =
      std::max<int64_t>(0, report.argument_bytes - params_bytes - optimizer_state_bytes);
  estimate.constant_bytes = report.constant_bytes;
  estimate.output_bytes = report.output_bytes;
  estimate.arena_bytes = report.temp_bytes;
  if (executable.interpreted() || executable.steps().empty()) {
    estimate.temporary_bytes = estimate.arena_bytes;
    return estimate;
  }

  const Program& program = executable.program();
  const auto& steps = executable.steps();
  const detail::MemoryPlan& plan = executable.memory_plan();
  detail::Liveness live = detail::compute_liveness(program, steps, plan.root);
  auto root_of = [&](VarId var) { return plan.root[static_cast<size_t>(var)]; };
  auto in_arena = [&](VarId root) {
    return plan.storage[static_cast<size_t>(root)].kind == Storage::Kind::kArena;
  };

  // A forward value the backward pass reads: defined by a step outside "grad", read by one
  // inside it.
  std::vector<bool> step_backward(steps.size(), false);
  for (size_t s = 0; s < steps.size(); ++s) {
    for (size_t e : steps[s].equations) {
      if (in_backward_pass(program.equations[e].scope)) step_backward[s] = true;
    }
  }
  std::vector<bool> saved(program.num_vars(), false);
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!step_backward[s]) continue;
    for (size_t e : steps[s].equations) {
      for (VarId input : program.equations[e].inputs) {
        VarId root = root_of(input);
        int64_t defined = live.defined_at[static_cast<size_t>(root)];
        if (defined >= 0 && !step_backward[static_cast<size_t>(defined)]) {
          saved[static_cast<size_t>(root)] = true;
        }
      }
    }
  }

  // The step at which the arena holds the most, and the saved values live there.
  std::vector<int64_t> live_bytes(steps.size(), 0), saved_bytes(steps.size(), 0);
  for (size_t var = 0; var < program.num_vars(); ++var) {
    auto root = static_cast<VarId>(var);
    if (root_of(root) != root || !in_arena(root)) continue;
    int64_t from = live.defined_at[var];
    int64_t to = std::max(from, live.last_use[var]);
    if (from < 0) continue;
    int64_t bytes = program.aval(root).size_bytes();
    for (int64_t s = from; s <= to && s < static_cast<int64_t>(steps.size()); ++s) {
      live_bytes[static_cast<size_t>(s)] += bytes;
      if (saved[var]) saved_bytes[static_cast<size_t>(s)] += bytes;
    }
  }
  auto fullest = std::max_element(live_bytes.begin(), live_bytes.end());
  estimate.peak_step = fullest - live_bytes.begin();
  // Their most at once, which is where the forward pass hands over to the backward pass.
  estimate.saved_activation_bytes =
      std::min(estimate.arena_bytes, *std::max_element(saved_bytes.begin(), saved_bytes.end()));
  estimate.temporary_bytes = estimate.arena_bytes - estimate.saved_activation_bytes;
  return estimate;
}

nlohmann::json memory_report_json(const MemoryEstimate& estimate, int64_t observed_peak_bytes,
                                  const AllocatorActivity& allocator) {
  return {{"estimate",
           {{"params", estimate.params_bytes},
            {"optimizer_state", estimate.optimizer_state_bytes},
            {"other_inputs", estimate.other_input_bytes},
            {"constants", estimate.constant_bytes},
            {"outputs", estimate.output_bytes},
            {"saved_activations", estimate.saved_activation_bytes},
            {"temporaries", estimate.temporary_bytes},
            {"total", estimate.total()}}},
          {"arena_bytes", estimate.arena_bytes},
          {"arena_peak_step", estimate.peak_step},
          {"observed_peak_bytes", observed_peak_bytes},
          {"observed_minus_estimate_bytes", observed_peak_bytes - estimate.total()},
          {"allocator",
           {{"steps", allocator.steps},
            {"system_allocations", allocator.system_allocations},
            {"cache_evictions", allocator.cache_evictions},
            {"reserved_bytes", allocator.reserved_bytes}}}};
}

}  // namespace kiln::profile
