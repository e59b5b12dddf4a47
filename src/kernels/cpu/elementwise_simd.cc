// Highway implementation of kernels/cpu/elementwise_simd.h. This file is compiled once per
// SIMD target by hwy/foreach_target.h. Highway's math functions do not handle every IEEE
// special value (NaN, overflow, subnormal inputs); the wrappers below patch those lanes so
// the results agree with the reference kernels (checked by tests/prims/fast_math_test.cc).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/elementwise_simd.h"
#include "kernels/special_math.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D, class V>
V nan_like(D d) {
  return hn::Set(d, std::numeric_limits<hn::TFromD<D>>::quiet_NaN());
}

// exp with overflow to +inf and NaN passed through (Highway returns garbage / 0 there).
template <class D, class V>
V safe_exp(D d, V x) {
  using T = hn::TFromD<D>;
  const T max_arg = sizeof(T) == 4 ? T(88.72283935546875) : T(709.782712893384);
  V y = hn::Exp(d, x);
  y = hn::IfThenElse(hn::Gt(x, hn::Set(d, max_arg)), hn::Set(d, std::numeric_limits<T>::infinity()),
                     y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// log for every input: negative -> NaN, 0 -> -inf, +inf -> +inf, subnormals rescaled into
// the normal range first (Highway assumes normal inputs).
template <class D, class V>
V safe_log(D d, V x) {
  using T = hn::TFromD<D>;
  const V smallest_normal = hn::Set(d, std::numeric_limits<T>::min());
  const T scale_exponent = sizeof(T) == 4 ? T(32) : T(64);
  const V scale = hn::Set(d, sizeof(T) == 4 ? T(4294967296.0) : T(18446744073709551616.0));
  const auto subnormal = hn::And(hn::Gt(x, hn::Zero(d)), hn::Lt(x, smallest_normal));
  V scaled = hn::IfThenElse(subnormal, hn::Mul(x, scale), x);
  V y = hn::Log(d, scaled);
  y = hn::IfThenElse(
      subnormal, hn::Sub(y, hn::Set(d, scale_exponent * T(0.693147180559945309417232121458))), y);
  const T inf = std::numeric_limits<T>::infinity();
  y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Set(d, -inf), y);
  y = hn::IfThenElse(hn::Eq(x, hn::Set(d, inf)), x, y);
  y = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), nan_like<D, V>(d), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

template <class D, class V>
V safe_tanh(D d, V x) {
  using T = hn::TFromD<D>;
  // Beyond |x| = 20 (f32) / 40 (f64) tanh is +-1 to the last bit.
  const V limit = hn::Set(d, sizeof(T) == 4 ? T(20) : T(40));
  V y = hn::Tanh(d, x);
  y = hn::IfThenElse(hn::Gt(hn::Abs(x), limit), hn::CopySign(hn::Set(d, T(1)), x), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// Stable logistic: with e = exp(-|x|), 1/(1+e) for x >= 0 and e/(1+e) for x < 0.
template <class D, class V>
V safe_logistic(D d, V x) {
  using T = hn::TFromD<D>;
  const V one = hn::Set(d, T(1));
  V e = safe_exp(d, hn::Neg(hn::Abs(x)));
  V r = hn::Div(one, hn::Add(one, e));
  V y = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(e, r), r);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// erf_inv of f64 lanes by M. Giles' single-precision approximation ("Approximating the
// erfinv function", GPU Computing Gems, 2011): a polynomial in w = -log(1 - x^2), one for
// the centre (w < 5) and one in sqrt(w) for the tails. XLA computes jax.random.normal's
// erf_inv with the same polynomials in f32; evaluated here in f64 and rounded once to f32,
// the result is within 2 ulps of the correctly rounded value (measured on every 37th f32 in
// (0, 1): 75% exact or 1 ulp), at a tenth of the reference's cost, which refines by Halley
// steps on erf.
template <class D, class V>
V giles_erf_inv(D d, V x) {
  using T = hn::TFromD<D>;
  const V one = hn::Set(d, T(1));
  V w = hn::Neg(safe_log(d, hn::Mul(hn::Sub(one, x), hn::Add(one, x))));
  V c = hn::Sub(w, hn::Set(d, T(2.5)));
  V central = hn::Set(d, T(2.81022636e-08));
  for (double coefficient : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                             -0.00125372503, -0.00417768164, 0.246640727, 1.50140941}) {
    central = hn::MulAdd(central, c, hn::Set(d, T(coefficient)));
  }
  V t = hn::Sub(hn::Sqrt(w), hn::Set(d, T(3)));
  V tail = hn::Set(d, T(-0.000200214257));
  for (double coefficient : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                             -0.0076224613, 0.00943887047, 1.00167406, 2.83297682}) {
    tail = hn::MulAdd(tail, t, hn::Set(d, T(coefficient)));
  }
  V y = hn::Mul(hn::IfThenElse(hn::Lt(w, hn::Set(d, T(5))), central, tail), x);
  // erf_inv(+-1) = +-inf (the tail polynomial at w = inf is not); NaN and |x| > 1 are NaN
  // already (the log of a negative number).
  return hn::IfThenElse(hn::Eq(hn::Abs(x), one),
                        hn::CopySign(hn::Set(d, std::numeric_limits<T>::infinity()), x), y);
}

template <class D, class V>
V vector_erf_inv(D d, V x) {
  using T = hn::TFromD<D>;
  HWY_ALIGN T buffer[hn::MaxLanes(d)];
  hn::Store(x, d, buffer);
  if constexpr (sizeof(T) == 4) {
    const hn::ScalableTag<double> d64;
    const hn::Rebind<float, decltype(d64)> d32;
    for (size_t i = 0; i < hn::Lanes(d); i += hn::Lanes(d64)) {
      auto wide = hn::PromoteTo(d64, hn::LoadU(d32, buffer + i));
      hn::StoreU(hn::DemoteTo(d32, giles_erf_inv(d64, wide)), d32, buffer + i);
    }
  } else {
    for (size_t i = 0; i < hn::Lanes(d); ++i) buffer[i] = special::erf_inv(buffer[i]);
  }
  return hn::Load(d, buffer);
}

// NaN-propagating max/min (the hardware instructions return an operand instead).
template <class D, class V>
V nan_max(D, V a, V b) {
  V m = hn::Max(a, b);
  m = hn::IfThenElse(hn::IsNaN(b), b, m);
  return hn::IfThenElse(hn::IsNaN(a), a, m);
}
template <class D, class V>
V nan_min(D, V a, V b) {
  V m = hn::Min(a, b);
  m = hn::IfThenElse(hn::IsNaN(b), b, m);
  return hn::IfThenElse(hn::IsNaN(a), a, m);
}

template <UnaryOp kOp, class D, class V>
HWY_INLINE V apply_unary(D d, V x) {
  using T = hn::TFromD<D>;
  if constexpr (kOp == UnaryOp::kNeg) return hn::Neg(x);
  if constexpr (kOp == UnaryOp::kAbs) return hn::Abs(x);
  if constexpr (kOp == UnaryOp::kSqrt) return hn::Sqrt(x);
  if constexpr (kOp == UnaryOp::kRsqrt) return hn::Div(hn::Set(d, T(1)), hn::Sqrt(x));
  if constexpr (kOp == UnaryOp::kFloor) return hn::Floor(x);
  if constexpr (kOp == UnaryOp::kCeil) return hn::Ceil(x);
  if constexpr (kOp == UnaryOp::kRound) return hn::Round(x);
  if constexpr (kOp == UnaryOp::kExp) return safe_exp(d, x);
  if constexpr (kOp == UnaryOp::kLog) return safe_log(d, x);
  if constexpr (kOp == UnaryOp::kTanh) return safe_tanh(d, x);
  if constexpr (kOp == UnaryOp::kLogistic) return safe_logistic(d, x);
  if constexpr (kOp == UnaryOp::kErfInv) return vector_erf_inv(d, x);
  if constexpr (kOp == UnaryOp::kCopy) return x;
}

template <BinaryOp kOp, class D, class V>
HWY_INLINE V apply_binary(D d, V a, V b) {
  if constexpr (kOp == BinaryOp::kAdd) return hn::Add(a, b);
  if constexpr (kOp == BinaryOp::kSub) return hn::Sub(a, b);
  if constexpr (kOp == BinaryOp::kMul) return hn::Mul(a, b);
  if constexpr (kOp == BinaryOp::kDiv) return hn::Div(a, b);
  if constexpr (kOp == BinaryOp::kMax) return nan_max(d, a, b);
  if constexpr (kOp == BinaryOp::kMin) return nan_min(d, a, b);
}

// Runs of at least this many elements use non-temporal (streaming) stores: such a run
// belongs to an array far larger than the caches (chunks grow with the array), whose
// output would only evict useful lines, and skipping the read-for-ownership saves a third
// of the memory traffic of a unary op.
constexpr size_t kStreamElements = size_t{1} << 15;

// Software prefetch distance in elements (4 KiB of f32). The math kernels spend long enough
// per vector that the hardware prefetcher alone leaves loads waiting on memory: measured,
// exp over 16M floats went from 0.75x to 1.0x of the STREAM add bandwidth with it.
// Prefetching past the end of an array is harmless (prefetches never fault).
constexpr size_t kPrefetchAhead = 1024;

// How a loop stores its results. Non-temporal stores are weakly ordered: a fence must
// follow them before another thread may read the results. A kernel call fences its own
// stores; a fused program's blocks leave that to the end of the chunk (one fence per
// block made the fused loop a third slower).
enum class Stores : uint8_t {
  kAuto,            // regular stores, or streamed and fenced for a run >= kStreamElements
  kStream,          // streamed and fenced
  kStreamUnfenced,  // streamed; the caller fences (flush_streams) before the results are read
};

// Writes y[0, n): full(i) gives the vector for elements [i, i + lanes); partial(i, count)
// computes `count` < lanes elements through a padded vector and stores them. Every element
// goes through the same vector code wherever it sits, so results do not depend on
// alignment, chunking or the store used.
template <typename T, class Full, class Partial>
HWY_INLINE void store_all(T* HWY_RESTRICT y, size_t n, Stores stores, const Full& full,
                          const Partial& partial) {
  const hn::ScalableTag<T> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  if (stores != Stores::kAuto || n >= kStreamElements) {
    size_t misaligned = (reinterpret_cast<uintptr_t>(y) % (lanes * sizeof(T))) / sizeof(T);
    if (misaligned != 0) {
      i = std::min(n, lanes - misaligned);
      partial(0, i);
    }
    for (; i + lanes <= n; i += lanes) hn::Stream(full(i), d, y + i);
    if (stores != Stores::kStreamUnfenced) hwy::FlushStream();
  } else {
    for (; i + lanes <= n; i += lanes) hn::StoreU(full(i), d, y + i);
  }
  if (i < n) partial(i, n - i);
}

template <UnaryOp kOp, typename T>
void unary_loop(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t n, Stores stores) {
  const hn::ScalableTag<T> d;
  store_all(
      y, n, stores,
      [&](size_t i) {
        hwy::Prefetch(x + i + kPrefetchAhead);
        return apply_unary<kOp>(d, hn::LoadU(d, x + i));
      },
      [&](size_t i, size_t count) {
        HWY_ALIGN T buffer[hn::MaxLanes(d)] = {};
        std::memcpy(buffer, x + i, count * sizeof(T));
        hn::Store(apply_unary<kOp>(d, hn::Load(d, buffer)), d, buffer);
        std::memcpy(y + i, buffer, count * sizeof(T));
      });
}

template <BinaryOp kOp, typename T>
void binary_loop(const T* HWY_RESTRICT a, size_t a_stride, const T* HWY_RESTRICT b, size_t b_stride,
                 T* HWY_RESTRICT y, size_t n, Stores stores) {
  const hn::ScalableTag<T> d;
  auto partial = [&](size_t i, size_t count) {
    HWY_ALIGN T buffer_a[hn::MaxLanes(d)] = {};
    HWY_ALIGN T buffer_b[hn::MaxLanes(d)] = {};
    for (size_t j = 0; j < count; ++j) {
      buffer_a[j] = a[a_stride * (i + j)];
      buffer_b[j] = b[b_stride * (i + j)];
    }
    hn::Store(apply_binary<kOp>(d, hn::Load(d, buffer_a), hn::Load(d, buffer_b)), d, buffer_a);
    std::memcpy(y + i, buffer_a, count * sizeof(T));
  };
  if (a_stride == 1 && b_stride == 1) {
    store_all(
        y, n, stores,
        [&](size_t i) {
          hwy::Prefetch(a + i + kPrefetchAhead);
          hwy::Prefetch(b + i + kPrefetchAhead);
          return apply_binary<kOp>(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i));
        },
        partial);
  } else if (a_stride == 1) {
    const auto vb = hn::Set(d, b[0]);
    store_all(
        y, n, stores,
        [&](size_t i) {
          hwy::Prefetch(a + i + kPrefetchAhead);
          return apply_binary<kOp>(d, hn::LoadU(d, a + i), vb);
        },
        partial);
  } else if (b_stride == 1) {
    const auto va = hn::Set(d, a[0]);
    store_all(
        y, n, stores,
        [&](size_t i) {
          hwy::Prefetch(b + i + kPrefetchAhead);
          return apply_binary<kOp>(d, va, hn::LoadU(d, b + i));
        },
        partial);
  } else {
    const auto value = apply_binary<kOp>(d, hn::Set(d, a[0]), hn::Set(d, b[0]));
    store_all(
        y, n, stores, [&](size_t) { return value; }, partial);
  }
}

