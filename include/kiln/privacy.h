// Privacy accounting for differentially private training (DP-SGD; docs/privacy.md): the
// Rényi DP of the Poisson-subsampled Gaussian mechanism, composed over steps and converted
// to (epsilon, delta)-DP. Checked against Google's dp-accounting and Opacus
// (tests/optim/privacy_accountant_test.cc).
//
//   kiln::privacy::Spent spent = kiln::privacy::rdp_epsilon(
//       {.sampling_rate = 256.0 / 60000, .noise_multiplier = 1.1, .steps = 9375}, 1e-5);
//   // spent.epsilon, and the order that gave it
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
  double order = 0;    // the order that gave it
};

// (epsilon, delta)-DP after `mechanism.steps` steps: RDP composes by adding, and each
// order's RDP converts to epsilon = rdp + log((order - 1) / order) - (log(delta) +
// log(order)) / (order - 1) (Balle et al. 2020, Theorem 21); the smallest is returned.
// delta in (0, 1). Bad settings throw a kiln::Error naming the setting and its range.
Spent rdp_epsilon(const SubsampledGaussian& mechanism, double delta,
                  std::span<const double> orders = {}, Series series = Series::kUpperBound);

// The epsilon of one mechanism after any number of steps, each order's RDP of one step
// computed once (a training run asks after every epoch). The default orders, the upper-bound
// series.
class StepAccountant {
 public:
  StepAccountant(double sampling_rate, double noise_multiplier, double delta);
  Spent after(int64_t steps) const;  // rdp_epsilon's result for `steps` steps
  // The most steps, up to `limit`, whose epsilon is at most max_epsilon (0 when one step
  // already spends more).
  int64_t steps_within(double max_epsilon, int64_t limit) const;

 private:
  double delta_;
  std::vector<double> orders_;
  std::vector<double> rdp_of_one_step_;
};

// The smallest noise multiplier whose `steps` steps at `sampling_rate` spend at most
// `target_epsilon` at `delta` (to a relative 1e-6, rounded up, so the epsilon it gives is
// never above the target): what to set for a privacy budget. A target no noise can reach
// (below the conversion's floor at these orders, about 0.005 at delta 1e-5) is a
// kiln::Error saying so.
double noise_for_epsilon(double sampling_rate, int64_t steps, double delta, double target_epsilon);

// The rows a Poisson-sampled batch needs: the smallest M with P(Binomial(examples,
// sampling_rate) > M) <= overflow. A run of T steps whose batches hold M rows truncates a
// draw with probability at most T x overflow, which adds to its delta (docs/privacy.md).
int64_t poisson_batch_rows(int64_t examples, double sampling_rate, double overflow);

}  // namespace kiln::privacy
