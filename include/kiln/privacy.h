// Privacy accounting for differentially private training (DP-SGD; docs/privacy.md): what
// `steps` steps of the Poisson-subsampled Gaussian mechanism spend, as (epsilon, delta)-DP.
// Two accountants: the Rényi DP of one step, composed over steps and converted (rdp_epsilon;
// checked against Google's dp-accounting and Opacus, tests/optim/privacy_accountant_test.cc),
// and the privacy loss distribution composed by FFT (pld_epsilon; tighter, checked against
// dp-accounting's PLD and Opacus' PRV accountants, tests/optim/privacy_pld_test.cc).
//
//   kiln::privacy::Spent spent = kiln::privacy::rdp_epsilon(
//       {.sampling_rate = 256.0 / 60000, .noise_multiplier = 1.1, .steps = 9375}, 1e-5);
//   // spent.epsilon, and the order that gave it
//   double epsilon = kiln::privacy::pld_epsilon({256.0 / 60000, 1.1, 9375}, 1e-5);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kiln::privacy {

// A run of the subsampled Gaussian mechanism: each step samples every example with
// probability `sampling_rate` (Poisson sampling), clips each example's gradient to L2 norm
// C and adds Gaussian noise of standard deviation noise_multiplier x C to their sum.
struct SubsampledGaussian {
  double sampling_rate = 0;     // q, in (0, 1]
  double noise_multiplier = 0;  // sigma, > 0
  int64_t steps = 0;            // compositions, >= 0
};

// The Rényi orders the accountant tries unless told others: 1.1, 1.2, ..., 10.9, then 11 to
// 63, then 128, 256, 512 and 1024 (the orders of Google's dp-accounting).
std::vector<double> default_orders();

// How the series of a fractional order is summed. Its binomial coefficients alternate in
// sign past the order: kExact sums them with their signs (the moment itself, as Opacus
// computes it); kUpperBound adds their magnitudes (a bound from above, as Google's
// dp-accounting computes it), so epsilon is never understated. The two agree to 1e-7 at
// sigma >= 1 and part by up to 4% at sigma = 0.5 (docs/privacy.md).
enum class Series { kUpperBound, kExact };

// The Rényi DP of one step at `order` (> 1): log(A_order) / (order - 1) with A the
// moment of Mironov, Talwar and Zhang (2019): for an integer order the finite binomial sum,
// for a fractional one their two series with erfc terms (summed as `series` says), in log
// space until the terms fall below e^-40 of the sum. order / (2 sigma^2) when q = 1 (the
// Gaussian mechanism).
double rdp_of_one_step(double sampling_rate, double noise_multiplier, double order,
                       Series series = Series::kUpperBound);

struct Spent {
  double epsilon = 0;  // the smallest over the orders, >= 0
  double order = 0;    // the order that gave it (0 from the PLD accountant)
};

// Which accountant a StepAccountant (and a private run, privacy.accountant) asks: Rényi DP
// (rdp_epsilon) or the privacy loss distribution (pld_epsilon, below: tighter, the same
// guarantee).
enum class Accountant { kRdp, kPld };

// (epsilon, delta)-DP after `mechanism.steps` steps: RDP composes by adding, and each
// order's RDP converts to epsilon = rdp + log((order - 1) / order) - (log(delta) +
// log(order)) / (order - 1) (Balle et al. 2020, Theorem 21); the smallest is returned.
// delta in (0, 1). Bad settings throw a kiln::Error naming the setting and its range.
Spent rdp_epsilon(const SubsampledGaussian& mechanism, double delta,
                  std::span<const double> orders = {}, Series series = Series::kUpperBound);

// The epsilon of one mechanism after any number of steps (a training run asks after every
// epoch). RDP: each order's RDP of one step computed once, the default orders, the
// upper-bound series. PLD: the distribution composed for the steps asked, with the default
// PldOptions.
class StepAccountant {
 public:
  StepAccountant(double sampling_rate, double noise_multiplier, double delta,
                 Accountant accountant = Accountant::kRdp);
  // rdp_epsilon's or pld_epsilon's result for `steps` steps (0 steps spend nothing).
  Spent after(int64_t steps) const;
  // The most steps, up to `limit`, whose epsilon is at most max_epsilon (0 when one step
  // already spends more).
  int64_t steps_within(double max_epsilon, int64_t limit) const;
  Accountant accountant() const { return accountant_; }