template <typename T>
void unary_dispatch(UnaryOp op, const T* x, T* y, size_t n, Stores stores) {
  switch (op) {
    case UnaryOp::kNeg:
      return unary_loop<UnaryOp::kNeg>(x, y, n, stores);
    case UnaryOp::kAbs:
      return unary_loop<UnaryOp::kAbs>(x, y, n, stores);
    case UnaryOp::kSqrt:
      return unary_loop<UnaryOp::kSqrt>(x, y, n, stores);
    case UnaryOp::kRsqrt:
      return unary_loop<UnaryOp::kRsqrt>(x, y, n, stores);
    case UnaryOp::kFloor:
      return unary_loop<UnaryOp::kFloor>(x, y, n, stores);
    case UnaryOp::kCeil:
      return unary_loop<UnaryOp::kCeil>(x, y, n, stores);
    case UnaryOp::kRound:
      return unary_loop<UnaryOp::kRound>(x, y, n, stores);
    case UnaryOp::kExp:
      return unary_loop<UnaryOp::kExp>(x, y, n, stores);
    case UnaryOp::kLog:
      return unary_loop<UnaryOp::kLog>(x, y, n, stores);
    case UnaryOp::kTanh:
      return unary_loop<UnaryOp::kTanh>(x, y, n, stores);
    case UnaryOp::kLogistic:
      return unary_loop<UnaryOp::kLogistic>(x, y, n, stores);
    case UnaryOp::kErfInv:
      return unary_loop<UnaryOp::kErfInv>(x, y, n, stores);
    case UnaryOp::kCopy:
      return unary_loop<UnaryOp::kCopy>(x, y, n, stores);
  }
}

