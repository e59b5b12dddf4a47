// Abstract evaluation of the elementwise families: unary, binary, select, and
// convert_element_type. Binary operands must have one dtype (ops promote before binding)
// and equal rank (or rank 0); each axis matches the result or is 1 (broadcast without
// materialising).
#include <ranges>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/check.h"
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/select.h"
#include "prims/ids/unary.h"
#include "prims/registry.h"

namespace kiln {
namespace {

enum class Accepts { kFloat, kNumeric, kBoolOrInteger, kInteger, kAny };

struct ElementwiseSpec {
  PrimId id;
  Accepts accepts;
  bool returns_bool;
};

constexpr ElementwiseSpec kUnarySpecs[] = {
    {prim::neg, Accepts::kNumeric, false},    {prim::abs, Accepts::kNumeric, false},
    {prim::sign, Accepts::kNumeric, false},   {prim::exp, Accepts::kFloat, false},
    {prim::expm1, Accepts::kFloat, false},    {prim::log, Accepts::kFloat, false},
    {prim::log1p, Accepts::kFloat, false},    {prim::sqrt, Accepts::kFloat, false},
    {prim::rsqrt, Accepts::kFloat, false},    {prim::tanh, Accepts::kFloat, false},
    {prim::logistic, Accepts::kFloat, false}, {prim::sin, Accepts::kFloat, false},
    {prim::cos, Accepts::kFloat, false},      {prim::floor, Accepts::kFloat, false},
    {prim::ceil, Accepts::kFloat, false},     {prim::round, Accepts::kFloat, false},
    {prim::is_finite, Accepts::kFloat, true}, {prim::not_, Accepts::kBoolOrInteger, false},
    {prim::erf, Accepts::kFloat, false},      {prim::erf_inv, Accepts::kFloat, false},
};

constexpr ElementwiseSpec kBinarySpecs[] = {
    {prim::add, Accepts::kNumeric, false},
    {prim::sub, Accepts::kNumeric, false},
    {prim::mul, Accepts::kNumeric, false},
    {prim::div, Accepts::kNumeric, false},
    {prim::rem, Accepts::kNumeric, false},
    {prim::pow, Accepts::kFloat, false},
    {prim::max, Accepts::kNumeric, false},
    {prim::min, Accepts::kNumeric, false},
    {prim::and_, Accepts::kBoolOrInteger, false},
    {prim::or_, Accepts::kBoolOrInteger, false},
    {prim::xor_, Accepts::kBoolOrInteger, false},
    {prim::eq, Accepts::kAny, true},
    {prim::ne, Accepts::kAny, true},
    {prim::lt, Accepts::kAny, true},
    {prim::le, Accepts::kAny, true},
    {prim::gt, Accepts::kAny, true},
    {prim::ge, Accepts::kAny, true},
    {prim::shift_left, Accepts::kInteger, false},
    {prim::shift_right_logical, Accepts::kInteger, false},
    {prim::shift_right_arithmetic, Accepts::kInteger, false},
};

const ElementwiseSpec& spec_of(PrimId id) {
  for (const auto& spec : kUnarySpecs) {
    if (spec.id == id) return spec;
  }
  for (const auto& spec : kBinarySpecs) {
    if (spec.id == id) return spec;
  }
  KILN_CHECK(false, "{} is not elementwise", prim_name(id));
  return kUnarySpecs[0];
}

bool accepts(Accepts accepts, DType dtype) {
  switch (accepts) {
    case Accepts::kFloat:
      return is_floating(dtype);
    case Accepts::kNumeric:
      return dtype != DType::bool_;
    case Accepts::kBoolOrInteger:
      return dtype == DType::bool_ || is_integer(dtype);
    case Accepts::kInteger:
      return is_integer(dtype);
    case Accepts::kAny:
      return true;
  }
  return false;
}

void check_accepts(const ElementwiseSpec& spec, const AbstractValue& operand,
                   const RuleContext& context) {
  if (accepts(spec.accepts, operand.dtype)) return;
  switch (spec.accepts) {
    case Accepts::kFloat:
      context.fail(fmt::format("expects a floating-point operand, got {}", operand.to_string()),
                   "convert first, e.g. astype(x, DType::f32)");
    case Accepts::kNumeric:
      context.fail(fmt::format("does not accept bool operands, got {}", operand.to_string()),
                   "convert first, e.g. astype(x, DType::i32), or use bitwise_or/bitwise_and "
                   "for logic");
    case Accepts::kBoolOrInteger:
      context.fail(fmt::format("is a bitwise op and needs bool or integer operands, got {}",
                               operand.to_string()),
                   "for floats compare first (x > 0), or convert with astype");
    case Accepts::kInteger:
      context.fail(fmt::format("needs integer operands, got {}", operand.to_string()),
                   "to shift the bits of a float, reinterpret it first with "
                   "bitcast_convert_type(x, DType::u32)");
    case Accepts::kAny:
      break;
  }
}

// Equal rank (rank-0 operands broadcast to any rank, so a literal needs no reshape); each
// axis equal or 1. Returns the broadcast shape.
Shape broadcast_operands(std::span<const AbstractValue> operands, const RuleContext& context) {
  Shape out;
  for (const AbstractValue& operand : operands) {
    if (operand.shape.rank() > out.rank()) out = operand.shape;
  }
  for (const AbstractValue& operand : operands) {
    if (operand.shape.rank() == 0) continue;
    if (operand.shape.rank() != out.rank()) {
      context.fail(fmt::format("operands must have equal rank at the primitive level, got {}",
                               fmt::join(operands | std::views::transform([](const auto& a) {
                                           return a.to_string();
                                         }),
                                         " and ")),
                   "the user-level ops (add, mul, where, ...) broadcast for you");
    }
    for (int64_t axis = 0; axis < out.rank(); ++axis) {
      int64_t a = out[axis], b = operand.shape[axis];
      if (a == b || b == 1) continue;
      if (a == 1) {
        out[axis] = b;
        continue;
      }
      context.fail(fmt::format(
          "shapes {} cannot be broadcast together (axis {}: {} vs {})",
          fmt::join(operands | std::views::transform([](const auto& v) { return v.to_string(); }),
                    ", "),
          axis, a, b));
    }
  }
  return out;
}

std::vector<AbstractValue> unary_rule(std::span<const AbstractValue> inputs, const Params&,
                                      const RuleContext& context) {
  const ElementwiseSpec& spec = spec_of(context.prim.id);
  check_accepts(spec, inputs[0], context);
  AbstractValue out = inputs[0];
  if (spec.returns_bool) {
    out.dtype = DType::bool_;
    out.weak_type = false;
  }
  return {out};
}

std::vector<AbstractValue> binary_rule(std::span<const AbstractValue> inputs, const Params&,
                                       const RuleContext& context) {
  const ElementwiseSpec& spec = spec_of(context.prim.id);
  const AbstractValue& a = inputs[0];
  const AbstractValue& b = inputs[1];
  if (a.dtype != b.dtype) {
    context.fail(fmt::format("operands must have one dtype at the primitive level, got {} and {}",
                             a.to_string(), b.to_string()),
                 "the user-level ops promote for you; or convert one operand with astype");
  }
  check_accepts(spec, a, context);
  AbstractValue out{broadcast_operands(inputs, context), a.dtype, a.weak_type && b.weak_type};
  if (spec.returns_bool) {
    out.dtype = DType::bool_;
    out.weak_type = false;
  }
  return {out};
}

std::vector<AbstractValue> select_rule(std::span<const AbstractValue> inputs, const Params&,
                                       const RuleContext& context) {
  const AbstractValue& pred = inputs[0];
  if (pred.dtype != DType::bool_) {
    context.fail(fmt::format("the predicate must be bool, got {}", pred.to_string()),
                 "compare to get a predicate, e.g. where(x > 0, a, b)");
  }
  if (inputs[1].dtype != inputs[2].dtype) {
    context.fail(fmt::format("both branches must have one dtype, got {} and {}",
                             inputs[1].to_string(), inputs[2].to_string()),
                 "the user-level where() promotes for you");
  }
  return {AbstractValue{broadcast_operands(inputs, context), inputs[1].dtype,
                        inputs[1].weak_type && inputs[2].weak_type}};
}

std::vector<AbstractValue> convert_rule(std::span<const AbstractValue> inputs, const Params& params,
                                        const RuleContext&) {
  AbstractValue out = inputs[0];
  out.dtype = std::get<ConvertParams>(params).new_dtype;
  out.weak_type = false;
  return {out};
}

}  // namespace

void register_elementwise_rules(PrimTable& table) {
  for (const auto& spec : kUnarySpecs) table[spec.id].abstract_eval = unary_rule;
  for (const auto& spec : kBinarySpecs) table[spec.id].abstract_eval = binary_rule;
  table[prim::select].abstract_eval = select_rule;
  table[prim::convert_element_type].abstract_eval = convert_rule;
}

}  // namespace kiln
