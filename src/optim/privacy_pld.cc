// The PLD accountant of kiln/privacy.h (docs/privacy.md, *The PLD accountant*): the privacy
// loss distribution of one step of the Poisson-subsampled Gaussian mechanism, discretized so
// that every delta it gives is at least the mechanism's, composed over the steps by FFT.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>
// Eigen's FFT module (MPL-2.0, header-only; docs/dependencies.md) on its default backend,
// a templated KissFFT: with EIGEN_FFTW_DEFAULT or EIGEN_MKL_DEFAULT it would take FFTW
// (GPL) or MKL instead.
#if defined(EIGEN_FFTW_DEFAULT) || defined(EIGEN_MKL_DEFAULT)
#error "kiln's PLD accountant uses Eigen's own KissFFT backend, not FFTW's or MKL's"
#endif
#include <unsupported/Eigen/FFT>

#include "kiln/error.h"
#include "kiln/privacy.h"
#include "optim/privacy_math.h"

namespace kiln::privacy {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// The PLD of one step is computed between the noise's values where each tail holds
// e^-50 / 2 (dp-accounting's cut): the mass beyond the largest loss counts as infinite, the
// mass below the smallest as the smallest, both pessimistic and far below any delta.
constexpr double kLogNoiseTail = -50;
// Below this delta the FFT's rounding, about 1e-14 of probability spread over millions of
// points and of either sign, moves epsilon (by over 10% at 1e-13 after 10,000 steps): an
// epsilon there could be below the mechanism's.
constexpr double kSmallestDelta = 1e-10;
// 2^26 points is 512 MiB of doubles before the FFT's buffers: more means a discretization
// finer than the run needs.
constexpr int64_t kMostPoints = int64_t{1} << 26;

// The neighbouring datasets differ by one example, which the larger one holds. kRemove
// compares the output on the larger dataset with the output on the smaller one; kAdd the
// other way round. The two PLDs differ when q < 1, and a guarantee must hold for both.
enum class Direction { kRemove, kAdd };

// One step's privacy loss, as a function of the noise's coordinate x (sensitivity 1, noise
// N(0, sigma^2)), both directions decreasing in x:
//   kRemove: log((1 - q) + q exp((-x - 1/2) / sigma^2)), from log(1 - q) up to infinity;
//   kAdd:   -log((1 - q) + q exp((x - 1/2) / sigma^2)), from minus infinity up to -log(1 - q).
// Their hockey-stick divergence at epsilon, delta(epsilon) = P_upper(L > epsilon) -
// e^epsilon P_lower(L > epsilon), is written through the unsampled Gaussian's loss that
// epsilon corresponds to (unsampled()), which takes the sampling's mixture out of the
// subtractions.
class SubsampledGaussianLoss {
 public:
  SubsampledGaussianLoss(double q, double sigma, Direction direction)
      : q_(q), sigma_(sigma), direction_(direction) {}

  double loss(double x) const {
    const double log_keep = std::log1p(-q_);  // -infinity when q = 1
    if (direction_ == Direction::kRemove) {
      return detail::log_add(log_keep, std::log(q_) + (-x - 0.5) / (sigma_ * sigma_));
    }
    return -detail::log_add(log_keep, std::log(q_) + (x - 0.5) / (sigma_ * sigma_));
  }