template <typename T>
void binary_dispatch(BinaryOp op, const T* a, size_t sa, const T* b, size_t sb, T* y, size_t n,
                     Stores stores) {
  switch (op) {
    case BinaryOp::kAdd:
      return binary_loop<BinaryOp::kAdd>(a, sa, b, sb, y, n, stores);
    case BinaryOp::kSub:
      return binary_loop<BinaryOp::kSub>(a, sa, b, sb, y, n, stores);
    case BinaryOp::kMul:
      return binary_loop<BinaryOp::kMul>(a, sa, b, sb, y, n, stores);
    case BinaryOp::kDiv:
      return binary_loop<BinaryOp::kDiv>(a, sa, b, sb, y, n, stores);
    case BinaryOp::kMax:
      return binary_loop<BinaryOp::kMax>(a, sa, b, sb, y, n, stores);
    case BinaryOp::kMin:
      return binary_loop<BinaryOp::kMin>(a, sa, b, sb, y, n, stores);
  }
}

Stores stores_for(bool stream) {
  return stream ? Stores::kStream : Stores::kAuto;
}
void UnaryF32(UnaryOp op, const float* x, float* y, size_t n, bool stream) {
  unary_dispatch(op, x, y, n, stores_for(stream));
}
void UnaryF64(UnaryOp op, const double* x, double* y, size_t n, bool stream) {
  unary_dispatch(op, x, y, n, stores_for(stream));
}
void BinaryF32(BinaryOp op, const float* a, size_t sa, const float* b, size_t sb, float* y,
               size_t n, bool stream) {
  binary_dispatch(op, a, sa, b, sb, y, n, stores_for(stream));
}
void BinaryF64(BinaryOp op, const double* a, size_t sa, const double* b, size_t sb, double* y,
               size_t n, bool stream) {
  binary_dispatch(op, a, sa, b, sb, y, n, stores_for(stream));
}

