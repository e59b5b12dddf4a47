// kiln::random's samplers, each following its JAX derivation (jax/_src/random): uniform
// from mantissa bits (_uniform), normal through erf_inv (_normal_real), truncated_normal
// through erf and erf_inv (_truncated_normal), bernoulli by comparing a uniform with p
// (_bernoulli, mode "low"), and categorical by the Gumbel-max trick (_gumbel, mode "low").
// All arithmetic happens in the sampled dtype, one op at a time, as in JAX.
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/element_convert.h"
#include "kiln/device.h"
#include "kiln/ops.h"
#include "ops/op_util.h"
#include "random/random_internal.h"

namespace kiln::random {
namespace detail {
namespace {

int mantissa_bits(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return 10;
    case DType::bf16:
      return 7;
    case DType::f32:
      return 23;
    default:
      return 52;
  }
}

// The value after `value` (exact in `dtype`) toward `direction` in `dtype`, like
// numpy.nextafter on that dtype.
double next_after(double value, double direction, DType dtype) {
  switch (dtype) {
    case DType::f64:
      return std::nextafter(value, direction);
    case DType::f32:
      return std::nextafter(static_cast<float>(value), static_cast<float>(direction));
    default: {
      if (std::isnan(value) || std::isnan(direction)) return std::nan("");
      if (value == direction) return direction;
      // Step the 16-bit pattern: away from zero grows the magnitude by one unit.
      uint16_t bits = dtype == DType::f16 ? f16::from_float(static_cast<float>(value)).bits
                                          : bf16::from_float(static_cast<float>(value)).bits;
      if (value == 0) {
        bits = 1;  // the smallest subnormal, then signed below
        if (direction < 0) bits |= 0x8000;
      } else if ((value < direction) == (value > 0)) {
        ++bits;
      } else {
        --bits;
      }
      return dtype == DType::f16 ? f16::from_bits(bits).to_float()
                                 : bf16::from_bits(bits).to_float();
    }
  }
}

double smallest_normal(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return 0x1p-14;
    case DType::bf16:
    case DType::f32:
      return 0x1p-126;
    default:
      return 0x1p-1022;
  }
}

void check_float_dtype(std::string_view op, DType dtype, CallSite site) {
  if (!is_floating(dtype)) {
    fail(site, fmt::format("{}: dtype must be a float dtype, got {}", op, dtype_name(dtype)),
         "use DType::f32, f64, f16 or bf16");
  }
}

// Uniform in [lo, hi) with lo and hi given as values exact in `dtype`.
Array uniform_between(const Array& key, const Shape& shape, DType dtype, double lo, double hi,
                      CallSite site) {
  Array unit = unit_floats(key, shape, dtype, site);
  // With lo = 0 and hi = 1 the scaling below is exact (x * 1 + 0, then max(0, x)).
  if (lo == 0 && hi == 1 && !std::signbit(lo)) return unit;
  return scale_uniform(unit, constant(lo, dtype, key, site), constant(hi, dtype, key, site), site);
}

// sqrt(2) * erf_inv(u): JAX's map from uniform to normal.
Array normal_from_uniform(const Array& u, DType dtype, const Array& like, CallSite site) {
  return mul(constant(std::sqrt(2.0), dtype, like, site), erf_inv(u, site), site);
}

// `value` rounded to `dtype` (as scalar(value, dtype) would store it).
double in_dtype(double value, DType dtype) {
  return visit_dtype(dtype, [&](auto tag) -> double {
    using S = storage_t<decltype(tag)::value>;
    return static_cast<double>(widen(convert_element<S>(value)));
  });
}

}  // namespace

Array unit_floats(const Array& key, const Shape& shape, DType dtype, CallSite site) {
  int mantissa = mantissa_bits(dtype);
  if (dtype == DType::f64) {
    // 64 random bits; the top 52 become the mantissa of a double in [1, 2).
    Array words = bits64(key, shape, site);
    Array mantissas = shift_right_logical(words, constant(12, DType::i64, key, site), site);
    Array one = constant(static_cast<double>(0x3FF0000000000000), DType::i64, key, site);
    Array floats = bitcast_convert_type(bitwise_or(mantissas, one, site), DType::f64, site);
    return sub(floats, constant(1, DType::f64, key, site), site);
  }
  Array words = bits32(key, shape, site);
  if (dtype != DType::f32) {
    // JAX's _uniform draws as many bits as the dtype is wide, except only 8 when the
    // mantissa is narrower than 8 bits (f16: 16, bf16: 8): the low half or byte of the
    // word. It keeps the top `mantissa` of them. kiln has no 16-bit integers: the same mantissa
    // goes into a float in [1, 2), which converts to the 16-bit dtype exactly.
    int drawn = mantissa < 8 ? 8 : 16;
    words = bitwise_and(words, constant((1 << drawn) - 1, DType::u32, key, site), site);
    Array top = shift_right_logical(words, constant(drawn - mantissa, DType::u32, key, site), site);
    words = shift_left(top, constant(23 - mantissa, DType::u32, key, site), site);
  } else {
    words = shift_right_logical(words, constant(32 - mantissa, DType::u32, key, site), site);
  }
  Array floats = bitcast_convert_type(
      bitwise_or(words, constant(0x3F800000, DType::u32, key, site), site), DType::f32, site);
  if (dtype != DType::f32) floats = astype(floats, dtype, site);
  return sub(floats, constant(1, dtype, key, site), site);
}

