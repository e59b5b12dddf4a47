// The memory report of a compiled train step: what the memory planner expects one call to
// need at its peak, by what it holds, beside the peak the device's allocator observed
// while the traced steps ran.
//
// The estimate's parts: the parameters (with the model's state) and the optimizer state,
// which the caller names among the inputs; the rest of the inputs (the batch, the key); the
// closed-over constants; the results that did not fit in a donated input; and the arena of
// intermediates, split into saved activations (values the forward pass computed that the
// backward pass reads, scope "grad/...", at their most at once) and temporaries (the rest
// of the arena: every other value, and the arena's fragmentation). The observed peak also counts
// what no plan sees: the next batch already on the device, last step's metrics not yet read.
#pragma once

#include <cstdint>

#include <nlohmann/json_fwd.hpp>

#include "jit/executable.h"

namespace kiln::profile {

struct MemoryEstimate {
  int64_t params_bytes = 0;
  int64_t optimizer_state_bytes = 0;
  int64_t other_input_bytes = 0;
  int64_t constant_bytes = 0;
  int64_t output_bytes = 0;  // results not written over a donated input
  int64_t saved_activation_bytes = 0;
  int64_t temporary_bytes = 0;  // arena_bytes less the saved activations
  int64_t arena_bytes = 0;
  int64_t peak_step = -1;  // the executable step at which the arena is fullest
  int64_t total() const {
    return params_bytes + optimizer_state_bytes + other_input_bytes + constant_bytes +
           output_bytes + arena_bytes;
  }
};

// `params_bytes` and `optimizer_state_bytes`: the sizes of those inputs (the caller knows
// which inputs they are); the other inputs are the rest of the plan's argument bytes.
MemoryEstimate estimate_memory(const detail::Executable& executable, int64_t params_bytes,
                               int64_t optimizer_state_bytes);

// What the device's allocator did over the profiled steps (differences of MemoryStats).
struct AllocatorActivity {
  int64_t steps = 0;
  int64_t system_allocations = 0;  // new memory from the OS: 0 once a step's arena is cached
  int64_t cache_evictions = 0;
  int64_t reserved_bytes = 0;  // at the end
};

// run.json's "memory": the estimate by part, the observed peak and their difference, and
// the allocator's activity.
nlohmann::json memory_report_json(const MemoryEstimate& estimate, int64_t observed_peak_bytes,
                                  const AllocatorActivity& allocator = {});

// Whether an equation's name stack marks it as part of a backward pass ("grad" is one of
// its components).
bool in_backward_pass(const std::string& scope);

}  // namespace kiln::profile