template <CompareOp kOp, typename T>
HWY_INLINE bool compare_scalar(T a, T b) {
  if constexpr (kOp == CompareOp::kEq) return a == b;
  if constexpr (kOp == CompareOp::kNe) return a != b;
  if constexpr (kOp == CompareOp::kLt) return a < b;
  if constexpr (kOp == CompareOp::kLe) return a <= b;
  if constexpr (kOp == CompareOp::kGt) return a > b;
  if constexpr (kOp == CompareOp::kGe) return a >= b;
}

// The vector comparisons agree with C++'s operators on every input: ordered for all but
// "not equal", which is true when either side is NaN (hence not-Eq rather than Highway's
// ordered Ne).
template <CompareOp kOp, class V>
HWY_INLINE auto compare_vector(V a, V b) {
  if constexpr (kOp == CompareOp::kEq) return hn::Eq(a, b);
  if constexpr (kOp == CompareOp::kNe) return hn::Not(hn::Eq(a, b));
  if constexpr (kOp == CompareOp::kLt) return hn::Lt(a, b);
  if constexpr (kOp == CompareOp::kLe) return hn::Le(a, b);
  if constexpr (kOp == CompareOp::kGt) return hn::Gt(a, b);
  if constexpr (kOp == CompareOp::kGe) return hn::Ge(a, b);
}

