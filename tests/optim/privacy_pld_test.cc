// The PLD accountant (kiln/privacy.h): the Gaussian mechanism's exact epsilon (Balle and
// Wang 2018) bounded from above to within the discretization, monotonicity, the RDP
// accountant's epsilon bounded from above, epsilon and delta inverse to each other, bad
// settings refused by name, and epsilon within the bounds that Google's dp-accounting
// (its PLDAccountant and its optimistic estimate) and Opacus' PRV accountant state
// (tests/tools/privacy_pld_crosscheck.py) on a grid of sampling rates, noise, steps and
// deltas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <numbers>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/privacy.h"
#include "support/errors.h"
#include "support/peer_check.h"

namespace kiln::privacy {
namespace {

using ::kiln::testing::fails_with;

double phi(double z) {
  return 0.5 * std::erfc(-z / std::numbers::sqrt2);
}

// The Gaussian mechanism's exact delta at epsilon (sensitivity 1, noise sigma; Balle and
// Wang 2018, Theorem 8), and the epsilon of a delta by bisection on it (it falls with
// epsilon).
double exact_gaussian_delta(double sigma, double epsilon) {
  return phi(0.5 / sigma - epsilon * sigma) -
         std::exp(epsilon) * phi(-0.5 / sigma - epsilon * sigma);
}

double exact_gaussian_epsilon(double sigma, double delta) {
  double low = 0, high = 100;
  for (int i = 0; i < 200; ++i) {
    double middle = (low + high) / 2;
    (exact_gaussian_delta(sigma, middle) > delta ? low : high) = middle;
  }
  return high;
}

TEST(PldAccountant, WithoutSamplingItBoundsTheGaussianMechanismWithinTheGrid) {
  for (double sigma : {0.5, 1.0, 2.0, 5.0}) {
    for (double delta : {1e-3, 1e-5, 1e-8}) {
      for (double discretization : {1e-3, 1e-4}) {
        const double exact = exact_gaussian_epsilon(sigma, delta);
        const double pld = pld_epsilon({1.0, sigma, 1}, delta, {.discretization = discretization});
        SCOPED_TRACE(::testing::Message() << "sigma " << sigma << " delta " << delta
                                          << " discretization " << discretization);
        // Connecting the dots meets the curve at every grid point and is above it between:
        // never below the exact epsilon, and within the grid step above it.
        EXPECT_GE(pld, exact * (1 - 1e-12));
        EXPECT_LE(pld, exact + discretization);
      }
    }
  }
}

TEST(PldAccountant, EpsilonGrowsWithStepsAndSamplingAndFallsWithNoise) {
  double previous = 0;
  for (int64_t steps : {0, 1, 10, 100, 1000, 10000}) {
    double epsilon = pld_epsilon({0.01, 1.1, steps}, 1e-5);
    if (steps == 0) {
      EXPECT_EQ(epsilon, 0);
    } else {
      EXPECT_GT(epsilon, previous) << steps;
    }
    previous = epsilon;
  }
  previous = 0;
  for (double q : {0.001, 0.01, 0.05, 0.2, 1.0}) {
    double epsilon = pld_epsilon({q, 1.1, 100}, 1e-5);
    EXPECT_GT(epsilon, previous) << q;
    previous = epsilon;
  }
  previous = INFINITY;
  for (double sigma : {0.6, 0.8, 1.1, 2.0, 5.0}) {
    double epsilon = pld_epsilon({0.01, sigma, 1000}, 1e-5);
    EXPECT_LT(epsilon, previous) << sigma;
    previous = epsilon;
  }
}

TEST(PldAccountant, IsBelowTheRdpAccountantOnDpSgdSettings) {
  // MNIST's DP-SGD (Abadi et al. 2016): batch 256 of 60,000, sigma 1.1, 40 epochs.
  for (auto [q, sigma, steps] :
       {std::tuple{256.0 / 60000, 1.1, int64_t{9375}}, std::tuple{0.01, 1.1, int64_t{1000}},
        std::tuple{0.001, 0.8, int64_t{10000}}, std::tuple{0.1, 2.0, int64_t{100}}}) {
    const SubsampledGaussian mechanism{q, sigma, steps};
    const double rdp = rdp_epsilon(mechanism, 1e-5).epsilon;
    const double pld = pld_epsilon(mechanism, 1e-5);
    EXPECT_LT(pld, rdp) << q << " " << sigma << " " << steps;
    EXPECT_GT(pld, 0.5 * rdp) << q << " " << sigma << " " << steps;  // not absurdly far below
  }
}

TEST(PldAccountant, EpsilonAndDeltaAreInverse) {
  const PrivacyLossDistribution pld({0.01, 1.1, 1000});
  for (double delta : {1e-4, 1e-5, 1e-7}) {
    const double epsilon = pld.epsilon(delta);
    EXPECT_NEAR(pld.delta(epsilon), delta, 1e-9 * delta) << delta;
    // Just below it, delta is above the target.
    EXPECT_GT(pld.delta(epsilon * (1 - 1e-6)), delta) << delta;
  }
  EXPECT_EQ(pld_delta({0.01, 1.1, 0}, 0.0), 0.0);  // no steps, no loss
  // delta falls with epsilon.
  double previous = 1;
  for (double epsilon : {0.0, 0.5, 1.0, 2.0, 4.0}) {
    const double delta = pld.delta(epsilon);
    EXPECT_LT(delta, previous) << epsilon;
    previous = delta;
  }
  // The same as the functions that build it once per call.
  EXPECT_EQ(pld.epsilon(1e-5), pld_epsilon({0.01, 1.1, 1000}, 1e-5));
  EXPECT_EQ(pld.delta(1.0), pld_delta({0.01, 1.1, 1000}, 1.0));
}

TEST(PldAccountant, ThreadsTogetherGetTheBitsOfOneAlone) {
  // Each call has its FFT object of its own, and nothing depends on timing.
  const double alone = pld_epsilon({0.01, 1.1, 1000}, 1e-5);
  std::vector<double> together(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < together.size(); ++i) {
    threads.emplace_back([&together, i] { together[i] = pld_epsilon({0.01, 1.1, 1000}, 1e-5); });
  }
  for (std::thread& thread : threads) thread.join();
  for (double epsilon : together) EXPECT_EQ(epsilon, alone);
}

TEST(PldAccountant, BadSettingsAreRefusedByName) {
  auto spend = [](double q, double sigma, int64_t steps, double delta, PldOptions options = {}) {
    return pld_epsilon({.sampling_rate = q, .noise_multiplier = sigma, .steps = steps}, delta,
                       options);
  };
  EXPECT_TRUE(
      fails_with([&] { spend(0, 1, 1, 1e-5); }, {"sampling_rate is 0; it must be in (0, 1]"}));
  EXPECT_TRUE(fails_with([&] { spend(1.5, 1, 1, 1e-5); }, {"sampling_rate is 1.5"}));
  EXPECT_TRUE(fails_with([&] { spend(NAN, 1, 1, 1e-5); }, {"sampling_rate is nan"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 0, 1, 1e-5); },
                         {"noise_multiplier is 0; it must be finite and above 0"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, INFINITY, 1, 1e-5); }, {"noise_multiplier is inf"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, -1, 1e-5); }, {"steps is -1; it must be 0 or more"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, 1, 1); }, {"delta is 1; it must be in (0, 1)"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, 1, 0); }, {"delta is 0"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, 1, 1e-5, {.discretization = 0}); },
                         {"PLD discretization is 0; it must be finite and above 0"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, 1, 1e-5, {.discretization = NAN}); },
                         {"PLD discretization is nan"}));
  EXPECT_TRUE(fails_with([&] { spend(0.1, 1, 1, 1e-5, {.tail_mass = -1e-15}); },
                         {"PLD tail_mass is -1e-15; it must be in [0, 1e-3]"}));
  EXPECT_TRUE(
      fails_with([&] { spend(0.1, 1, 1, 1e-5, {.tail_mass = 0.5}); }, {"PLD tail_mass is 0.5"}));
  // Too fine a grid for the loss's range is refused before it takes the memory.
  EXPECT_TRUE(fails_with([&] { spend(1.0, 0.05, 1, 1e-5, {.discretization = 1e-6}); },
                         {"points at discretization 1e-06", "coarser"}));
  // Grids beyond int64's range are refused before they are indexed.
  EXPECT_TRUE(fails_with([&] { spend(1.0, 1e-9, 1, 1e-5); }, {"points at discretization"}));
  EXPECT_TRUE(fails_with([&] { spend(0.01, 1.1, int64_t{1} << 60, 1e-5); },
                         {"e+17 points at discretization 0.0001"}));
  EXPECT_TRUE(fails_with(
      [] {
        pld_delta({0.1, 1, 10}, -1.0);
      },
      {"epsilon is -1; it must be finite and 0 or more"}));
}

