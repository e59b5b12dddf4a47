// The RDP accountant of kiln/privacy.h. Everything is summed in log space: the moments A
// reach e^700 and beyond for large orders.
#include "kiln/privacy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include <fmt/format.h>

#include "kiln/error.h"
#include "optim/privacy_math.h"

namespace kiln::privacy {
namespace {

using detail::check_delta;
using detail::check_mechanism;
using detail::kMinusInfinity;
using detail::log_add;
using detail::log_erfc;

// A series stops once its terms are this far (in log) below the sum: e^-40 ~ 4e-18, under
// a double's resolution.
constexpr double kNegligible = 40;
constexpr int64_t kMaxTerms = 1'000'000;

// log A for an integer order n: log sum_k C(n, k) (1 - q)^(n - k) q^k exp((k^2 - k) / (2 s^2)).
double log_moment_integer(double q, double sigma, int64_t n) {
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  const double log_n_factorial = std::lgamma(static_cast<double>(n) + 1);
  double sum = kMinusInfinity;
  for (int64_t k = 0; k <= n; ++k) {
    const auto kd = static_cast<double>(k), nd = static_cast<double>(n);
    double log_binomial = log_n_factorial - std::lgamma(kd + 1) - std::lgamma(nd - kd + 1);
    sum = log_add(sum, log_binomial + (nd - kd) * log_1mq + kd * log_q +
                           (kd * kd - kd) / (2 * sigma * sigma));
  }
  return sum;
}

// log A for a fractional order a (Mironov, Talwar and Zhang 2019, section 3.3): A = sum over
// i >= 0 of C(a, i) times
//   q^i (1 - q)^(a - i) exp((i^2 - i) / (2 s^2)) erfc((i - z0) / (sqrt(2) s)) / 2
// + q^(a - i) (1 - q)^i exp(((a - i)^2 - (a - i)) / (2 s^2)) erfc((z0 - (a - i)) / (sqrt(2) s)) / 2
// with z0 = s^2 log(1 / q - 1) + 1 / 2. C(a, i) changes sign at every i past a: kExact
// sums the terms with their signs (positive and negative parts apart, subtracted once),
// kUpperBound adds their magnitudes. The series stops once both terms fall and are below
// e^-40 of the sum.
double log_moment_fractional(double q, double sigma, double a, Series series) {
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  const double z0 = sigma * sigma * std::log(1 / q - 1) + 0.5;
  const double root2_sigma = std::numbers::sqrt2 * sigma;
  double positive = kMinusInfinity, negative = kMinusInfinity;
  double log_binomial = 0;  // log |C(a, i)|
  bool binomial_positive = true;
  double last_first = kMinusInfinity, last_second = kMinusInfinity;
  for (int64_t i = 0; i < kMaxTerms; ++i) {
    const auto id = static_cast<double>(i);
    const double j = a - id;
    const double first = log_binomial + id * log_q + j * log_1mq +
                         (id * id - id) / (2 * sigma * sigma) + std::log(0.5) +
                         log_erfc((id - z0) / root2_sigma);
    const double second = log_binomial + j * log_q + id * log_1mq +
                          (j * j - j) / (2 * sigma * sigma) + std::log(0.5) +
                          log_erfc((z0 - j) / root2_sigma);
    const bool adds = binomial_positive || series == Series::kUpperBound;
    double& part = adds ? positive : negative;
    part = log_add(part, log_add(first, second));
    if (first < last_first && second < last_second &&
        std::max(first, second) < positive - kNegligible) {
      if (negative == kMinusInfinity) return positive;
      return positive + std::log1p(-std::exp(negative - positive));
    }
    last_first = first;
    last_second = second;
    // C(a, i + 1) = C(a, i) (a - i) / (i + 1).
    log_binomial += std::log(std::abs(j)) - std::log(id + 1);
    if (j < 0) binomial_positive = !binomial_positive;
  }
  fail(kUnknownSite,
       fmt::format("privacy: the RDP series at order {} (q {}, sigma {}) did not converge in {} "
                   "terms",
                   a, q, sigma, kMaxTerms));
}

void check_order(double order) {
  if (!(order > 1) || !std::isfinite(order)) {
    fail(kUnknownSite, fmt::format("privacy: Rényi order {} must be finite and above 1", order));
  }
}

}  // namespace

std::vector<double> default_orders() {
  std::vector<double> orders;
  for (int x = 1; x < 100; ++x) orders.push_back(1 + x / 10.0);
  for (int order = 11; order < 64; ++order) orders.push_back(order);
  for (double order : {128.0, 256.0, 512.0, 1024.0}) orders.push_back(order);
  return orders;
}

double rdp_of_one_step(double sampling_rate, double noise_multiplier, double order, Series series) {
  check_mechanism(sampling_rate, noise_multiplier);
  check_order(order);
  const double q = sampling_rate, sigma = noise_multiplier;
  if (q == 1) return order / (2 * sigma * sigma);
  double log_moment = order == std::floor(order) && order <= 1e6
                          ? log_moment_integer(q, sigma, static_cast<int64_t>(order))
                          : log_moment_fractional(q, sigma, order, series);
  return log_moment / (order - 1);
}

namespace {

// RDP composes by adding: `steps` times each order's RDP of one step, converted to epsilon at
// delta; the smallest over the orders.
Spent best_epsilon(std::span<const double> orders, std::span<const double> rdp_of_one_step,
                   int64_t steps, double delta) {
  Spent best{std::numeric_limits<double>::infinity(), orders[0]};
  for (size_t i = 0; i < orders.size(); ++i) {
    const double order = orders[i];
    double rdp = static_cast<double>(steps) * rdp_of_one_step[i];
    double epsilon =
        rdp + std::log1p(-1 / order) - (std::log(delta) + std::log(order)) / (order - 1);
    if (epsilon < best.epsilon) best = {epsilon, order};
  }
  best.epsilon = std::max(best.epsilon, 0.0);
  return best;
}

}  // namespace

Spent rdp_epsilon(const SubsampledGaussian& mechanism, double delta, std::span<const double> orders,
                  Series series) {
  check_mechanism(mechanism.sampling_rate, mechanism.noise_multiplier);
  detail::check_steps(mechanism.steps);
  check_delta(delta);
  std::vector<double> defaults;
  if (orders.empty()) {
    defaults = default_orders();
    orders = defaults;
  }
  std::vector<double> per_step;
  for (double order : orders) {
    check_order(order);
    per_step.push_back(
        rdp_of_one_step(mechanism.sampling_rate, mechanism.noise_multiplier, order, series));
  }
  return best_epsilon(orders, per_step, mechanism.steps, delta);
}

StepAccountant::StepAccountant(double sampling_rate, double noise_multiplier, double delta,
                               Accountant accountant)
    : accountant_(accountant),
      sampling_rate_(sampling_rate),
      noise_multiplier_(noise_multiplier),
      delta_(delta) {
  check_mechanism(sampling_rate, noise_multiplier);
  check_delta(delta);
  if (accountant == Accountant::kPld) return;
  orders_ = default_orders();
  for (double order : orders_) {
    rdp_of_one_step_.push_back(rdp_of_one_step(sampling_rate, noise_multiplier, order));
  }
}

Spent StepAccountant::after(int64_t steps) const {
  detail::check_steps(steps);
  if (accountant_ == Accountant::kRdp)
    return best_epsilon(orders_, rdp_of_one_step_, steps, delta_);
  if (steps == 0) return {};
  return {pld_epsilon({sampling_rate_, noise_multiplier_, steps}, delta_), 0};
}

int64_t StepAccountant::steps_within(double max_epsilon, int64_t limit) const {
  // epsilon grows with the steps (each order's RDP does, and the minimum of growing
  // functions does): the last step count within the budget by bisection.
  if (after(limit).epsilon <= max_epsilon) return limit;
  int64_t within = 0, beyond = limit;  // after(within) <= max (or within == 0), after(beyond) > max
  if (after(0).epsilon > max_epsilon) return 0;
  while (beyond - within > 1) {
    int64_t middle = within + (beyond - within) / 2;
    (after(middle).epsilon <= max_epsilon ? within : beyond) = middle;
  }
  return within;
}

double noise_for_epsilon(double sampling_rate, int64_t steps, double delta, double target_epsilon,
                         Accountant accountant) {
  check_mechanism(sampling_rate, 1.0);
  check_delta(delta);
  if (steps < 1) {
    fail(kUnknownSite, fmt::format("privacy: steps is {}; it must be at least 1", steps));
  }
  if (!(target_epsilon > 0) || !std::isfinite(target_epsilon)) {
    fail(kUnknownSite,
         fmt::format("privacy: target epsilon {} must be finite and above 0", target_epsilon));
  }
  auto spent = [&](double sigma) {
    return StepAccountant(sampling_rate, sigma, delta, accountant).after(steps).epsilon;
  };
  // epsilon falls as the noise grows: bracket the target between two noises a factor of 2
  // apart, going from 1 down or up (small noises take the longest series), then bisect.
  constexpr double kLargestNoise = 1e6;
  double low = 0.5, high = 1;
  if (spent(high) <= target_epsilon) {
    while (spent(low) <= target_epsilon) {
      high = low;
      low /= 2;
    }
  } else {
    do {
      low = high;
      high *= 2;
      if (high > kLargestNoise) {
        fail(kUnknownSite,
             fmt::format("privacy: no noise multiplier up to {:g} keeps {} steps at sampling "
                         "rate {:g} within epsilon {:g} at delta {:g}: {} spends about {:.3g} "
                         "there",
                         kLargestNoise, steps, sampling_rate, target_epsilon, delta,
                         accountant == Accountant::kRdp ? "the conversion from Rényi DP alone"
                                                        : "the PLD accountant",
                         spent(kLargestNoise)),
             "aim for a larger epsilon or a larger delta");
      }
    } while (spent(high) > target_epsilon);
  }
  while (high - low > 1e-6 * high) {
    double middle = low + (high - low) / 2;
    (spent(middle) > target_epsilon ? low : high) = middle;
  }
  return high;
}

int64_t poisson_batch_rows(int64_t examples, double sampling_rate, double overflow) {
  if (examples < 1) {
    fail(kUnknownSite, fmt::format("privacy: {} examples to sample from; at least 1", examples));
  }
  check_mechanism(sampling_rate, 1.0);
  if (!(overflow > 0 && overflow < 1)) {
    fail(kUnknownSite, fmt::format("privacy: overflow probability {} must be in (0, 1)", overflow));
  }
  if (sampling_rate == 1) return examples;
  const auto n = static_cast<double>(examples);
  const double q = sampling_rate;
  auto log_pmf = [&](int64_t k) {
    auto kk = static_cast<double>(k);
    return std::lgamma(n + 1) - std::lgamma(kk + 1) - std::lgamma(n - kk + 1) + kk * std::log(q) +
           (n - kk) * std::log1p(-q);
  };
  // The upper tail P(X > m), summed in log space from the top down: from where the terms are
  // far below any overflow asked for (e^-800 under the mode's), taken as a zero tail.
  const auto mode = std::min(examples, static_cast<int64_t>(std::floor((n + 1) * q)));
  const double log_at_mode = log_pmf(mode);
  int64_t m = mode;
  while (m < examples && log_pmf(m + 1) > log_at_mode - 800) ++m;
  const double log_overflow = std::log(overflow);
  double log_tail = kMinusInfinity;  // P(X > m)
  for (; m > 0; --m) {
    double below = log_add(log_tail, log_pmf(m));  // P(X > m - 1)
    if (below > log_overflow) return m;
    log_tail = below;
  }
  return 0;
}

namespace detail {

void check_mechanism(double q, double sigma) {
  if (!(q > 0 && q <= 1)) {
    fail(kUnknownSite, fmt::format("privacy: sampling_rate is {}; it must be in (0, 1]", q),
         "the probability with which each example joins a batch: batch size / dataset size");
  }
  if (!(sigma > 0) || !std::isfinite(sigma)) {
    fail(kUnknownSite,
         fmt::format("privacy: noise_multiplier is {}; it must be finite and above 0", sigma),
         "the noise's standard deviation over the clipping norm");
  }
}

void check_steps(int64_t steps) {
  if (steps < 0) {
    fail(kUnknownSite, fmt::format("privacy: steps is {}; it must be 0 or more", steps));
  }
}

void check_delta(double delta) {
  if (!(delta > 0 && delta < 1)) {
    fail(kUnknownSite, fmt::format("privacy: delta is {}; it must be in (0, 1)", delta),
         "usually well below 1 / (the number of examples)");
  }
}

}  // namespace detail
}  // namespace kiln::privacy
