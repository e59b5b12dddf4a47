// jax.numpy functions composed from kiln's primitives (issue 44): each is written with the
// ops of kiln/ops.h, so grad, vmap and jit work through it as through what it is made of,
// and it needs no kernel or rule of its own. Names, defaults and edge cases follow
// jax.numpy; tests/ops/jnp_crosscheck_test.cc checks values and gradients against the real
// JAX. docs/api_coverage.md lists what kiln has of jax.numpy, jax.lax and jax.nn.
//
//   Array x = arange(12, DType::f32).reshape({3, 4});
//   Array y = logsumexp(tril(x), {1});           // rows' log-sum-exp below the diagonal
//   std::vector<Array> parts = split(roll(x, 1, 1), 2, 1);
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/shape.h"

namespace kiln {

// ----- elementwise ----------------------------------------------------------------------
Array square(const Array& x, CallSite site = {});
// Booleans; false for every element of an integer or bool array.
Array isnan(const Array& x, CallSite site = {});
Array isinf(const Array& x, CallSite site = {});
Array isfinite(const Array& x, CallSite site = {});
// numpy.clip with array bounds (broadcasting): minimum(maximum(x, low), high), so where
// low > high the result is high, as in jax.numpy.
Array clip(const Array& x, const Array& low, const Array& high, CallSite site = {});

// ----- rearranging ----------------------------------------------------------------------
// Reverses the order of elements along `axes` (empty: every axis).
Array flip(const Array& x, Dims axes = {}, CallSite site = {});
// Rolls elements by `shift` along `axis` (elements leaving one end come back at the
// other); without an axis, over the flattened array, reshaped back.
Array roll(const Array& x, int64_t shift, std::optional<int64_t> axis = std::nullopt,
           CallSite site = {});
// One shift per axis, in turn.
Array roll(const Array& x, Dims shifts, Dims axes, CallSite site = {});
Array swapaxes(const Array& x, int64_t axis1, int64_t axis2, CallSite site = {});
// Moves axis `source` to position `destination`, the others keeping their order.
Array moveaxis(const Array& x, int64_t source, int64_t destination, CallSite site = {});
// The lower (tril) or upper (triu) triangle of the last two axes: elements with column -
// row <= k (tril) or >= k (triu) kept, the others zero.
Array tril(const Array& x, int64_t k = 0, CallSite site = {});
Array triu(const Array& x, int64_t k = 0, CallSite site = {});
// Each element `repeats` times in a row along `axis` (without an axis, of the flattened
// array). jax.numpy's per-element repeat counts (an array) are not provided: their result's
// shape depends on the counts' values.
Array repeat(const Array& x, int64_t repeats, std::optional<int64_t> axis = std::nullopt,
             CallSite site = {});
// numpy.tile: the array repeated reps[i] times along axis i; reps shorter than the rank
// count from the last axis, longer ones add leading axes.
Array tile(const Array& x, Dims reps, CallSite site = {});
// numpy.split into `sections` equal parts along `axis` (an error when the axis does not
// divide), or at `indices`, which must increase within [0, size] (as in jax.numpy; NumPy
// also takes negative ones).
std::vector<Array> split(const Array& x, int64_t sections, int64_t axis = 0, CallSite site = {});
std::vector<Array> split(const Array& x, const Dims& indices, int64_t axis, CallSite site = {});
// numpy.array_split: `sections` parts whose sizes differ by at most one, the larger first.
std::vector<Array> array_split(const Array& x, int64_t sections, int64_t axis = 0,
                               CallSite site = {});

// numpy.pad / jax.numpy.pad with a mode: pad_width[i] = (before, after) for axis i.
// kConstant fills with `constant`; kEdge repeats the end elements; kReflect mirrors about
// them (excluding them: 1 2 3 -> 3 2 | 1 2 3 | 2 1); kSymmetric mirrors including them
// (2 1 | 1 2 3 | 3 2); kWrap continues from the other end. Widths past the axis's size
// repeat the pattern, as NumPy's do. kLinearRamp ramps from `constant` (numpy's end_values)
// to the edge value; kMaximum, kMinimum, kMean and kMedian repeat that statistic of the
// whole axis (numpy's stat_length=None; integers round the mean and median half to even).
// Axes are padded in order, each seeing the padding of the axes before it, as NumPy's.
// (lax's pad, with negative and interior padding, is pad(x, low, high, interior, value) in
// kiln/ops.h.)
enum class PadMode {
  kConstant,
  kEdge,
  kReflect,
  kSymmetric,
  kWrap,
  kLinearRamp,
  kMaximum,
  kMinimum,
  kMean,
  kMedian
};
Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& pad_width,
          PadMode mode = PadMode::kConstant, double constant = 0, CallSite site = {});

