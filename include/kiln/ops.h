// User-facing array operations in the NumPy spirit: broadcasting, operators, creation,
// layout, indexing, reductions and contractions. Each op checks shapes and dtypes when it
// is called (errors name the op, the types and your call site) and then runs
// asynchronously on its operands' device.
//
//   using namespace kiln;
//   Array x = arange(6, DType::f32).reshape({2, 3});
//   Array y = where(x > 2.0, exp(x), x * 0.5);      // scalars are weakly typed
//   Array z = matmul(y, ones({3, 4})).sum({1});
#pragma once

#include <concepts>
#include <initializer_list>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/detail/host_values.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/index_mode.h"
#include "kiln/shape.h"

namespace kiln {

// ----- creation -------------------------------------------------------------------------
// Copies row-major values from the host onto `device` (default: the default device).
Array from_host_bytes(const void* data, AbstractValue aval, Device* device, CallSite site);

template <typename T>
Array from_host(std::span<const T> values, Shape shape, Device* device = nullptr,
                CallSite site = {}) {
  detail::check_host_size(values.size(), shape, site);
  return from_host_bytes(values.data(), AbstractValue{std::move(shape), dtype_of<T>()}, device,
                         site);
}
template <typename T>
Array from_host(const std::vector<T>& values, Shape shape, Device* device = nullptr,
                CallSite site = {}) {
  return from_host(std::span<const T>(values), std::move(shape), device, site);
}
template <typename T>
Array from_host(std::initializer_list<T> values, Shape shape, Device* device = nullptr,
                CallSite site = {}) {
  return from_host(std::span<const T>(values.begin(), values.size()), std::move(shape), device,
                   site);
}

// A rank-0 array holding `value` converted to `dtype`.
Array scalar(double value, DType dtype = DType::f32, Device* device = nullptr, CallSite site = {});
Array full(Shape shape, double value, DType dtype = DType::f32, Device* device = nullptr,
           CallSite site = {});
Array zeros(Shape shape, DType dtype = DType::f32, Device* device = nullptr, CallSite site = {});
Array ones(Shape shape, DType dtype = DType::f32, Device* device = nullptr, CallSite site = {});
Array zeros_like(const Array& x, CallSite site = {});
Array ones_like(const Array& x, CallSite site = {});
// Values along `dimension` count 0, 1, 2, ... (lax.broadcasted_iota). Like every creation
// function, the shape comes first and then the dtype.
Array iota(Shape shape, DType dtype = DType::i32, int64_t dimension = 0, Device* device = nullptr,
           CallSite site = {});
// [start, stop) with `step`, like numpy.arange.
Array arange(double start, double stop, double step = 1, DType dtype = DType::i32,
             Device* device = nullptr, CallSite site = {});
Array arange(int64_t stop, DType dtype = DType::i32, Device* device = nullptr, CallSite site = {});
// `num` evenly spaced values from start to stop inclusive, like numpy.linspace.
Array linspace(double start, double stop, int64_t num, DType dtype = DType::f32,
               Device* device = nullptr, CallSite site = {});

// ----- elementwise ----------------------------------------------------------------------
Array neg(const Array& x, CallSite site = {});
Array abs(const Array& x, CallSite site = {});
Array sign(const Array& x, CallSite site = {});
Array exp(const Array& x, CallSite site = {});
Array expm1(const Array& x, CallSite site = {});
Array log(const Array& x, CallSite site = {});
Array log1p(const Array& x, CallSite site = {});
Array sqrt(const Array& x, CallSite site = {});
Array rsqrt(const Array& x, CallSite site = {});
Array tanh(const Array& x, CallSite site = {});
Array logistic(const Array& x, CallSite site = {});
Array sin(const Array& x, CallSite site = {});
Array cos(const Array& x, CallSite site = {});
Array floor(const Array& x, CallSite site = {});
Array ceil(const Array& x, CallSite site = {});
// Rounds half to even, like numpy.round.
Array round(const Array& x, CallSite site = {});
Array is_finite(const Array& x, CallSite site = {});
// Logical not for bool, bitwise not for integers.
Array logical_not(const Array& x, CallSite site = {});

// Binary ops promote their operands (kiln/promotion.h) and broadcast them like numpy.
Array add(const Array& a, const Array& b, CallSite site = {});
Array sub(const Array& a, const Array& b, CallSite site = {});
Array mul(const Array& a, const Array& b, CallSite site = {});
// Integer division truncates toward zero; dividing an integer by zero is an error.
Array div(const Array& a, const Array& b, CallSite site = {});
// Remainder with the sign of the dividend (C fmod / XLA rem).
Array rem(const Array& a, const Array& b, CallSite site = {});
Array pow(const Array& a, const Array& b, CallSite site = {});
// NaN-propagating maximum and minimum.
Array maximum(const Array& a, const Array& b, CallSite site = {});
Array minimum(const Array& a, const Array& b, CallSite site = {});
// Logical for bool, bitwise for integers.
Array bitwise_and(const Array& a, const Array& b, CallSite site = {});
Array bitwise_or(const Array& a, const Array& b, CallSite site = {});
Array bitwise_xor(const Array& a, const Array& b, CallSite site = {});
Array equal(const Array& a, const Array& b, CallSite site = {});
Array not_equal(const Array& a, const Array& b, CallSite site = {});
Array less(const Array& a, const Array& b, CallSite site = {});
Array less_equal(const Array& a, const Array& b, CallSite site = {});
Array greater(const Array& a, const Array& b, CallSite site = {});
Array greater_equal(const Array& a, const Array& b, CallSite site = {});

// pred ? on_true : on_false, broadcasting all three.
Array where(const Array& pred, const Array& on_true, const Array& on_false, CallSite site = {});
Array clip(const Array& x, double low, double high, CallSite site = {});
Array astype(const Array& x, DType dtype, CallSite site = {});

// Operators capture the call site through this operand wrapper.
struct Operand {
  const Array& array;
  CallSite site;
  Operand(const Array& a, CallSite s = {}) : array(a), site(s) {}  // NOLINT: implicit
};

// A C++ number beside an array in an operator, of any arithmetic type (`x * n` for an
// int64_t or size_t n, `x / 2.0f`): weakly typed, as in JAX, so it takes the array's dtype
// when it can (`x * 2.0` stays bf16 for a bf16 x). An integer that a double cannot hold
// exactly (beyond 2^53) is an error at the operator, not a rounded value.
struct WeakScalar {
  double value = 0;
  bool is_float = false;
  bool exact = true;
  template <typename T>
  requires std::is_arithmetic_v<T> WeakScalar(
      T number)  // NOLINT: implicit, so that any number can stand beside an array
      : value(static_cast<double>(number)), is_float(std::is_floating_point_v<T>) {
    if constexpr (std::is_integral_v<T>) {
      // 2^63 (and 2^64) as doubles are outside every 64-bit integer range: compare there
      // instead of converting back, which would overflow.
      constexpr double kLimit =
          std::is_signed_v<T> ? 9223372036854775808.0 : 18446744073709551616.0;
      exact = value < kLimit && static_cast<T>(value) == number;
    }
  }
};

#define KILN_DECLARE_BINARY_OPERATOR(op)        \
  Array operator op(Operand a, const Array& b); \
  Array operator op(Operand a, WeakScalar b);   \
  Array operator op(WeakScalar a, Operand b);
KILN_DECLARE_BINARY_OPERATOR(+)
KILN_DECLARE_BINARY_OPERATOR(-)
KILN_DECLARE_BINARY_OPERATOR(*)
KILN_DECLARE_BINARY_OPERATOR(/)
KILN_DECLARE_BINARY_OPERATOR(%)
KILN_DECLARE_BINARY_OPERATOR(&)
KILN_DECLARE_BINARY_OPERATOR(|)
KILN_DECLARE_BINARY_OPERATOR(^)
KILN_DECLARE_BINARY_OPERATOR(==)
KILN_DECLARE_BINARY_OPERATOR(!=)
KILN_DECLARE_BINARY_OPERATOR(<)
KILN_DECLARE_BINARY_OPERATOR(<=)
KILN_DECLARE_BINARY_OPERATOR(>)
KILN_DECLARE_BINARY_OPERATOR(>=)
#undef KILN_DECLARE_BINARY_OPERATOR
Array operator-(Operand x);
Array operator!(Operand x);
Array operator~(Operand x);

// ----- layout ---------------------------------------------------------------------------
// One entry may be -1 (inferred). Free: the result shares the buffer.
Array reshape(const Array& x, Shape shape, CallSite site = {});
// Reverses the axes when `permutation` is empty.
Array transpose(const Array& x, Dims permutation = {}, CallSite site = {});
// Numpy broadcasting to `shape`.
Array broadcast_to(const Array& x, Shape shape, CallSite site = {});
// lax.broadcast_in_dim: operand axis i becomes output axis dims[i].
Array broadcast_in_dim(const Array& x, Shape shape, Dims broadcast_dimensions, CallSite site = {});
Array expand_dims(const Array& x, int64_t axis, CallSite site = {});
// Removes the given size-1 axes (all size-1 axes when empty).
Array squeeze(const Array& x, Dims axes = {}, CallSite site = {});
Array slice(const Array& x, Dims start, Dims limit, Dims strides = {}, CallSite site = {});
// Slice of `sizes` starting at the integer vector `start`, as jax.lax.dynamic_slice: a
// negative start counts from the end of its axis (start + size), then the window is
// clamped into the array. dynamic_update_slice places `update` there the same way.
Array dynamic_slice(const Array& x, const Array& start, Dims sizes, CallSite site = {});
Array dynamic_update_slice(const Array& x, const Array& update, const Array& start,
                           CallSite site = {});
Array concatenate(std::span<const Array> arrays, int64_t axis = 0, CallSite site = {});
Array concatenate(std::initializer_list<Array> arrays, int64_t axis = 0, CallSite site = {});
Array stack(std::span<const Array> arrays, int64_t axis = 0, CallSite site = {});
Array stack(std::initializer_list<Array> arrays, int64_t axis = 0, CallSite site = {});
// lax.pad: low/high per axis (negative crops), interior padding between elements.
Array pad(const Array& x, Dims low, Dims high, Dims interior = {}, double value = 0,
          CallSite site = {});

// ----- indexing -------------------------------------------------------------------------
// numpy.take along `axis`; out-of-range indices are an error (reported at the next
// synchronization) unless mode is clip or fill.
Array take(const Array& x, const Array& indices, int64_t axis = 0,
           std::optional<IndexMode> mode = std::nullopt, CallSite site = {});
// numpy.take_along_axis: indices of x's rank pick along `axis` (the other axes broadcast
// against x's, as in numpy); indices with one fewer axis than x pick one element per
// position of the other axes: x[..., i[...], ...].
Array take_along_axis(const Array& x, const Array& indices, int64_t axis, CallSite site = {});
Array one_hot(const Array& labels, int64_t num_classes, DType dtype = DType::f32,
              CallSite site = {});

// ----- reductions -----------------------------------------------------------------------
// Empty axes reduce over everything. Sums of integers/bool accumulate in the input dtype
// (bool sums as i32).
Array sum(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});
Array mean(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});
Array max(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});
Array min(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});
Array prod(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});
Array argmax(const Array& x, int64_t axis, DType index_dtype = DType::i32, CallSite site = {});
Array argmin(const Array& x, int64_t axis, DType index_dtype = DType::i32, CallSite site = {});
Array cumsum(const Array& x, int64_t axis, bool reverse = false, CallSite site = {});

