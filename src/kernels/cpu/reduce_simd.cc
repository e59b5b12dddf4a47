// Highway implementation of kernels/cpu/reduce_simd.h, compiled once per SIMD target by
// hwy/foreach_target.h. The logical lanes of reduce_run are spread over as many vectors
// as the target needs (8 on SSE2, 2 on AVX-512), so every target performs the same
// additions in the same order. Max/min handle NaN explicitly: the hardware instructions
// return one operand instead of propagating it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/reduce_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/reduce_simd.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <ReduceKind kind, typename T>
constexpr T identity() {
  if constexpr (kind == ReduceKind::kSum) {
    return T(0);
  } else if constexpr (kind == ReduceKind::kMax) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::infinity();
  }
}

// The scalar step, for tails and folds; it matches the vector step lane by lane.
template <ReduceKind kind, typename T>
inline T step(T acc, T x) {
  if constexpr (kind == ReduceKind::kSum) {
    return acc + x;
  } else {
    if (std::isnan(acc)) return acc;
    if (std::isnan(x)) return x;
    return (kind == ReduceKind::kMax ? x > acc : x < acc) ? x : acc;
  }
}

template <ReduceKind kind, class D, class V>
HWY_INLINE V step(D d, V acc, V x) {
  if constexpr (kind == ReduceKind::kSum) {
    (void)d;
    return hn::Add(acc, x);
  } else {
    V r = kind == ReduceKind::kMax ? hn::Max(acc, x) : hn::Min(acc, x);
    r = hn::IfThenElse(hn::IsNaN(x), x, r);
    return hn::IfThenElse(hn::IsNaN(acc), acc, r);
  }
}

// Loads lanes of `d` from T data, widening float to double when D is a double tag.
template <class D, typename T>
HWY_INLINE hn::Vec<D> load_as(D d, const T* p) {
  using A = hn::TFromD<D>;
  if constexpr (std::is_same_v<A, T>) {
    return hn::LoadU(d, p);
  } else {
    const hn::Rebind<T, D> dt;
    return hn::PromoteTo(d, hn::LoadU(dt, p));
  }
}

// Sums widen to double; max/min stay in the input type (they are exact).
template <ReduceKind kind, typename T>
double run(const T* x, size_t n) {
  using A = std::conditional_t<kind == ReduceKind::kSum, double, T>;
  const hn::CappedTag<A, kReduceLanes> d;
  constexpr size_t kN = hn::MaxLanes(d);
  static_assert(kReduceLanes % kN == 0);
  constexpr size_t kVecs = kReduceLanes / kN;
  hn::Vec<decltype(d)> acc[kVecs];
  for (size_t k = 0; k < kVecs; ++k) acc[k] = hn::Set(d, identity<kind, A>());
  size_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    for (size_t k = 0; k < kVecs; ++k) {
      acc[k] = step<kind>(d, acc[k], load_as(d, x + i + k * kN));
    }
  }
  A lanes[kReduceLanes];
  for (size_t k = 0; k < kVecs; ++k) hn::StoreU(acc[k], d, lanes + k * kN);
  A tail = identity<kind, A>();
  for (; i < n; ++i) tail = step<kind>(tail, static_cast<A>(x[i]));
  for (size_t width = kReduceLanes / 2; width >= 1; width /= 2) {
    for (size_t j = 0; j < width; ++j) lanes[j] = step<kind>(lanes[j], lanes[j + width]);
  }
  return static_cast<double>(step<kind>(lanes[0], tail));
}

// Four rows per pass over the accumulators: each column still sees the rows in order.
template <ReduceKind kind, typename T>
void columns(const T* x, size_t stride, size_t rows, size_t width, double* acc) {
  const hn::ScalableTag<double> d;
  const size_t kN = hn::Lanes(d);
  size_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T* r0 = x + r * stride;
    const T* r1 = r0 + stride;
    const T* r2 = r1 + stride;
    const T* r3 = r2 + stride;
    size_t c = 0;
    for (; c + kN <= width; c += kN) {
      auto a = hn::LoadU(d, acc + c);
      a = step<kind>(d, a, load_as(d, r0 + c));
      a = step<kind>(d, a, load_as(d, r1 + c));
      a = step<kind>(d, a, load_as(d, r2 + c));
      a = step<kind>(d, a, load_as(d, r3 + c));
      hn::StoreU(a, d, acc + c);
    }
    for (; c < width; ++c) {
      double a = acc[c];
      a = step<kind>(a, static_cast<double>(r0[c]));
      a = step<kind>(a, static_cast<double>(r1[c]));
      a = step<kind>(a, static_cast<double>(r2[c]));
      a = step<kind>(a, static_cast<double>(r3[c]));
      acc[c] = a;
    }
  }
  for (; r < rows; ++r) {
    const T* row = x + r * stride;
    size_t c = 0;
    for (; c + kN <= width; c += kN) {
      hn::StoreU(step<kind>(d, hn::LoadU(d, acc + c), load_as(d, row + c)), d, acc + c);
    }
    for (; c < width; ++c) acc[c] = step<kind>(acc[c], static_cast<double>(row[c]));
  }
}

template <typename T>
double RunT(ReduceKind kind, const T* x, size_t n) {
  switch (kind) {
    case ReduceKind::kSum:
      return run<ReduceKind::kSum>(x, n);
    case ReduceKind::kMax:
      return run<ReduceKind::kMax>(x, n);
    case ReduceKind::kMin:
      return run<ReduceKind::kMin>(x, n);
  }
  return 0;
}

template <typename T>
void ColumnsT(ReduceKind kind, const T* x, size_t stride, size_t rows, size_t width, double* acc) {
  switch (kind) {
    case ReduceKind::kSum:
      return columns<ReduceKind::kSum>(x, stride, rows, width, acc);
    case ReduceKind::kMax:
      return columns<ReduceKind::kMax>(x, stride, rows, width, acc);
    case ReduceKind::kMin:
      return columns<ReduceKind::kMin>(x, stride, rows, width, acc);
  }
}

double RunF32(ReduceKind kind, const float* x, size_t n) {
  return RunT(kind, x, n);
}
double RunF64(ReduceKind kind, const double* x, size_t n) {
  return RunT(kind, x, n);
}
void ColumnsF32(ReduceKind kind, const float* x, size_t stride, size_t rows, size_t width,
                double* acc) {
  ColumnsT(kind, x, stride, rows, width, acc);
}
void ColumnsF64(ReduceKind kind, const double* x, size_t stride, size_t rows, size_t width,
                double* acc) {
  ColumnsT(kind, x, stride, rows, width, acc);
}

}  // namespace kiln::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(RunF32);
HWY_EXPORT(RunF64);
HWY_EXPORT(ColumnsF32);
HWY_EXPORT(ColumnsF64);

double reduce_run_f32(ReduceKind kind, const float* x, size_t n) {
  return HWY_DYNAMIC_DISPATCH(RunF32)(kind, x, n);
}
double reduce_run_f64(ReduceKind kind, const double* x, size_t n) {
  return HWY_DYNAMIC_DISPATCH(RunF64)(kind, x, n);
}
void reduce_columns_f32(ReduceKind kind, const float* x, size_t stride, size_t rows, size_t width,
                        double* acc) {
  HWY_DYNAMIC_DISPATCH(ColumnsF32)(kind, x, stride, rows, width, acc);
}
void reduce_columns_f64(ReduceKind kind, const double* x, size_t stride, size_t rows, size_t width,
                        double* acc) {
  HWY_DYNAMIC_DISPATCH(ColumnsF64)(kind, x, stride, rows, width, acc);
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