// ----- reductions (empty axes: every axis) ----------------------------------------------
// Whether any / every element is nonzero (NaN counts as nonzero); true for all() of an
// empty array, false for any().
Array any(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});
Array all(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});
// Variance and standard deviation: the mean of squared deviations from the mean, divided
// by N - ddof instead of N when ddof > 0. Integer input gives f32.
Array var(const Array& x, Dims axes = {}, int64_t ddof = 0, bool keepdims = false,
          CallSite site = {});
Array std(const Array& x, Dims axes = {}, int64_t ddof = 0, bool keepdims = false,
          CallSite site = {});
// With a mask, as jax.numpy's where=: `where` (bool, broadcasting to x) selects the
// elements that take part. sum gives 0 and prod 1 where nothing is selected, mean NaN
// (0 / 0, as jax.numpy). max and min need `initial` (as jax.numpy does with where=), which
// always takes part: max(x, axes, keepdims, mask, -inf) is -inf where nothing is selected.
Array sum(const Array& x, Dims axes, bool keepdims, const Array& where, CallSite site = {});
Array prod(const Array& x, Dims axes, bool keepdims, const Array& where, CallSite site = {});
Array mean(const Array& x, Dims axes, bool keepdims, const Array& where, CallSite site = {});
Array max(const Array& x, Dims axes, bool keepdims, const Array& where, double initial,
          CallSite site = {});
Array min(const Array& x, Dims axes, bool keepdims, const Array& where, double initial,
          CallSite site = {});
// lax.cumprod / cummax / cummin (jax.numpy's cumprod without its flattening default):
// the running product, maximum or minimum along `axis`, from the end when `reverse`. Bool
// products count in i32.
Array cumprod(const Array& x, int64_t axis, bool reverse = false, CallSite site = {});
Array cummax(const Array& x, int64_t axis, bool reverse = false, CallSite site = {});
Array cummin(const Array& x, int64_t axis, bool reverse = false, CallSite site = {});
// lax.top_k: the k largest elements along the last axis, largest first (equal ones in
// index order; NaN above everything and +0 above -0, as XLA orders them), and their
// indices (i32). The values' gradient goes to the picked elements.
std::pair<Array, Array> top_k(const Array& x, int64_t k, CallSite site = {});
// log(sum(exp(x))) computed without overflow (the maximum is taken out first, and its
// gradient stopped, as jax.nn.logsumexp does); -inf for an empty or all -inf reduction.
Array logsumexp(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});

// ----- contraction ----------------------------------------------------------------------
// numpy.einsum: "ij,jk->ik" (explicit output), "ij,jk" (implicit: the labels used once,
// sorted), "...ij,...jk->...ik" (the ellipsis axes broadcast like numpy's trailing axes),
// "ii->i" (a diagonal), "ii" (a trace). Operands promote to their common dtype. Operands
// are contracted left to right (jax.numpy searches for the cheapest order among three or
// more: give the cheap pair first).
Array einsum(std::string_view subscripts, const std::vector<Array>& operands, CallSite site = {});
Array einsum(std::string_view subscripts, const Array& a, CallSite site = {});
Array einsum(std::string_view subscripts, const Array& a, const Array& b, CallSite site = {});

namespace linalg {
// jax.numpy.linalg.norm with ord=None: the square root of the sum of squares over `axes`
// (every axis when empty), which is the 2-norm of a vector and the Frobenius norm of a
// matrix.
Array norm(const Array& x, Dims axes = {}, bool keepdims = false, CallSite site = {});
// jax.numpy.linalg.vector_norm: sum(|x|^ord)^(1/ord) over `axes` (every axis when empty);
// ord = inf is the largest |x|, -inf the smallest, 0 the count of nonzero elements.
Array vector_norm(const Array& x, double ord = 2, Dims axes = {}, bool keepdims = false,
                  CallSite site = {});
}  // namespace linalg

}  // namespace kiln