// ----- contractions, convolution, pooling -----------------------------------------------
// numpy.matmul: 1-D operands are promoted to matrices; batch axes broadcast.
Array matmul(const Array& a, const Array& b, CallSite site = {});
Array dot_general(const Array& a, const Array& b, Dims lhs_contracting, Dims rhs_contracting,
                  Dims lhs_batch = {}, Dims rhs_batch = {},
                  std::optional<DType> preferred_element_type = std::nullopt, CallSite site = {});

enum class Padding { kValid, kSame };
// x: NHWC, w: HWIO (I = C / groups). Output NHWC.
Array conv2d(const Array& x, const Array& w, Dims strides = {1, 1},
             Padding padding = Padding::kValid, Dims dilation = {1, 1}, int64_t groups = 1,
             CallSite site = {});
// The general primitive: explicit padding and lhs (input) dilation.
Array conv_general_dilated(const Array& x, const Array& w, Dims window_strides, Dims padding_low,
                           Dims padding_high, Dims lhs_dilation, Dims rhs_dilation,
                           int64_t feature_group_count = 1, CallSite site = {});
// Pooling over the H and W axes of an NHWC array.
Array max_pool(const Array& x, Dims window, Dims strides, Padding padding = Padding::kValid,
               CallSite site = {});
// Averages count only the cells inside the array (padding excluded), like PyTorch's
// count_include_pad=False.
Array avg_pool(const Array& x, Dims window, Dims strides, Padding padding = Padding::kValid,
               CallSite site = {});