// y[i] = a[i] op b[i] as bytes 0/1 (C++ bools). f32 compares a vector at a time and narrows
// the lane masks to bytes; f64 (no hot path uses it) compares element by element.
template <CompareOp kOp, typename T>
void compare_loop(const T* HWY_RESTRICT a, size_t a_stride, const T* HWY_RESTRICT b,
                  size_t b_stride, uint8_t* HWY_RESTRICT y, size_t n) {
  size_t i = 0;
  if constexpr (sizeof(T) == 4) {
    const hn::ScalableTag<T> d;
    const hn::RebindToSigned<decltype(d)> di;
    const hn::Rebind<uint8_t, decltype(di)> d8;
    const size_t lanes = hn::Lanes(d);
    const auto one = hn::Set(di, 1);
    const auto a_repeated = hn::Set(d, a[0]);
    const auto b_repeated = hn::Set(d, b[0]);
    for (; i + lanes <= n; i += lanes) {
      const auto va = a_stride != 0 ? hn::LoadU(d, a + i) : a_repeated;
      const auto vb = b_stride != 0 ? hn::LoadU(d, b + i) : b_repeated;
      const auto ones = hn::IfThenElseZero(hn::RebindMask(di, compare_vector<kOp>(va, vb)), one);
      hn::StoreU(hn::DemoteTo(d8, ones), d8, y + i);
    }
  }
  for (; i < n; ++i) y[i] = compare_scalar<kOp>(a[i * a_stride], b[i * b_stride]) ? 1 : 0;
}

