// What the two privacy accountants (privacy_accountant.cc, RDP; privacy_pld.cc, PLD) share:
// sums in log space, the Gaussian's tails where erfc underflows, and the checks of a
// mechanism's settings, so that both refuse the same settings with the same words.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

namespace kiln::privacy::detail {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

inline double log_add(double a, double b) {
  if (a == kMinusInfinity) return b;
  if (b == kMinusInfinity) return a;
  double high = std::max(a, b), low = std::min(a, b);
  return high + std::log1p(std::exp(low - high));
}

// log(erfc(x)), finite where erfc underflows (x beyond about 26): the asymptotic series
// erfc(x) ~ exp(-x^2) / (x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6)).
inline double log_erfc(double x) {
  if (x < 20) return std::log(std::erfc(x));
  double inverse_square = 1 / (x * x);
  double series = 1 - inverse_square / 2 + 3 * inverse_square * inverse_square / 4 -
                  15 * inverse_square * inverse_square * inverse_square / 8;
  return -x * x - std::log(x) - 0.5 * std::log(std::numbers::pi) + std::log(series);
}

// The standard normal's CDF and its log (accurate far into the lower tail).
inline double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::numbers::sqrt2);
}
inline double log_normal_cdf(double z) {
  return -std::numbers::ln2 + log_erfc(-z / std::numbers::sqrt2);
}

// Each throws a kiln::Error naming the setting and its range.
void check_mechanism(double sampling_rate, double noise_multiplier);
void check_steps(int64_t steps);
void check_delta(double delta);

}  // namespace kiln::privacy::detail
