// The RDP accountant (kiln/privacy.h): the Gaussian mechanism's closed form, a binomial
// moment by hand, the fractional series meeting the integer sums, monotonicity, bad
// settings refused by name, and epsilon against Google's dp-accounting and Opacus
// (tests/tools/privacy_crosscheck.py) on a grid of sampling rates, noise, steps and deltas:
// the upper-bound series against dp-accounting, the exact one against Opacus.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/privacy.h"
#include "support/errors.h"
#include "support/peer_check.h"

namespace kiln::privacy {
namespace {

using ::kiln::testing::fails_with;

TEST(PrivacyAccountant, WithoutSamplingItIsTheGaussianMechanism) {
  for (double order : {1.5, 2.0, 7.3, 64.0}) {
    EXPECT_DOUBLE_EQ(rdp_of_one_step(1.0, 2.0, order), order / 8.0) << order;
  }
}

TEST(PrivacyAccountant, AnIntegerOrderIsTheBinomialMoment) {
  // A_2 = (1 - q)^2 + 2 q (1 - q) + q^2 e^(1 / sigma^2) for q = 1/2, sigma = 1.
  double moment = 0.25 + 0.5 + 0.25 * std::exp(1.0);
  EXPECT_NEAR(rdp_of_one_step(0.5, 1.0, 2.0), std::log(moment), 1e-15);
}

TEST(PrivacyAccountant, TheFractionalSeriesMeetsTheIntegerSums) {
  for (double q : {0.001, 0.05, 0.4}) {
    for (double sigma : {0.7, 1.1, 4.0}) {
      for (double order : {2.0, 3.0, 8.0, 20.0}) {
        double integer = rdp_of_one_step(q, sigma, order);
        for (Series series : {Series::kExact, Series::kUpperBound}) {
          double below = rdp_of_one_step(q, sigma, order - 1e-7, series);
          double above = rdp_of_one_step(q, sigma, order + 1e-7, series);
          EXPECT_NEAR((below + above) / 2, integer, 1e-6 * integer + 1e-12)
              << "q " << q << " sigma " << sigma << " order " << order;
        }
      }
    }
  }
}

TEST(PrivacyAccountant, TheUpperBoundIsNeverBelowTheExactSeries) {
  for (double sigma : {0.5, 0.8, 2.0}) {
    for (double order : {1.1, 1.5, 2.5, 7.7}) {
      double exact = rdp_of_one_step(0.01, sigma, order, Series::kExact);
      double bound = rdp_of_one_step(0.01, sigma, order, Series::kUpperBound);
      EXPECT_GE(bound, exact) << sigma << " " << order;
      EXPECT_GT(exact, 0) << sigma << " " << order;
    }
  }
}

TEST(PrivacyAccountant, EpsilonGrowsWithStepsAndFallsWithNoise) {
  double previous = 0;
  for (int64_t steps : {0, 1, 10, 100, 1000, 10000}) {
    Spent spent =
        rdp_epsilon({.sampling_rate = 0.01, .noise_multiplier = 1.1, .steps = steps}, 1e-5);
    EXPECT_GE(spent.epsilon, previous) << steps;
    previous = spent.epsilon;
  }
  previous = INFINITY;
  for (double sigma : {0.6, 0.8, 1.1, 2.0, 5.0}) {
    Spent spent =
        rdp_epsilon({.sampling_rate = 0.01, .noise_multiplier = sigma, .steps = 1000}, 1e-5);
    EXPECT_LT(spent.epsilon, previous) << sigma;
    previous = spent.epsilon;
  }
}

TEST(PrivacyAccountant, TheStepAccountantIsRdpEpsilonAndFindsTheBudgetsLastStep) {
  StepAccountant accountant(0.01, 1.1, 1e-5);
  for (int64_t steps : {0, 1, 10, 1000, 12345}) {
    Spent direct = rdp_epsilon({0.01, 1.1, steps}, 1e-5);
    EXPECT_EQ(accountant.after(steps).epsilon, direct.epsilon) << steps;
    EXPECT_EQ(accountant.after(steps).order, direct.order) << steps;
  }
  const double budget = accountant.after(777).epsilon;
  EXPECT_EQ(accountant.steps_within(budget, 5000), 777);
  EXPECT_EQ(accountant.steps_within(std::nextafter(budget, 0.0), 5000), 776);
  EXPECT_EQ(accountant.steps_within(budget, 500), 500);  // the limit
  EXPECT_EQ(accountant.steps_within(1e-6, 5000), 0);     // not even one step
}

// P(Binomial(n, q) > M) summed plainly in long double, from M + 1 up.
long double binomial_tail(int64_t n, double q, int64_t m) {
  long double tail = 0;
  for (int64_t k = m + 1; k <= n; ++k) {
    long double log_pmf = std::lgammal(n + 1.0L) - std::lgammal(k + 1.0L) -
                          std::lgammal(n - k + 1.0L) + k * std::log(static_cast<long double>(q)) +
                          (n - k) * std::log1p(-static_cast<long double>(q));
    tail += std::exp(log_pmf);
  }
  return tail;
}

TEST(PrivacyAccountant, PoissonBatchRowsAreTheSmallestThatOverflowRarelyEnough) {
  for (auto [n, q, overflow] : {std::tuple{1024L, 0.125, 1e-14}, std::tuple{60000L, 0.004, 1e-14},
                                std::tuple{60000L, 0.04, 1e-9}, std::tuple{50L, 0.5, 0.01}}) {
    SCOPED_TRACE(::testing::Message() << n << " " << q << " " << overflow);
    int64_t rows = poisson_batch_rows(n, q, overflow);
    EXPECT_LE(binomial_tail(n, q, rows), overflow * (1 + 1e-9));
    EXPECT_GT(binomial_tail(n, q, rows - 1), overflow * (1 - 1e-9));
    EXPECT_GT(rows, n * q);
  }
  EXPECT_EQ(poisson_batch_rows(100, 1.0, 1e-14), 100);
  EXPECT_TRUE(fails_with([] { poisson_batch_rows(100, 0.0, 1e-14); }, {"sampling_rate"}));
  EXPECT_TRUE(fails_with([] { poisson_batch_rows(0, 0.5, 1e-14); }, {"0 examples"}));
}

TEST(PrivacyAccountant, TheNoiseForATargetEpsilonIsTheSmallestThatMeetsIt) {
  // 1000 steps at q = 0.01 and sigma 1.1 spend 1.71177 at delta 1e-5 (dp-accounting's figure).
  const double target = rdp_epsilon({0.01, 1.1, 1000}, 1e-5).epsilon;
  double sigma = noise_for_epsilon(0.01, 1000, 1e-5, target);
  EXPECT_NEAR(sigma, 1.1, 1e-5);
  EXPECT_LE(rdp_epsilon({0.01, sigma, 1000}, 1e-5).epsilon, target);
  EXPECT_GT(rdp_epsilon({0.01, sigma * (1 - 2e-6), 1000}, 1e-5).epsilon, target);
  // Larger and smaller noises than 1 are found too.
  for (double want : {0.7, 4.0}) {
    double spent = rdp_epsilon({0.05, want, 300}, 1e-6).epsilon;
    EXPECT_NEAR(noise_for_epsilon(0.05, 300, 1e-6, spent), want, 1e-5 * want) << want;
  }
  EXPECT_TRUE(fails_with([] { noise_for_epsilon(0.01, 1000, 1e-5, 1e-4); },
                         {"no noise multiplier", "aim for a larger epsilon"}));
  EXPECT_TRUE(fails_with([] { noise_for_epsilon(0.01, 0, 1e-5, 1.0); }, {"steps is 0"}));
  EXPECT_TRUE(fails_with([] { noise_for_epsilon(0.01, 10, 1e-5, -1.0); }, {"target epsilon"}));
}

TEST(PrivacyAccountant, BadSettingsAreRefusedByName) {
  auto spend = [](double q, double sigma, int64_t steps, double delta) {
    return rdp_epsilon({.sampling_rate = q, .noise_multiplier = sigma, .steps = steps}, delta);
  };
  EXPECT_TRUE(
      fails_with([&] { spend(0, 1, 1, 1e-5); }, {"sampling_rate is 0; it must be in (0, 1]"}));
  EXPECT_TRUE(fails_with([&] { spend(1.5, 1, 1, 1e-5); }, {"sampling_rate is 1.5"}));
  EXPECT_TRUE(fails_with([&] { spend(NAN, 1, 1, 1e-5); }, {"sampling_rate is nan"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 0, 1, 1e-5); },
                         {"noise_multiplier is 0; it must be finite and above 0"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, -1, 1, 1e-5); }, {"noise_multiplier is -1"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, -1, 1e-5); }, {"steps is -1; it must be 0 or more"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, 1, 1); }, {"delta is 1; it must be in (0, 1)"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, 1, 0); }, {"delta is 0"}));
  std::vector<double> orders = {2, 1};
  EXPECT_TRUE(fails_with(
      [&] { rdp_epsilon({.sampling_rate = 0.1, .noise_multiplier = 1, .steps = 1}, 1e-5, orders); },
      {"Rényi order 1 must be finite and above 1"}));
}