Array scale_uniform(const Array& unit, const Array& lo, const Array& hi, CallSite site) {
  Array range = sub(hi, lo, site);
  return maximum(lo, add(mul(unit, range, site), lo, site), site);
}

// truncated_normal for validated bounds lo < hi (in the dtype), spec {dims, dtype, lo, hi}.
Array truncated_normal_body(const Array& key, const DrawSpec& spec, CallSite site) {
  const Shape& shape = spec.shape;
  DType dtype = spec.dtype;
  double lo = spec.a, hi = spec.b;
  // The bounds' images under erf(x / sqrt(2)) (the normal CDF, rescaled to [-1, 1]),
  // computed in `dtype` as JAX does.
  Array sqrt2 = constant(std::sqrt(2.0), dtype, key, site);
  Array a = erf(div(constant(lo, dtype, key, site), sqrt2, site), site);
  Array b = erf(div(constant(hi, dtype, key, site), sqrt2, site), site);
  Array u = scale_uniform(unit_floats(key, shape, dtype, site), a, b, site);
  Array out = normal_from_uniform(u, dtype, key, site);
  // Clamp into the open interval: rounding (or u == a) could reach a bound.
  double inf = std::numeric_limits<double>::infinity();
  Array above_lower = constant(next_after(lo, inf, dtype), dtype, key, site);
  Array below_upper = constant(next_after(hi, -inf, dtype), dtype, key, site);
  return minimum(below_upper, maximum(above_lower, out, site), site);
}

}  // namespace detail

using detail::check_float_dtype;
using detail::check_key;
using detail::check_shape;

Array uniform(const Array& key, Shape shape, DType dtype, double minval, double maxval,
              CallSite site) {
  check_key("uniform", key, site);
  check_shape("uniform", shape, site);
  check_float_dtype("uniform", dtype, site);
  if (!std::isfinite(minval) || !std::isfinite(maxval) || !(minval < maxval)) {
    fail(site,
         fmt::format("uniform: needs finite minval < maxval, got minval={} maxval={}", minval,
                     maxval),
         "the result lies in [minval, maxval); swap the bounds if they are reversed");
  }
  // JAX converts the bounds to `dtype` and computes maxval - minval there: both must stay
  // ordered and finite after rounding (e.g. -6e4 and 6e4 are fine in f16, their range is not).
  double lo = detail::in_dtype(minval, dtype), hi = detail::in_dtype(maxval, dtype);
  if (!(lo < hi)) {
    fail(site,
         fmt::format("uniform: minval={} and maxval={} are not a valid range in {} (they round "
                     "to {} and {})",
                     minval, maxval, dtype_name(dtype), lo, hi),
         "use a wider dtype or bounds further apart");
  }
  if (!std::isfinite(detail::in_dtype(hi - lo, dtype))) {
    fail(site,
         fmt::format("uniform: minval={} and maxval={} are not a valid range in {}: "
                     "maxval - minval overflows it",
                     minval, maxval, dtype_name(dtype)),
         "use a wider dtype (f32 or f64) or a narrower range");
  }
  return detail::compiled_draw(
      [](const Array& k, const detail::DrawSpec& s, CallSite at) {
        return detail::uniform_between(k, s.shape, s.dtype, s.a, s.b, at);
      },
      key, {shape, dtype, lo, hi}, site);
}

Array normal(const Array& key, Shape shape, DType dtype, CallSite site) {
  check_key("normal", key, site);
  check_shape("normal", shape, site);
  check_float_dtype("normal", dtype, site);
  // u in (-1, 1): the smallest float above -1, up to 1 (exclusive).
  double lo = detail::next_after(-1.0, 0.0, dtype);
  return detail::compiled_draw(
      [](const Array& k, const detail::DrawSpec& s, CallSite at) {
        Array u = detail::uniform_between(k, s.shape, s.dtype, s.a, s.b, at);
        return detail::normal_from_uniform(u, s.dtype, k, at);
      },
      key, {shape, dtype, lo, 1.0}, site);
}