template <typename T>
void compare_dispatch(CompareOp op, const T* a, size_t sa, const T* b, size_t sb, uint8_t* y,
                      size_t n) {
  switch (op) {
    case CompareOp::kEq:
      return compare_loop<CompareOp::kEq>(a, sa, b, sb, y, n);
    case CompareOp::kNe:
      return compare_loop<CompareOp::kNe>(a, sa, b, sb, y, n);
    case CompareOp::kLt:
      return compare_loop<CompareOp::kLt>(a, sa, b, sb, y, n);
    case CompareOp::kLe:
      return compare_loop<CompareOp::kLe>(a, sa, b, sb, y, n);
    case CompareOp::kGt:
      return compare_loop<CompareOp::kGt>(a, sa, b, sb, y, n);
    case CompareOp::kGe:
      return compare_loop<CompareOp::kGe>(a, sa, b, sb, y, n);
  }
}

// y[i] = pred[i] ? on_true[i] : on_false[i], each operand a run or one repeated element.
// Values move as bits, so NaN payloads and signed zeros pass unchanged.
template <typename T>
void select_loop(const uint8_t* HWY_RESTRICT pred, size_t pred_stride,
                 const T* HWY_RESTRICT on_true, size_t true_stride, const T* HWY_RESTRICT on_false,
                 size_t false_stride, T* HWY_RESTRICT y, size_t n, Stores stores) {
  auto element = [&](size_t i) {
    return pred[i * pred_stride] != 0 ? on_true[i * true_stride] : on_false[i * false_stride];
  };
  if constexpr (sizeof(T) == 4) {
    const hn::ScalableTag<T> d;
    const hn::RebindToUnsigned<decltype(d)> du;
    const hn::Rebind<uint8_t, decltype(du)> d8;
    const auto true_repeated = hn::Set(d, on_true[0]);
    const auto false_repeated = hn::Set(d, on_false[0]);
    const auto pred_repeated = hn::Set(du, pred[0]);
    store_all(
        y, n, stores,
        [&](size_t i) {
          const auto p =
              pred_stride != 0 ? hn::PromoteTo(du, hn::LoadU(d8, pred + i)) : pred_repeated;
          const auto t = true_stride != 0 ? hn::LoadU(d, on_true + i) : true_repeated;
          const auto f = false_stride != 0 ? hn::LoadU(d, on_false + i) : false_repeated;
          return hn::IfThenElse(hn::RebindMask(d, hn::Ne(p, hn::Zero(du))), t, f);
        },
        [&](size_t i, size_t count) {
          for (size_t j = i; j < i + count; ++j) y[j] = element(j);
        });
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = element(i);
  }
}

// The steps of a fused program, one vector loop each: a block's slots stay in L1 cache
// from one step to the next, and a step costs one switch instead of a kernel call.
template <typename T>
void run_program(const ProgramStep* steps, size_t count, void* const* slots, size_t n) {
  using Form = ProgramStep::Form;
  auto values = [&](uint16_t slot) { return static_cast<const T*>(slots[slot]); };
  auto bools = [&](uint16_t slot) { return static_cast<const uint8_t*>(slots[slot]); };
  for (size_t s = 0; s < count; ++s) {
    const ProgramStep& step = steps[s];
    const Stores stores = step.stream ? Stores::kStreamUnfenced : Stores::kAuto;
    const size_t a_stride = step.a_scalar ? 0 : 1, b_stride = step.b_scalar ? 0 : 1;
    switch (step.form) {
      case Form::kUnary:
        unary_dispatch(static_cast<UnaryOp>(step.op), values(step.a),
                       static_cast<T*>(slots[step.y]), n, stores);
        break;
      case Form::kBinary:
        binary_dispatch(static_cast<BinaryOp>(step.op), values(step.a), a_stride, values(step.b),
                        b_stride, static_cast<T*>(slots[step.y]), n, stores);
        break;
      case Form::kCompare:
        compare_dispatch(static_cast<CompareOp>(step.op), values(step.a), a_stride, values(step.b),
                         b_stride, static_cast<uint8_t*>(slots[step.y]), n);
        break;
      case Form::kSelect:
        select_loop(bools(step.a), a_stride, values(step.b), b_stride, values(step.c),
                    step.c_scalar ? 0 : 1, static_cast<T*>(slots[step.y]), n, stores);
        break;
      case Form::kCopyBools:
        std::memcpy(slots[step.y], slots[step.a], n);
        break;
    }
  }
}
void RunProgramF32(const ProgramStep* steps, size_t count, void* const* slots, size_t n) {
  run_program<float>(steps, count, slots, n);
}
void RunProgramF64(const ProgramStep* steps, size_t count, void* const* slots, size_t n) {
  run_program<double>(steps, count, slots, n);
}

