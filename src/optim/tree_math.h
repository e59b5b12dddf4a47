// Pieces shared by the optimizers in src/optim: argument checks at construction, the i32
// step count every stateful transformation keeps, the learning rate read from it, and the
// check that gradients line up leaf by leaf with the tree they update.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/optim.h"

namespace kiln::optim::detail {

// Construction-time checks; `what` names the optimizer or schedule, `arg` the argument.
void require_finite(std::string_view what, std::string_view arg, double value, CallSite site);
void require_non_negative(std::string_view what, std::string_view arg, double value, CallSite site);
void require_positive(std::string_view what, std::string_view arg, double value, CallSite site);
// 0 <= value < 1 (betas and decay rates).
void require_unit_interval(std::string_view what, std::string_view arg, double value,
                           CallSite site);
// A non-empty schedule whose value at step 0 is a finite, non-negative number.
void require_learning_rate(std::string_view what, const Schedule& schedule, CallSite site);

// An i32 scalar 0, on the device of params' first leaf when it has one.
Array zero_count(const Tree& params);
// count + 1, saturating at the largest i32 (the schedules then stay at their last value).
Array next_count(const Array& count);
// The schedule at `count`, checked to be a floating-point scalar (a user schedule might
// return anything), as an f32 scalar.
Array rate_at(std::string_view what, const Schedule& schedule, const Array& count, CallSite site);
// The learning rate the latest update used: the schedule at max(count - 1, 0).
Array latest_rate(std::string_view what, const Schedule& schedule, const Array& count,
                  CallSite site);

// Checks that `grads` has the structure of `reference` (the params, or a state tree made
// from them) and that every leaf has the same shape and dtype, and that they are floats.
// `reference_name` says what the reference is in the message.
void check_grads(std::string_view what, const Tree& grads, const Tree& reference,
                 std::string_view reference_name, CallSite site);
// The leaves of `tree` with their paths (one flatten for both).
struct Leaves {
  std::vector<std::string> paths;
  std::vector<Array> arrays;
};
Leaves leaves_of(const Tree& tree);

// `rate` (an f32 scalar) in `dtype`, so that each leaf's arithmetic stays in its own dtype.
Array in_dtype(const Array& rate, DType dtype);

// zeros_like of every leaf, same structure.
Tree zeros_tree(const Tree& tree);

}  // namespace kiln::optim::detail
