// Argument checks shared by the losses and metrics (src/nn/losses.cc, metrics.cc): each
// error names the function, the role of the argument and the types involved.
#pragma once

#include <string_view>

#include "kiln/array.h"
#include "kiln/error.h"

namespace kiln::nn::detail {

// `x` is defined and of a floating-point dtype.
void check_float_arg(std::string_view op, std::string_view role, const Array& x, CallSite site);
// logits are floating with rank >= 1 (classes last); labels are integer class indices with
// the shape of logits without the last axis.
void check_logits_and_labels(std::string_view op, const Array& logits, const Array& labels,
                             CallSite site);
// Both defined and of the same shape.
void check_same_shape(std::string_view op, std::string_view role_a, const Array& a,
                      std::string_view role_b, const Array& b, CallSite site);

}  // namespace kiln::nn::detail