  // Where the normal CDFs below are near 1 (the losses below 0), the subtraction of nearly
  // equal terms would leave rounding of the order of 1e-16 in each delta, which the second
  // differences of one_step turn into masses 1e4 times larger; there delta is taken as
  // 1 - e^epsilon plus the difference of two upper tails, each accurate.
  double delta(double epsilon) const {
    const double s = sigma_;
    if (direction_ == Direction::kRemove) {
      // Every loss lies above log(1 - q): below it, delta is the whole 1 - e^epsilon.
      if (q_ < 1 && epsilon <= std::log1p(-q_)) return -std::expm1(epsilon);
      // q (Phi(1/(2s) - u s) - e^u Phi(-1/(2s) - u s)), u the unsampled loss of epsilon.
      const double u = unsampled(epsilon), high = 0.5 / s - u * s, low = -0.5 / s - u * s;
      if (low > 0) {
        return std::max(-std::expm1(epsilon) + q_ * (std::exp(u + detail::log_normal_cdf(-low)) -
                                                     detail::normal_cdf(-high)),
                        0.0);
      }
      return std::max(q_ * (detail::normal_cdf(high) - std::exp(u + detail::log_normal_cdf(low))),
                      0.0);
    }
    if (q_ < 1 && epsilon >= -std::log1p(-q_)) return 0;  // no loss reaches it
    // q e^epsilon (e^v Phi(v s + 1/(2s)) - Phi(v s - 1/(2s))), v the unsampled loss of
    // -epsilon; each product in log space (e^v and Phi far apart).
    const double v = unsampled(-epsilon), high = v * s + 0.5 / s, low = v * s - 0.5 / s;
    if (low > 0) {
      return std::max(
          -std::expm1(epsilon) + q_ * (std::exp(epsilon + detail::log_normal_cdf(-low)) -
                                       std::exp(epsilon + v + detail::log_normal_cdf(-high))),
          0.0);
    }
    return std::max(q_ * (std::exp(epsilon + v + detail::log_normal_cdf(high)) -
                          std::exp(epsilon + detail::log_normal_cdf(low))),
                    0.0);
  }

  // Where the PLD is cut: the noise coordinates beyond which N(0, sigma^2) holds e^-50 / 2 on
  // each side, widened by the sensitivity on the side of the shifted Gaussian.
  std::pair<double, double> cut() const {
    const double tail_z = normal_quantile(kLogNoiseTail - std::numbers::ln2);
    double lower = sigma_ * tail_z, upper = -sigma_ * tail_z;
    if (direction_ == Direction::kRemove) {
      lower -= 1;
    } else {
      upper += 1;
    }
    return {lower, upper};
  }

 private:
  // The loss u of the unsampled Gaussian mechanism that the subsampled loss m corresponds
  // to, e^m = 1 - q + q e^u: u = log(1 + (e^m - 1) / q); minus infinity at m <= log(1 - q).
  double unsampled(double m) const {
    if (q_ == 1) return m;
    if (m > 0) return m - std::log(q_) + std::log1p((q_ - 1) * std::exp(-m));
    const double ratio = std::expm1(m) / q_;
    return ratio <= -1 ? detail::kMinusInfinity : std::log1p(ratio);
  }

  // The z with log Phi(z) = log_p, for a lower tail (log_p < log 1/2): bisection, to the
  // last bit.
  static double normal_quantile(double log_p) {
    double low = -40, high = 0;
    for (int i = 0; i < 200 && high - low > 0; ++i) {
      const double middle = (low + high) / 2;
      if (middle == low || middle == high) break;
      (detail::log_normal_cdf(middle) < log_p ? low : high) = middle;
    }
    return high;
  }