// Each order's epsilon, so that the check can compare order by order (dp-accounting gives
// up on a fractional order whose series has not converged in 1000 terms, and leaves it out).
std::vector<double> epsilon_per_order(const SubsampledGaussian& mechanism, double delta,
                                      const std::vector<double>& orders, Series series) {
  std::vector<double> epsilons;
  for (double order : orders) {
    epsilons.push_back(rdp_epsilon(mechanism, delta, std::span(&order, 1), series).epsilon);
  }
  return epsilons;
}

TEST(PrivacyAccountant, MatchesDpAccountingAndOpacus) {
  // Opacus' default orders (dp-accounting's start its integers at 11, and go on to 1024).
  std::vector<double> opacus_orders;
  for (int x = 1; x < 100; ++x) opacus_orders.push_back(1 + x / 10.0);
  for (int order = 12; order < 64; ++order) opacus_orders.push_back(order);
  const std::vector<double> orders = default_orders();
  nlohmann::json cases = nlohmann::json::array();
  for (double q : {0.001, 0.01, 256.0 / 60000, 0.1, 0.5, 1.0}) {
    for (double sigma : {0.5, 0.8, 1.1, 2.0, 5.0}) {
      for (auto [steps, delta] :
           {std::pair<int64_t, double>{1, 1e-5}, {100, 1e-7}, {10000, 1e-5}}) {
        {
          SubsampledGaussian mechanism{
              .sampling_rate = q, .noise_multiplier = sigma, .steps = steps};
          std::vector<double> epsilons =
              epsilon_per_order(mechanism, delta, orders, Series::kUpperBound);
          size_t best = static_cast<size_t>(std::min_element(epsilons.begin(), epsilons.end()) -
                                            epsilons.begin());
          // rdp_epsilon's answer is the smallest of them, at that order.
          Spent spent = rdp_epsilon(mechanism, delta);
          EXPECT_EQ(spent.epsilon, epsilons[best]);
          EXPECT_EQ(spent.order, orders[best]);
          cases.push_back({{"q", q},
                           {"sigma", sigma},
                           {"steps", steps},
                           {"delta", delta},
                           {"epsilon", spent.epsilon},
                           {"order", spent.order},
                           {"orders", orders},
                           {"epsilons", epsilons},
                           {"opacus_orders", opacus_orders},
                           {"epsilons_exact",
                            epsilon_per_order(mechanism, delta, opacus_orders, Series::kExact)}});
        }
      }
    }
  }
  testing::PeerReport peer = testing::run_peer_check("privacy_crosscheck.py", {{"cases", cases}});
  std::cout << peer.text.substr(peer.text.rfind("privacy_crosscheck:"));  // the figures
  EXPECT_EQ(peer.status, 0) << peer.text;
  EXPECT_THAT(peer.text, ::testing::HasSubstr("privacy_crosscheck: 90 cases"));
}

}  // namespace
}  // namespace kiln::privacy