// y = pred ? on_true : on_false for 4-byte elements, moved as bit patterns (so f32, i32
// and u32 share it and NaN payloads pass unchanged). The bool predicate is read as bytes
// and widened to a lane mask. Operands may be scalars (stride 0).
void Select32(const bool* pred, size_t pred_stride, const uint32_t* on_true, size_t true_stride,
              const uint32_t* on_false, size_t false_stride, uint32_t* y, size_t n) {
  const hn::ScalableTag<uint32_t> d;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const size_t lanes = hn::Lanes(d);
  const auto zero = hn::Zero(d);
  size_t i = 0;
  if (pred_stride == 1) {
    const auto scalar_true = hn::Set(d, on_true[0]);
    const auto scalar_false = hn::Set(d, on_false[0]);
    const auto* p8 = reinterpret_cast<const uint8_t*>(pred);
    for (; i + lanes <= n; i += lanes) {
      const auto mask = hn::Ne(hn::PromoteTo(d, hn::LoadU(d8, p8 + i)), zero);
      const auto t = true_stride ? hn::LoadU(d, on_true + i) : scalar_true;
      const auto f = false_stride ? hn::LoadU(d, on_false + i) : scalar_false;
      hn::StoreU(hn::IfThenElse(mask, t, f), d, y + i);
    }
  }
  for (; i < n; ++i) {
    y[i] = pred[i * pred_stride] ? on_true[i * true_stride] : on_false[i * false_stride];
  }
}

const char* TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace kiln::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(UnaryF32);
HWY_EXPORT(UnaryF64);
HWY_EXPORT(BinaryF32);
HWY_EXPORT(BinaryF64);
HWY_EXPORT(TargetName);
HWY_EXPORT(Select32);
HWY_EXPORT(RunProgramF32);
HWY_EXPORT(RunProgramF64);

void run_program_f32(const ProgramStep* steps, size_t count, void* const* slots, size_t n) {
  HWY_DYNAMIC_DISPATCH(RunProgramF32)(steps, count, slots, n);
}
void flush_streams() {
  hwy::FlushStream();
}
void run_program_f64(const ProgramStep* steps, size_t count, void* const* slots, size_t n) {
  HWY_DYNAMIC_DISPATCH(RunProgramF64)(steps, count, slots, n);
}

void unary_f32(UnaryOp op, const float* x, float* y, size_t n, Store store) {
  HWY_DYNAMIC_DISPATCH(UnaryF32)(op, x, y, n, store == Store::kStream);
}
void unary_f64(UnaryOp op, const double* x, double* y, size_t n, Store store) {
  HWY_DYNAMIC_DISPATCH(UnaryF64)(op, x, y, n, store == Store::kStream);
}
void binary_f32(BinaryOp op, const float* a, size_t a_stride, const float* b, size_t b_stride,
                float* y, size_t n, Store store) {
  HWY_DYNAMIC_DISPATCH(BinaryF32)(op, a, a_stride, b, b_stride, y, n, store == Store::kStream);
}
void binary_f64(BinaryOp op, const double* a, size_t a_stride, const double* b, size_t b_stride,
                double* y, size_t n, Store store) {
  HWY_DYNAMIC_DISPATCH(BinaryF64)(op, a, a_stride, b, b_stride, y, n, store == Store::kStream);
}

const char* target_name() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

void select_32(const bool* pred, size_t pred_stride, const uint32_t* on_true, size_t true_stride,
               const uint32_t* on_false, size_t false_stride, uint32_t* y, size_t n) {
  HWY_DYNAMIC_DISPATCH(Select32)
  (pred, pred_stride, on_true, true_stride, on_false, false_stride, y, n);
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