  double q_, sigma_;
  Direction direction_;
};

struct Pmf {
  int64_t lowest = 0;  // in units of the discretization
  std::vector<double> probabilities;
  double infinity = 0;
};

// What the queries read, from a Pmf or from PrivacyLossDistribution's own copy.
struct PmfView {
  int64_t lowest = 0;
  std::span<const double> probabilities;
  double infinity = 0;
};

void refuse_size(double points, double discretization) {
  fail(kUnknownSite,
       fmt::format("privacy: the privacy loss distribution needs {:.3g} points at discretization "
                   "{:g}, more than the {} the PLD accountant allows",
                   points, discretization, kMostPoints),
       "a coarser PldOptions::discretization, or the RDP accountant");
}

// One step's PLD by "connecting the dots" (Doroshenko et al. 2022, Algorithm 1): the PMF on
// the grid epsilon_k = k d whose hockey-stick curve equals the mechanism's at every grid
// point. Between grid points a PMF's curve is linear in e^epsilon while the mechanism's is
// convex in it, so the PMF's delta is never below the mechanism's, at any epsilon and after
// any composition (it dominates it). Solving the curve's values for the masses gives the
// second differences below; the mass beyond the cut's largest loss is the infinite loss.
Pmf one_step(const SubsampledGaussianLoss& mechanism, double d) {
  auto [lower_x, upper_x] = mechanism.cut();
  const double top = mechanism.loss(lower_x), bottom = mechanism.loss(upper_x);
  // Counted in doubles first: a tiny sigma puts the grid's ends beyond int64's range.
  const double points = std::ceil(top / d) - std::floor(bottom / d) + 1;
  if (!(points <= static_cast<double>(kMostPoints))) refuse_size(points, d);
  const auto first = static_cast<int64_t>(std::floor(bottom / d));
  const auto n = static_cast<size_t>(points);
  std::vector<double> deltas(n);
  for (size_t i = 0; i < n; ++i) {
    deltas[i] = mechanism.delta(static_cast<double>(first + static_cast<int64_t>(i)) * d);
    if (i > 0) deltas[i] = std::min(deltas[i], deltas[i - 1]);  // rounding, not the curve
  }
  Pmf pmf{.lowest = first, .probabilities = std::vector<double>(n), .infinity = deltas.back()};
  if (n == 1) {
    pmf.probabilities[0] = 1 - deltas[0];
    return pmf;
  }
  const double expm1_d = std::expm1(d), exp_d = std::exp(d);
  std::vector<double>& p = pmf.probabilities;
  p[0] = 1 - deltas[0] + (deltas[1] - deltas[0]) / expm1_d;
  for (size_t i = 1; i + 1 < n; ++i) {
    p[i] = ((deltas[i + 1] - deltas[i]) - exp_d * (deltas[i] - deltas[i - 1])) / expm1_d;
  }
  p[n - 1] = (deltas[n - 1] - deltas[n - 2]) / std::expm1(-d);
  for (double& mass : p) mass = std::max(mass, 0.0);
  return pmf;
}

// The smallest length >= n that is a multiple of 4 and whose only prime factors are 2, 3
// and 5: KissFFT has butterflies of its own for 2, 3, 4 and 5 (any other factor takes its
// generic O(p^2) one), and Eigen transforms a real signal through a complex FFT of half its
// length only when the length is a multiple of 4 (otherwise through one of the whole length,
// twice the work and the memory).
int64_t fft_length(int64_t n) {
  for (int64_t length = std::max<int64_t>((n + 3) / 4 * 4, 4);; length += 4) {
    int64_t rest = length;
    for (int64_t factor : {2, 3, 5}) {
      while (rest % factor == 0) rest /= factor;
    }
    if (rest == 1) return length;
  }
}

// The indices [lower, upper] of the `times`-fold sum outside which at most tail_mass lies,
// half on each side, by Chernoff's bound P(S >= b) <= E[e^(tS)] e^(-tb) at t = +-k / size for
// k = 1..20 (larger t overflows the moment for long PMFs). The whole range when tail_mass is 0.
// In doubles: the whole range of many steps can lie beyond int64's.
std::pair<double, double> kept_range(const std::vector<double>& p, int64_t times,
                                     double tail_mass) {
  const auto size = static_cast<int64_t>(p.size());
  double lower = 0, upper = static_cast<double>(size - 1) * static_cast<double>(times);
  if (tail_mass > 0) {
    for (int k = -20; k <= 20; ++k) {
      if (k == 0) continue;
      const double t = k / static_cast<double>(size);
      double largest = detail::kMinusInfinity;
      for (int64_t i = 0; i < size; ++i) {
        if (p[i] > 0) largest = std::max(largest, std::log(p[i]) + t * static_cast<double>(i));
      }
      double sum = 0;
      for (int64_t i = 0; i < size; ++i) {
        if (p[i] > 0) sum += std::exp(std::log(p[i]) + t * static_cast<double>(i) - largest);
      }
      const double log_moment = largest + std::log(sum);
      const double bound = (static_cast<double>(times) * log_moment + std::log(2 / tail_mass)) / t;
      if (!std::isfinite(bound)) continue;
      if (t > 0) upper = std::min(upper, std::ceil(bound));
      if (t < 0) lower = std::max(lower, std::floor(bound));
    }
  }
  return {lower, upper};
}

// The PLD of `times` independent steps: the PMF convolved with itself `times` times, by one
// real FFT raised to the power `times` and one inverse FFT, of a length that holds the
// kept range (what falls outside it wraps around onto the kept entries: at most tail_mass;
// rounding the length up to fft_length's only wraps less). The FFT object is this call's
// own, with no state shared between calls or threads, and runs on this thread alone: the
// bits depend on the length only.
Pmf self_compose(const Pmf& one, int64_t times, double tail_mass, double d) {
  if (times == 1) return one;
  const std::vector<double>& p = one.probabilities;
  const auto [lowest_kept, highest_kept] = kept_range(p, times, tail_mass);
  const double points = highest_kept - lowest_kept + 1;
  const double offset = static_cast<double>(one.lowest) * static_cast<double>(times) + lowest_kept;
  if (!(points <= static_cast<double>(kMostPoints))) refuse_size(points, d);
  if (!(std::abs(offset) < 0x1p62)) {
    fail(kUnknownSite,
         fmt::format("privacy: {} steps put the privacy losses beyond what the PLD accountant "
                     "indexes at discretization {:g}",
                     times, d),
         "a coarser PldOptions::discretization, or the RDP accountant");
  }
  const auto lower = static_cast<int64_t>(lowest_kept), upper = static_cast<int64_t>(highest_kept);
  const int64_t kept = upper - lower + 1;
  const int64_t length = fft_length(std::max(kept, static_cast<int64_t>(p.size())));
  // HalfSpectrum: the real signal's length / 2 + 1 bins, the others being their conjugates.
  // Unscaled: the inverse leaves length times the convolution, divided below.
  Eigen::FFT<double> fft;
  fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
  fft.SetFlag(Eigen::FFT<double>::Unscaled);
  std::vector<double> x(static_cast<size_t>(length), 0.0);
  std::copy(p.begin(), p.end(), x.begin());
  std::vector<std::complex<double>> spectrum;
  fft.fwd(spectrum, x);
  const auto n = static_cast<double>(times);
  for (std::complex<double>& z : spectrum) {
    const double magnitude = std::abs(z);
    z = magnitude == 0 ? 0.0 : std::polar(std::exp(n * std::log(magnitude)), n * std::arg(z));
  }
  fft.inv(x, spectrum, length);  // unscaled: length times the convolution
  Pmf composed;
  composed.lowest = one.lowest * times + lower;
  composed.probabilities.resize(static_cast<size_t>(kept));
  for (int64_t j = 0; j < kept; ++j) {
    composed.probabilities[static_cast<size_t>(j)] =
        x[(lower + j) % length] / static_cast<double>(length);
  }
  // A step's loss is infinite with probability `infinity`: the run's unless every step's
  // is finite. What the kept range left out counts as infinite too.
  const bool cut = lowest_kept > 0 ||
                   highest_kept < static_cast<double>(p.size() - 1) * static_cast<double>(times);
  composed.infinity = -std::expm1(n * std::log1p(-one.infinity)) + (cut ? tail_mass : 0);
  return composed;
}

double loss_at(int64_t index, double d) {
  return static_cast<double>(index) * d;
}

// inf + sum over the losses above epsilon of p (1 - e^(epsilon - loss)).
double delta_of(const PmfView& pmf, double d, double epsilon) {
  double delta = 0;
  std::span<const double> p = pmf.probabilities;
  for (size_t i = p.size(); i-- > 0;) {
    const double loss = loss_at(pmf.lowest + static_cast<int64_t>(i), d);
    if (loss <= epsilon) break;
    delta += p[i] * -std::expm1(epsilon - loss);
  }
  return pmf.infinity + delta;
}

// The smallest epsilon >= 0 with delta_of(epsilon) <= delta. Between two adjacent losses,
// delta(epsilon) = A - e^epsilon B with A and B the sums of p and p e^-loss over the losses
// above: going down from the largest loss, the first segment where the solution of
// A - e^epsilon B = delta lies within it holds the answer.
double epsilon_of(const PmfView& pmf, double d, double delta) {
  if (pmf.infinity > delta) return kInfinity;
  if (delta_of(pmf, d, 0) <= delta) return 0;
  std::span<const double> p = pmf.probabilities;
  double above = pmf.infinity, weighted = 0;
  for (size_t i = p.size(); i-- > 0;) {
    const double loss = loss_at(pmf.lowest + static_cast<int64_t>(i), d);
    if (loss <= 0) break;
    if (above > delta && weighted > 0) {
      const double epsilon = std::log((above - delta) / weighted);
      if (epsilon >= loss) return epsilon;
    }
    above += p[i];
    weighted += p[i] * std::exp(-loss);
    // e^-loss underflowed: delta stays above the target up to this loss.
    if (above > delta && !(weighted > 0)) return loss;
  }
  return std::max(std::log((above - delta) / weighted), 0.0);
}

void check_pld_delta(double delta) {
  detail::check_delta(delta);
  if (delta < kSmallestDelta) {
    fail(kUnknownSite,
         fmt::format("privacy: delta is {:g}; the PLD accountant needs it at {:g} or more: below, "
                     "the rounding of its FFTs moves epsilon",
                     delta, kSmallestDelta),
         "the RDP accountant, for smaller deltas");
  }
}

void check_pld_options(const PldOptions& options) {
  if (!(options.discretization > 0) || !std::isfinite(options.discretization)) {
    fail(kUnknownSite,
         fmt::format("privacy: PLD discretization is {}; it must be finite and above 0",
                     options.discretization),
         "the grid of privacy losses; 1e-4 is dp-accounting's default");
  }
  if (!(options.tail_mass >= 0 && options.tail_mass <= 1e-3)) {
    fail(kUnknownSite,
         fmt::format("privacy: PLD tail_mass is {}; it must be in [0, 1e-3]", options.tail_mass),
         "the probability the composition may cut, which adds to every delta");
  }
}

}  // namespace

