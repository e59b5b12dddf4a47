// Abstract evaluation of the contract family: dot_general (general dimension numbers,
// output axes = batch, lhs free, rhs free) and conv_general_dilated (2-D, NHWC x HWIO ->
// NHWC, strides, explicit padding, both dilations, feature groups). Every bad input is an
// error naming the primitive, both operand types and the offending parameter.
#include <cstdint>

#include <fmt/format.h>

#include "prims/cost_util.h"
#include "prims/ids/contract.h"
#include "prims/registry.h"

namespace kiln {
namespace {

std::string pair_string(const AbstractValue& lhs, const AbstractValue& rhs) {
  return fmt::format("{} and {}", lhs.to_string(), rhs.to_string());
}

void check_same_dtype(const AbstractValue& lhs, const AbstractValue& rhs,
                      const RuleContext& context) {
  if (lhs.dtype != rhs.dtype) {
    context.fail(fmt::format("operands must have one dtype at the primitive level, got {}",
                             pair_string(lhs, rhs)),
                 "the user-level ops (matmul, dot_general, conv2d) promote for you; or convert "
                 "one operand with astype");
  }
}

// Checks that `dims` name distinct axes of `operand` that `used` does not already hold,
// and marks them used.
void check_dims(const Dims& dims, std::string_view what, const AbstractValue& operand,
                std::vector<bool>& used, const RuleContext& context) {
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= operand.shape.rank()) {
      context.fail(fmt::format("{} {} is out of range for {} (rank {})", what, dim,
                               operand.to_string(), operand.shape.rank()),
                   fmt::format("primitive dims are 0..{}; the user-level dot_general also "
                               "accepts negative dims",
                               operand.shape.rank() - 1));
    }
    if (used[static_cast<size_t>(dim)]) {
      context.fail(fmt::format("axis {} of {} is listed twice in the batch and contracting "
                               "dims ({} {})",
                               dim, operand.to_string(), what, dims_to_string(dims)),
                   "an axis is either a batch axis, a contracting axis or free, never two");
    }
    used[static_cast<size_t>(dim)] = true;
  }
}

std::vector<AbstractValue> dot_general_rule(std::span<const AbstractValue> inputs,
                                            const Params& params, const RuleContext& context) {
  const auto& p = std::get<DotGeneralParams>(params);
  const AbstractValue& lhs = inputs[0];
  const AbstractValue& rhs = inputs[1];
  check_same_dtype(lhs, rhs, context);
  if (lhs.dtype == DType::bool_) {
    context.fail(fmt::format("does not accept bool operands, got {}", pair_string(lhs, rhs)),
                 "convert first, e.g. astype(x, DType::f32)");
  }
  if (p.preferred_element_type) {
    DType preferred = *p.preferred_element_type;
    if (preferred == DType::bool_ || (is_floating(lhs.dtype) && !is_floating(preferred))) {
      context.fail(fmt::format("preferred_element_type {} is not allowed for {} operands",
                               dtype_name(preferred), dtype_name(lhs.dtype)),
                   "float operands need a float result type; integer operands an integer or "
                   "float one");
    }
  }
  if (p.lhs_contracting.size() != p.rhs_contracting.size()) {
    context.fail(
        fmt::format("lhs_contracting {} and rhs_contracting {} must have equal length "
                    "(operands {})",
                    dims_to_string(p.lhs_contracting), dims_to_string(p.rhs_contracting),
                    pair_string(lhs, rhs)));
  }
  if (p.lhs_batch.size() != p.rhs_batch.size()) {
    context.fail(fmt::format("lhs_batch {} and rhs_batch {} must have equal length (operands {})",
                             dims_to_string(p.lhs_batch), dims_to_string(p.rhs_batch),
                             pair_string(lhs, rhs)));
  }
  std::vector<bool> lhs_used(static_cast<size_t>(lhs.shape.rank()), false);
  std::vector<bool> rhs_used(static_cast<size_t>(rhs.shape.rank()), false);
  check_dims(p.lhs_batch, "lhs_batch dim", lhs, lhs_used, context);
  check_dims(p.lhs_contracting, "lhs_contracting dim", lhs, lhs_used, context);
  check_dims(p.rhs_batch, "rhs_batch dim", rhs, rhs_used, context);
  check_dims(p.rhs_contracting, "rhs_contracting dim", rhs, rhs_used, context);
  for (size_t i = 0; i < p.lhs_contracting.size(); ++i) {
    int64_t a = lhs.shape[p.lhs_contracting[i]], b = rhs.shape[p.rhs_contracting[i]];
    if (a != b) {
      context.fail(
          fmt::format("contracting sizes differ: lhs axis {} has {} but rhs axis {} has "
                      "{} (operands {})",
                      p.lhs_contracting[i], a, p.rhs_contracting[i], b, pair_string(lhs, rhs)),
          "contracted axes must have equal sizes; did an operand need a transpose?");
    }
  }
  Shape out;
  for (size_t i = 0; i < p.lhs_batch.size(); ++i) {
    int64_t a = lhs.shape[p.lhs_batch[i]], b = rhs.shape[p.rhs_batch[i]];
    if (a != b) {
      context.fail(fmt::format("batch sizes differ: lhs axis {} has {} but rhs axis {} has {} "
                               "(operands {})",
                               p.lhs_batch[i], a, p.rhs_batch[i], b, pair_string(lhs, rhs)),
                   "batch axes must match exactly at the primitive level; matmul broadcasts them");
    }
    out.dims().push_back(a);
  }
  for (int64_t axis = 0; axis < lhs.shape.rank(); ++axis) {
    if (!lhs_used[static_cast<size_t>(axis)]) out.dims().push_back(lhs.shape[axis]);
  }
  for (int64_t axis = 0; axis < rhs.shape.rank(); ++axis) {
    if (!rhs_used[static_cast<size_t>(axis)]) out.dims().push_back(rhs.shape[axis]);
  }
  return {AbstractValue{out, p.preferred_element_type.value_or(lhs.dtype),
                        lhs.weak_type && rhs.weak_type && !p.preferred_element_type}};
}

