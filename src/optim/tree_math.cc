// Shared checks and step-count arithmetic of the optimizers (src/optim/tree_math.h).
#include "optim/tree_math.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/ops.h"

namespace kiln::optim::detail {

void require_finite(std::string_view what, std::string_view arg, double value, CallSite site) {
  if (!std::isfinite(value)) {
    fail(site, fmt::format("{}: {} must be a finite number, got {}", what, arg, value));
  }
}

void require_non_negative(std::string_view what, std::string_view arg, double value,
                          CallSite site) {
  require_finite(what, arg, value, site);
  if (value < 0) fail(site, fmt::format("{}: {} must be >= 0, got {}", what, arg, value));
}

void require_positive(std::string_view what, std::string_view arg, double value, CallSite site) {
  require_finite(what, arg, value, site);
  if (value <= 0) fail(site, fmt::format("{}: {} must be > 0, got {}", what, arg, value));
}

void require_unit_interval(std::string_view what, std::string_view arg, double value,
                           CallSite site) {
  require_finite(what, arg, value, site);
  if (value < 0 || value >= 1) {
    fail(site, fmt::format("{}: {} must be in [0, 1), got {}", what, arg, value),
         value >= 1 ? "a value of 1 or more never forgets and makes the average diverge or stall"
                    : "");
  }
}

void require_learning_rate(std::string_view what, const Schedule& schedule, CallSite site) {
  if (!schedule) fail(site, fmt::format("{}: learning_rate is an empty Schedule", what));
  double first = rate_at(what, schedule, zeros({}, DType::i32), site).item<double>(site);
  if (!std::isfinite(first) || first < 0) {
    fail(site,
         fmt::format("{}: learning_rate must be finite and >= 0, but the schedule gives {} at "
                     "step 0",
                     what, first),
         "updates are already negated: pass the step size itself, e.g. constant(1e-3)");
  }
}

Array zero_count(const Tree& params) {
  Device* device = nullptr;
  std::vector<Array> leaves = params.leaves();
  if (!leaves.empty()) device = device_of(leaves.front());
  return zeros({}, DType::i32, device);
}

Array next_count(const Array& count) {
  // Saturate rather than wrap to a negative step, which the schedules would misread.
  Array last =
      kiln::detail::weak_scalar_like(std::numeric_limits<int32_t>::max() - 1.0, false, count);
  return minimum(count, last) + 1;
}

Array rate_at(std::string_view what, const Schedule& schedule, const Array& count, CallSite site) {
  Array rate = schedule(count);
  if (!rate.defined() || rate.rank() != 0 || !is_floating(rate.dtype())) {
    fail(site,
         fmt::format("{}: the learning-rate schedule returned {}, expected an f32 scalar", what,
                     rate.defined() ? rate.aval().to_string() : std::string("nothing")));
  }
  return rate.dtype() == DType::f32 ? rate : astype(rate, DType::f32);
}

Array latest_rate(std::string_view what, const Schedule& schedule, const Array& count,
                  CallSite site) {
  return rate_at(what, schedule,
                 maximum(count - 1, kiln::detail::weak_scalar_like(0, false, count)), site);
}

Leaves leaves_of(const Tree& tree) {
  Leaves out;
  for (auto& [path, leaf] : tree.leaves_with_paths()) {
    out.paths.push_back(std::move(path));
    out.arrays.push_back(std::move(leaf));
  }
  return out;
}

void check_grads(std::string_view what, const Tree& grads, const Tree& reference,
                 std::string_view reference_name, CallSite site) {
  check_same_structure(grads, reference, fmt::format("{}: gradients vs {}", what, reference_name),
                       site);
  Leaves g = leaves_of(grads);
  std::vector<Array> r = reference.leaves();
  for (size_t i = 0; i < r.size(); ++i) {
    const Array& grad = g.arrays[i];
    if (!is_floating(grad.dtype())) {
      fail(site, fmt::format("{}: the gradient at '{}' is {}, expected floating-point values", what,
                             g.paths[i], grad.aval().to_string()));
    }
    if (grad.shape() != r[i].shape() || grad.dtype() != r[i].dtype()) {
      fail(site,
           fmt::format("{}: the gradient at '{}' is {}, but {} has {} there", what, g.paths[i],
                       grad.aval().to_string(), reference_name, r[i].aval().to_string()));
    }
  }
}

Array in_dtype(const Array& rate, DType dtype) {
  return rate.dtype() == dtype ? rate : astype(rate, dtype);
}

Tree zeros_tree(const Tree& tree) {
  return tree_map([](const Array& leaf) { return zeros_like(leaf); }, tree);
}

}  // namespace kiln::optim::detail
