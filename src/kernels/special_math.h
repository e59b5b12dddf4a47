// Scalar special functions for the erf and erf_inv primitives (used by kiln::random's
// normal and truncated_normal). erf_inv: a cheap closed-form start refined by Halley steps
// on erf (or on erfc in the tails, where 1 - |x| is exact and erfc keeps full relative
// accuracy). Each result is computed in a wider type and rounded once, so it is the
// correctly rounded value in all but near-tie cases.
#pragma once

#include <cmath>
#include <limits>
#include <numbers>

namespace kiln::special {

// Inverse of erf on [-1, 1] in double precision arithmetic (about 1.5 ulp).
inline double erf_inv_core(double x) {
  if (std::isnan(x) || x < -1 || x > 1) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0) return x;  // keeps the sign of zero
  double a = std::fabs(x);
  if (a == 1) return std::copysign(std::numeric_limits<double>::infinity(), x);

  constexpr double kHalfSqrtPi = 0.5 * 1.7724538509055160273;  // sqrt(pi) / 2
  double y;
  if (a < 0.1) {
    // Maclaurin series of erf_inv; four terms are good to ~1e-10 here.
    constexpr double kPi = std::numbers::pi;
    double a2 = a * a;
    y = kHalfSqrtPi * a *
        (1 + a2 * (kPi / 12 + a2 * (7 * kPi * kPi / 480 + a2 * (127 * kPi * kPi * kPi / 40320))));
  } else {
    // Winitzki's closed form (relative error ~2e-3).
    constexpr double kA = 0.147;
    double w = std::log((1 - a) * (1 + a));
    double t = 2 / (std::numbers::pi * kA) + w / 2;
    y = std::sqrt(std::sqrt(t * t - w / kA) - t);
  }
  // Halley steps on f(y) = erf(y) - a (or erfc(a complement) in the tails): with
  // f'' = -2 y f', the step is f / (f' + y f). Convergence is cubic; three steps take the
  // 2e-3 start well past double precision.
  constexpr double kTwoOverSqrtPi = 1.1283791670955125739;
  bool tail = a > 0.5;
  double complement = 1 - a;  // exact for a in [0.5, 1]
  for (int step = 0; step < 3; ++step) {
    double slope = kTwoOverSqrtPi * std::exp(-y * y);
    double f = tail ? complement - std::erfc(y) : std::erf(y) - a;
    y -= f / (slope + y * f);
  }
  return std::copysign(y, x);
}

// Inverse of erf on [-1, 1]: erf_inv(+-1) = +-inf, NaN outside the domain. A last
// Newton step in long double (where the platform has a wider one) makes the double result
// correctly rounded in all but near-tie cases.
inline double erf_inv(double x) {
  double y = erf_inv_core(x);
  if (!std::isfinite(y) || y == 0) return y;
  long double a = std::fabs(static_cast<long double>(x));
  long double t = std::fabs(static_cast<long double>(y));
  long double slope = 1.1283791670955125738961589031215452L * std::exp(-t * t);
  long double f = a > 0.5L ? (1 - a) - std::erfc(t) : std::erf(t) - a;
  return std::copysign(static_cast<double>(t - f / slope), x);
}

// erf_inv for float: computed in double (about 1.5 ulp of double) and rounded once.
inline float erf_inv(float x) {
  return static_cast<float>(erf_inv_core(static_cast<double>(x)));
}

// erf rounded once from a wider type: the C library's erff and erf are not always
// correctly rounded.
inline float erf(float x) {
  return static_cast<float>(std::erf(static_cast<double>(x)));
}
inline double erf(double x) {
  return static_cast<double>(std::erf(static_cast<long double>(x)));
}

}  // namespace kiln::special