// The size arithmetic below is done in 128 bits, far from overflow with every parameter
// within kParamLimit (prims/registry.h).

// Size of `size` cells with `dilation - 1` holes between neighbours.
__int128 dilated_size(int64_t size, int64_t dilation) {
  return size == 0 ? 0 : static_cast<__int128>(size - 1) * dilation + 1;
}

void check_pair(const Dims& values, std::string_view name, int64_t minimum,
                const RuleContext& context) {
  if (values.size() != 2) {
    context.fail(
        fmt::format("{} must have 2 entries (H and W), got {}", name, dims_to_string(values)));
  }
  for (int64_t value : values) {
    if (value < minimum) {
      context.fail(fmt::format("{} {} must be at least {}", name, dims_to_string(values), minimum));
    }
    if (value > kParamLimit || value < -kParamLimit) {
      context.fail(fmt::format("{} {} is out of range", name, dims_to_string(values)));
    }
  }
}

std::vector<AbstractValue> conv_rule(std::span<const AbstractValue> inputs, const Params& params,
                                     const RuleContext& context) {
  const auto& p = std::get<ConvParams>(params);
  const AbstractValue& lhs = inputs[0];
  const AbstractValue& rhs = inputs[1];
  if (lhs.shape.rank() != 4 || rhs.shape.rank() != 4) {
    context.fail(fmt::format("expects a rank-4 NHWC input and a rank-4 HWIO kernel, got {}",
                             pair_string(lhs, rhs)),
                 "add the missing axes with reshape, e.g. a batch of one or one channel");
  }
  check_same_dtype(lhs, rhs, context);
  if (!is_floating(lhs.dtype)) {
    context.fail(fmt::format("expects floating-point operands, got {}", pair_string(lhs, rhs)),
                 "convert first, e.g. astype(x, DType::f32)");
  }
  check_pair(p.window_strides, "window_strides", 1, context);
  check_pair(p.lhs_dilation, "lhs_dilation", 1, context);
  check_pair(p.rhs_dilation, "rhs_dilation", 1, context);
  check_pair(p.padding_low, "padding_low", -kParamLimit, context);
  check_pair(p.padding_high, "padding_high", -kParamLimit, context);
  int64_t groups = p.feature_group_count;
  int64_t channels = lhs.shape[3];
  if (groups < 1) {
    context.fail(fmt::format("feature_group_count {} must be at least 1", groups));
  }
  if (channels % groups != 0) {
    context.fail(fmt::format("feature_group_count {} does not divide the {} input channels of {}",
                             groups, channels, lhs.to_string()),
                 "use a group count that divides C (groups = C is a depthwise convolution)");
  }
  if (rhs.shape[2] != channels / groups) {
    context.fail(
        fmt::format("the kernel's input-channel axis (I, axis 2 of HWIO) is {} but the "
                    "input has {} channels / {} groups = {} (operands {})",
                    rhs.shape[2], channels, groups, channels / groups, pair_string(lhs, rhs)),
        "x is NHWC and w is HWIO with I = C / groups; a kernel in OIHW or HWOI layout "
        "needs a transpose");
  }
  if (rhs.shape[3] % groups != 0) {
    context.fail(fmt::format("feature_group_count {} does not divide the {} output channels of "
                             "the kernel {}",
                             groups, rhs.shape[3], rhs.to_string()),
                 "each group needs the same number of output channels");
  }
  Shape out{lhs.shape[0], 0, 0, rhs.shape[3]};
  for (int64_t i = 0; i < 2; ++i) {
    size_t s = static_cast<size_t>(i);
    int64_t kernel = rhs.shape[i];
    if (kernel < 1) {
      context.fail(fmt::format("the kernel window {}x{} is empty (kernel {})", rhs.shape[0],
                               rhs.shape[1], rhs.to_string()));
    }
    __int128 padded =
        dilated_size(lhs.shape[1 + i], p.lhs_dilation[s]) + p.padding_low[s] + p.padding_high[s];
    __int128 window = dilated_size(kernel, p.rhs_dilation[s]);
    if (padded < window) {
      context.fail(
          fmt::format("the {} axis is empty in the output: padded input size {} (from {} with "
                      "lhs_dilation {}, padding {}/{}) is smaller than the dilated kernel {} "
                      "(operands {})",
                      i == 0 ? "H" : "W", static_cast<int64_t>(padded), lhs.shape[1 + i],
                      p.lhs_dilation[s], p.padding_low[s], p.padding_high[s],
                      static_cast<int64_t>(window), pair_string(lhs, rhs)),
          "use SAME padding, a smaller kernel or dilation, or a larger input");
    }
    __int128 size = (padded - window) / p.window_strides[s] + 1;
    if (size > (int64_t{1} << 62)) {
      context.fail(
          fmt::format("the output would be too large (operands {})", pair_string(lhs, rhs)));
    }
    out[1 + i] = static_cast<int64_t>(size);
  }
  return {AbstractValue{out, lhs.dtype, false}};
}