 private:
  Accountant accountant_;
  double sampling_rate_, noise_multiplier_, delta_;
  std::vector<double> orders_;
  std::vector<double> rdp_of_one_step_;
};

// The smallest noise multiplier whose `steps` steps at `sampling_rate` spend at most
// `target_epsilon` at `delta` by `accountant` (to a relative 1e-6, rounded up, so the
// epsilon it gives is never above the target): what to set for a privacy budget. A target no
// noise can reach (RDP: below the conversion's floor at these orders, about 0.005 at delta
// 1e-5) is a kiln::Error saying so.
double noise_for_epsilon(double sampling_rate, int64_t steps, double delta, double target_epsilon,
                         Accountant accountant = Accountant::kRdp);

// How the PLD accountant discretizes.
struct PldOptions {
  // The grid of privacy losses, > 0: the PLD of one step is put on the multiples of it,
  // pessimistically (the epsilon is never below the mechanism's). A finer grid tightens it
  // little (from 1e-4 to 1e-5, epsilon falls by at most 1.4e-4 on docs/privacy.md's
  // settings) and costs as much more time and memory.
  double discretization = 1e-4;
  // At most this much probability may be cut from the tails of the composed PLD, in
  // [0, 1e-3]; it is counted as an infinite loss, so it adds to every delta.
  double tail_mass = 1e-15;
};

// The privacy loss distribution of a run of the subsampled Gaussian mechanism, for either
// neighbouring direction (an example added, an example removed), each the "connect the
// dots" discretization of one step (Doroshenko et al. 2022) composed `steps` times by FFT
// (Koskela et al. 2020), as Google's dp-accounting's PLDAccountant computes it. Built once,
// it answers any delta or epsilon. Bad settings throw a kiln::Error naming the setting and
// its range; a PLD that needs more than 2^26 points (a small noise multiplier with a fine
// discretization, or very many steps at a large sampling rate) is refused, naming the
// discretization.
class PrivacyLossDistribution {
 public:
  explicit PrivacyLossDistribution(const SubsampledGaussian& mechanism,
                                   const PldOptions& options = {});
  // The smallest epsilon >= 0 at which the run is (epsilon, delta)-DP, the worse of the two
  // directions; infinity when delta is below the mass of infinite loss (tail_mass at least).
  // delta in [1e-10, 1): below, the rounding of the FFTs (about 1e-14 of probability) moves
  // epsilon, so such a delta is refused (the RDP accountant has no such floor).
  double epsilon(double delta) const;
  // The delta at `epsilon` (finite, >= 0), the worse of the two directions. Below about
  // 1e-10 it is within the FFTs' rounding.
  double delta(double epsilon) const;

 private:
  // One direction's PLD: probabilities of the losses (lowest + i) x discretization, and the
  // probability of an infinite loss.
  struct Losses {
    int64_t lowest = 0;
    std::vector<double> probabilities;
    double infinity = 0;
  };
  double discretization_;
  std::vector<Losses> directions_;
};

// PrivacyLossDistribution(mechanism, options).epsilon(delta): (epsilon, delta)-DP after
// `mechanism.steps` steps by the PLD accountant. Smaller than rdp_epsilon's for the same
// run: no conversion from Rényi DP loses anything.
double pld_epsilon(const SubsampledGaussian& mechanism, double delta,
                   const PldOptions& options = {});
// PrivacyLossDistribution(mechanism, options).delta(epsilon).
double pld_delta(const SubsampledGaussian& mechanism, double epsilon,
                 const PldOptions& options = {});

// The rows a Poisson-sampled batch needs: the smallest M with P(Binomial(examples,
// sampling_rate) > M) <= overflow. A run of T steps whose batches hold M rows truncates a
// draw with probability at most T x overflow, which adds to its delta (docs/privacy.md).
int64_t poisson_batch_rows(int64_t examples, double sampling_rate, double overflow);

}  // namespace kiln::privacy