TEST(PldAccountant, TooSmallADeltaIsAnInfiniteEpsilonOrRefused) {
  // The composition may cut up to tail_mass, counted as an infinite loss.
  const SubsampledGaussian mechanism{0.01, 1.1, 100};
  EXPECT_EQ(pld_epsilon(mechanism, 1e-5, {.tail_mass = 1e-3}), INFINITY);
  EXPECT_TRUE(std::isfinite(pld_epsilon(mechanism, 1e-5, {.tail_mass = 1e-6})));
  // Deltas where the FFTs' rounding would move epsilon are refused.
  EXPECT_TRUE(fails_with(
      [&] { pld_epsilon(mechanism, 1e-11); },
      {"delta is 1e-11; the PLD accountant needs it at 1e-10 or more", "the RDP accountant"}));
  EXPECT_TRUE(std::isfinite(pld_epsilon(mechanism, 1e-10)));
}

TEST(PldAccountant, MatchesDpAccountingAndOpacus) {
  nlohmann::json cases = nlohmann::json::array();
  const std::vector<double> deltas = {1e-5, 1e-6};
  for (double q : {0.001, 0.01, 0.1}) {
    for (double sigma : {0.8, 1.1, 2.0, 4.0}) {
      for (int64_t steps : {1, 100, 1000, 10000}) {
        const PrivacyLossDistribution pld({q, sigma, steps});
        std::vector<double> epsilons;
        for (double delta : deltas) epsilons.push_back(pld.epsilon(delta));
        // And delta the other way round, where it is well above the cut mass: at half the
        // epsilon of the first delta.
        const double epsilon = epsilons[0] / 2;
        cases.push_back({{"q", q},
                         {"sigma", sigma},
                         {"steps", steps},
                         {"deltas", deltas},
                         {"epsilons", epsilons},
                         {"epsilon", epsilon},
                         {"delta", pld.delta(epsilon)}});
      }
    }
  }
  testing::PeerReport peer =
      testing::run_peer_check("privacy_pld_crosscheck.py", {{"cases", cases}});
  const size_t figures = peer.text.rfind("privacy_pld_crosscheck:");
  std::cout << (figures == std::string::npos ? peer.text : peer.text.substr(figures));
  EXPECT_EQ(peer.status, 0) << peer.text;
  EXPECT_THAT(peer.text, ::testing::HasSubstr("privacy_pld_crosscheck: 48 cases"));
}

}  // namespace
}  // namespace kiln::privacy