PrivacyLossDistribution::PrivacyLossDistribution(const SubsampledGaussian& mechanism,
                                                 const PldOptions& options)
    : discretization_(options.discretization) {
  detail::check_mechanism(mechanism.sampling_rate, mechanism.noise_multiplier);
  detail::check_steps(mechanism.steps);
  check_pld_options(options);
  if (mechanism.steps == 0) {
    directions_.push_back({.lowest = 0, .probabilities = {1.0}, .infinity = 0});
    return;
  }
  // Without sampling both directions have the same PLD.
  std::vector<Direction> directions = {Direction::kRemove};
  if (mechanism.sampling_rate < 1) directions.push_back(Direction::kAdd);
  for (Direction direction : directions) {
    SubsampledGaussianLoss loss(mechanism.sampling_rate, mechanism.noise_multiplier, direction);
    Pmf composed = self_compose(one_step(loss, discretization_), mechanism.steps, options.tail_mass,
                                discretization_);
    directions_.push_back({.lowest = composed.lowest,
                           .probabilities = std::move(composed.probabilities),
                           .infinity = composed.infinity});
  }
}

double PrivacyLossDistribution::epsilon(double delta) const {
  check_pld_delta(delta);
  double worst = 0;
  for (const Losses& losses : directions_) {
    PmfView pmf{losses.lowest, losses.probabilities, losses.infinity};
    worst = std::max(worst, epsilon_of(pmf, discretization_, delta));
  }
  return worst;
}

double PrivacyLossDistribution::delta(double epsilon) const {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    fail(kUnknownSite,
         fmt::format("privacy: epsilon is {}; it must be finite and 0 or more", epsilon));
  }
  double worst = 0;
  for (const Losses& losses : directions_) {
    PmfView pmf{losses.lowest, losses.probabilities, losses.infinity};
    worst = std::max(worst, delta_of(pmf, discretization_, epsilon));
  }
  return std::min(worst, 1.0);
}

double pld_epsilon(const SubsampledGaussian& mechanism, double delta, const PldOptions& options) {
  check_pld_delta(delta);
  return PrivacyLossDistribution(mechanism, options).epsilon(delta);
}

double pld_delta(const SubsampledGaussian& mechanism, double epsilon, const PldOptions& options) {
  return PrivacyLossDistribution(mechanism, options).delta(epsilon);
}

}  // namespace kiln::privacy