Array truncated_normal(const Array& key, double lower, double upper, Shape shape, DType dtype,
                       CallSite site) {
  check_key("truncated_normal", key, site);
  check_shape("truncated_normal", shape, site);
  check_float_dtype("truncated_normal", dtype, site);
  double lo = detail::in_dtype(lower, dtype), hi = detail::in_dtype(upper, dtype);
  if (std::isnan(lower) || std::isnan(upper) || !(lo < hi)) {
    bool collapsed = lower < upper;  // ordered, but equal once rounded to `dtype`
    fail(site,
         fmt::format("truncated_normal: needs lower < upper (in {}), got lower={} upper={}{}",
                     dtype_name(dtype), lower, upper,
                     collapsed ? fmt::format(" (both round to {})", lo) : ""),
         collapsed ? "use a wider dtype or bounds further apart"
                   : "the bounds may be infinite, e.g. -INFINITY for no lower bound");
  }
  return detail::compiled_draw(detail::truncated_normal_body, key, {shape, dtype, lo, hi}, site);
}

Array bernoulli(const Array& key, double p, Shape shape, CallSite site) {
  check_key("bernoulli", key, site);
  check_shape("bernoulli", shape, site);
  if (!(p >= 0 && p <= 1)) {
    fail(site, fmt::format("bernoulli: p must be in [0, 1], got {}", p),
         "p is the probability of true");
  }
  Array u = detail::uniform_between(key, shape, DType::f32, 0, 1, site);
  return less(u, detail::constant(p, DType::f32, key, site), site);
}

Array bernoulli(const Array& key, const Array& p, std::optional<Shape> shape, CallSite site) {
  check_key("bernoulli", key, site);
  if (!p.defined()) {
    fail(site, "bernoulli: p is an empty Array (default-constructed)",
         "pass probabilities as a float array, or a double for one p");
  }
  if (!is_floating(p.dtype())) {
    fail(site, fmt::format("bernoulli: p must have a float dtype, got {}", p.aval().to_string()),
         "convert with astype(p, DType::f32)");
  }
  Shape out = shape.value_or(p.shape());
  check_shape("bernoulli", out, site);
  // p must broadcast to `out` (numpy rules, aligned from the right), never the reverse.
  bool broadcasts = p.rank() <= out.rank();
  for (int64_t axis = 0; broadcasts && axis < p.rank(); ++axis) {
    int64_t size = p.dim(axis), target = out[axis + out.rank() - p.rank()];
    broadcasts = size == target || size == 1;
  }
  if (!broadcasts) {
    fail(site,
         fmt::format("bernoulli: p of shape {} does not broadcast to the shape {}",
                     p.shape().to_string(), out.to_string()),
         "p must broadcast to `shape` (numpy rules), or leave `shape` out to use p's");
  }
  Array u = detail::uniform_between(key, out, p.dtype(), 0, 1, site);
  return less(u, p, site);
}

Array categorical(const Array& key, const Array& logits, int64_t axis, CallSite site) {
  check_key("categorical", key, site);
  if (!logits.defined()) {
    fail(site, "categorical: logits is an empty Array (default-constructed)",
         "pass unnormalised log-probabilities, e.g. log(probabilities)");
  }
  if (!is_floating(logits.dtype())) {
    fail(site,
         fmt::format("categorical: logits must have a float dtype, got {}",
                     logits.aval().to_string()),
         "logits are unnormalised log-probabilities; convert with astype(x, DType::f32)");
  }
  if (logits.rank() == 0) {
    fail(site,
         fmt::format("categorical: logits must have at least one axis, got {}",
                     logits.aval().to_string()),
         "the categories lie along `axis`");
  }
  int64_t dimension = user_axis("categorical", axis, logits.rank(), site);
  if (logits.dim(dimension) == 0) {
    fail(site,
         fmt::format("categorical: logits {} have no categories along axis {}",
                     logits.aval().to_string(), axis),
         "each distribution needs at least one category");
  }
  // Gumbel noise -log(-log(u)), u uniform in [tiny, 1), added to the logits; the argmax
  // is then a sample from softmax(logits).
  DType dtype = logits.dtype();
  Array u =
      detail::uniform_between(key, logits.shape(), dtype, detail::smallest_normal(dtype), 1, site);
  Array gumbel = neg(log(neg(log(u, site), site), site), site);
  return argmax(add(gumbel, logits, site), dimension, DType::i32, site);
}

}  // namespace kiln::random
