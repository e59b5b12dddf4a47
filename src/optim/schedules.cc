// Learning-rate schedules (include/kiln/optim.h): functions of the i32 step written with
// ops, so that inside a jitted train step they are evaluated on the traced count and a new
// step never recompiles. Arithmetic is f32; formulas and clamping follow optax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/ops.h"
#include "optim/tree_math.h"

namespace kiln::optim {
namespace {

using detail::require_non_negative;

Array f32_scalar_on(double value, const Array& like) {
  return full({}, value, DType::f32, device_of(like));
}

// The step as f32, clamped to [0, limit] first in i32 (exact for steps below 2^24).
Array clamped_steps(const Array& step, int64_t limit) {
  return astype(clip(step, 0, limit), DType::f32);
}

// An int64 step bound, clamped into i32 (the count never leaves it).
// (An int, so that `step < bound` stays an i32 comparison: a double would promote to f32.)
int as_i32_bound(int64_t value) {
  constexpr int64_t kLow = std::numeric_limits<int32_t>::min();
  constexpr int64_t kHigh = std::numeric_limits<int32_t>::max();
  return static_cast<int>(std::clamp(value, kLow, kHigh));
}

void require_steps(std::string_view what, std::string_view arg, int64_t value, int64_t minimum,
                   CallSite site) {
  if (value < minimum) {
    fail(site, fmt::format("{}: {} must be >= {}, got {}", what, arg, minimum, value));
  }
}

}  // namespace

// Unchecked here: the optimizer it is given to checks it and names itself in the error.
LearningRate::LearningRate(double value)
    : Schedule([value](const Array& step) { return f32_scalar_on(value, step); }) {}

Schedule constant(double value, CallSite site) {
  require_non_negative("constant", "value", value, site);
  return [value](const Array& step) { return f32_scalar_on(value, step); };
}

Schedule linear(double init, double end, int64_t steps, CallSite site) {
  require_non_negative("linear", "init", init, site);
  require_non_negative("linear", "end", end, site);
  require_steps("linear", "steps", steps, 1, site);
  return [=](const Array& step) {
    Array remaining = 1.0 - clamped_steps(step, steps) / steps;
    return remaining * (init - end) + end;
  };
}

Schedule cosine_decay(double init, int64_t decay_steps, double alpha, CallSite site) {
  require_non_negative("cosine_decay", "init", init, site);
  require_non_negative("cosine_decay", "alpha", alpha, site);
  require_steps("cosine_decay", "decay_steps", decay_steps, 1, site);
  return [=](const Array& step) {
    Array t = clamped_steps(step, decay_steps);
    Array cosine = 0.5 * (1.0 + cos(t * std::numbers::pi / decay_steps));
    return ((1.0 - alpha) * cosine + alpha) * init;
  };
}

Schedule warmup_cosine(double peak, int64_t warmup_steps, int64_t decay_steps, double end_value,
                       CallSite site) {
  require_non_negative("warmup_cosine", "peak", peak, site);
  require_non_negative("warmup_cosine", "end_value", end_value, site);
  require_steps("warmup_cosine", "warmup_steps", warmup_steps, 0, site);
  if (decay_steps <= warmup_steps) {
    fail(site,
         fmt::format("warmup_cosine: decay_steps ({}) must be greater than warmup_steps ({})",
                     decay_steps, warmup_steps),
         "decay_steps counts from step 0, warmup included, as in optax");
  }
  int64_t cosine_steps = decay_steps - warmup_steps;
  return [=](const Array& step) {
    // After the warmup: end + (peak - end) * cosine, which is optax's
    // peak * ((1 - alpha) * cosine + alpha) with alpha = end / peak, without the division.
    Array since =
        astype(clip(step - as_i32_bound(warmup_steps), 0, as_i32_bound(cosine_steps)), DType::f32);
    Array cosine = 0.5 * (1.0 + cos(since * std::numbers::pi / cosine_steps));
    Array decayed = cosine * (peak - end_value) + end_value;
    if (warmup_steps == 0) return decayed;
    Array warm = clamped_steps(step, warmup_steps) / warmup_steps * peak;
    return where(step < as_i32_bound(warmup_steps), warm, decayed);
  };
}

Schedule piecewise_constant(std::vector<int64_t> boundaries, std::vector<double> values,
                            CallSite site) {
  if (values.size() != boundaries.size() + 1) {
    fail(site,
         fmt::format("piecewise_constant: {} boundaries need {} values, got {}", boundaries.size(),
                     boundaries.size() + 1, values.size()),
         "values[i] holds while step < boundaries[i]; the last value holds after the last "
         "boundary");
  }
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] < boundaries[i - 1]) {
      fail(site, fmt::format("piecewise_constant: boundaries must be sorted, but boundaries[{}] = "
                             "{} comes after boundaries[{}] = {}",
                             i, boundaries[i], i - 1, boundaries[i - 1]));
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    require_non_negative("piecewise_constant", fmt::format("values[{}]", i), values[i], site);
  }
  return [boundaries = std::move(boundaries), values = std::move(values)](const Array& step) {
    Array value = f32_scalar_on(values[0], step);
    for (size_t i = 0; i < boundaries.size(); ++i) {
      value = where(step >= as_i32_bound(boundaries[i]), f32_scalar_on(values[i + 1], step), value);
    }
    return value;
  };
}

Schedule exponential(double init, double rate, int64_t transition_steps, bool staircase,
                     CallSite site) {
  require_non_negative("exponential", "init", init, site);
  detail::require_positive("exponential", "rate", rate, site);
  require_steps("exponential", "transition_steps", transition_steps, 1, site);
  return [=](const Array& step) {
    Array exponent = astype(step, DType::f32) / transition_steps;
    if (staircase) exponent = floor(exponent);
    return pow(f32_scalar_on(rate, step), exponent) * init;
  };
}

double schedule_value(const Schedule& schedule, int64_t step, CallSite site) {
  if (!schedule) fail(site, "schedule_value: the Schedule is empty");
  if (step < 0) fail(site, fmt::format("schedule_value: step must be >= 0, got {}", step));
  return schedule(scalar(as_i32_bound(step), DType::i32, nullptr, site)).item<double>(site);
}

}  // namespace kiln::optim