// ----- cost rules (kiln/cost_types.h) -----

// 2 x (result elements) x (contracted size): 2 x batch x M x N x K for a batched matmul.
Cost dot_general_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                      const Params& params) {
  const auto& p = std::get<DotGeneralParams>(params);
  double contracted = 1;
  for (int64_t axis : p.lhs_contracting) contracted *= static_cast<double>(inputs[0].shape[axis]);
  return cost::moves_all(inputs, outputs, 2 * cost::elements(outputs[0]) * contracted);
}

// 2 x (result elements) x (kernel window) x (input channels per group); rhs is HWIO. Taps
// that fall on padding or on the holes of lhs_dilation are counted too: the count is the
// multiply-adds of the convolution as written, not of a particular algorithm.
Cost conv_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
               const Params&) {
  const Shape& rhs = inputs[1].shape;
  double taps =
      static_cast<double>(rhs[0]) * static_cast<double>(rhs[1]) * static_cast<double>(rhs[2]);
  return cost::moves_all(inputs, outputs, 2 * cost::elements(outputs[0]) * taps);
}

}  // namespace

void register_contract_rules(PrimTable& table) {
  table[prim::dot_general].abstract_eval = dot_general_rule;
  table[prim::conv_general_dilated].abstract_eval = conv_rule;
  table[prim::dot_general].cost = dot_general_cost;
  table[prim::conv_general_dilated].cost = conv_cost;
}

}  // namespace kiln