// ----- bits, special functions, sorting --------------------------------------------------
// Integer shifts (operands promote and broadcast like add). As in XLA, an amount outside
// [0, bits) shifts everything out: shift_left and shift_right_logical give 0,
// shift_right_arithmetic gives the sign fill (0 or -1).
Array shift_left(const Array& x, const Array& amount, CallSite site = {});
Array shift_right_logical(const Array& x, const Array& amount, CallSite site = {});
Array shift_right_arithmetic(const Array& x, const Array& amount, CallSite site = {});
// Reinterprets each element's bits as `dtype`, which must have the same width
// (u32/i32/f32, i64/f64, f16/bf16), like lax.bitcast_convert_type.
//   bitcast_convert_type(scalar(1.0f), DType::u32)   // 0x3f800000
Array bitcast_convert_type(const Array& x, DType dtype, CallSite site = {});
// The error function and its inverse (floats; erf_inv(+-1) = +-inf, NaN outside [-1, 1]).
Array erf(const Array& x, CallSite site = {});
Array erf_inv(const Array& x, CallSite site = {});

// Stable sort along `axis` (default the last). Floats order -inf < ... < -0 == 0 < ... <
// inf < NaN, like numpy.sort.
Array sort(const Array& x, int64_t axis = -1, CallSite site = {});
// lax.sort: sorts `operands` (one shape, any dtypes) together along `axis`, ordered
// lexicographically by the first `num_keys` of them; returns them reordered.
std::vector<Array> sort(std::span<const Array> operands, int64_t axis, int64_t num_keys = 1,
                        CallSite site = {});
// lax.sort_key_val: sorts `keys` and applies the same permutation to `values`.
std::pair<Array, Array> sort_key_val(const Array& keys, const Array& values, int64_t axis = -1,
                                     CallSite site = {});
// Indices that sort x stably along `axis`, like numpy.argsort(kind="stable").
Array argsort(const Array& x, int64_t axis = -1, DType index_dtype = DType::i32,
              CallSite site = {});

}  // namespace kiln
