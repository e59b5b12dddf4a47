// `kiln privacy epsilon`: the (epsilon, delta) a DP-SGD run spends, from its sampling rate,
// noise multiplier and steps, by the RDP or the PLD accountant; `kiln privacy noise`: the
// noise multiplier that keeps a run within a target epsilon (kiln/privacy.h), before
// anything is trained.
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kiln/error.h"
#include "kiln/privacy.h"

namespace kiln::cli {
namespace {

struct EpsilonOptions {
  double sampling_rate = 0;
  double batch = 0;
  double examples = 0;
  double noise_multiplier = 0;
  double target_epsilon = 0;  // kiln privacy noise
  int64_t steps = 0;
  double epochs = 0;
  double delta = 1e-5;
  bool exact = false;
  std::string accountant = "rdp";  // kiln privacy epsilon: rdp or pld
  bool json = false;
};

// The sampling rate and the number of steps, from -q or --batch/--examples and from --steps
// or --epochs; `command` names the subcommand in errors.
std::pair<double, int64_t> rate_and_steps(const EpsilonOptions& options, std::string_view command) {
  double q = options.sampling_rate;
  if (options.batch > 0 || options.examples > 0) {
    if (!(options.batch > 0 && options.examples > 0) || q > 0) {
      fail(kUnknownSite,
           fmt::format("kiln privacy {}: give --batch and --examples together, or "
                       "--sampling-rate",
                       command),
           "the sampling rate is the expected batch size over the number of examples");
    }
    q = options.batch / options.examples;
  }
  int64_t steps = options.steps;
  if (steps <= 0 && options.epochs <= 0) {
    fail(kUnknownSite, fmt::format("kiln privacy {}: give --steps or --epochs", command),
         "the privacy spent grows with every step the mechanism runs");
  }
  if (options.epochs > 0) {
    if (steps > 0 || q <= 0) {
      fail(kUnknownSite,
           fmt::format("kiln privacy {}: give --epochs (with a sampling rate) or --steps, not "
                       "both",
                       command),
           "an epoch is 1 / sampling rate steps");
    }
    steps = static_cast<int64_t>(std::ceil(options.epochs / q));
  }
  return {q, steps};
}

int print_noise(const EpsilonOptions& options) {
  auto [q, steps] = rate_and_steps(options, "noise");
  const bool pld = options.accountant == "pld";
  const privacy::Accountant accountant =
      pld ? privacy::Accountant::kPld : privacy::Accountant::kRdp;
  double sigma =
      privacy::noise_for_epsilon(q, steps, options.delta, options.target_epsilon, accountant);
  privacy::Spent spent = privacy::StepAccountant(q, sigma, options.delta, accountant).after(steps);
  if (options.json) {
    nlohmann::json record = {{"accountant", options.accountant},
                             {"noise_multiplier", sigma},
                             {"epsilon", spent.epsilon},
                             {"target_epsilon", options.target_epsilon},
                             {"delta", options.delta},
                             {"sampling_rate", q},
                             {"steps", steps}};
    if (!pld) record["order"] = spent.order;
    fmt::print("{}\n", record.dump());
    return 0;
  }
  fmt::print(
      "noise multiplier {:.4f}: {} steps at sampling rate {:g} spend epsilon {:.4f} at delta {:g} "
      "({}), within the target {:g}\n",
      sigma, steps, q, spent.epsilon, options.delta,
      pld ? fmt::format("PLD accountant, discretization {:g}", privacy::PldOptions{}.discretization)
          : fmt::format("RDP accountant, Rényi order {:g}", spent.order),
      options.target_epsilon);
  return 0;
}

int print_pld_epsilon(const EpsilonOptions& options) {
  if (options.exact) {
    fail(kUnknownSite,
         "kiln privacy epsilon: --exact is the RDP accountant's (how it sums the series of its "
         "fractional orders); the PLD accountant has no series",
         "leave out --exact, or use --accountant rdp");
  }
  auto [q, steps] = rate_and_steps(options, "epsilon");
  const privacy::PldOptions pld;
  const double epsilon = privacy::pld_epsilon(
      {.sampling_rate = q, .noise_multiplier = options.noise_multiplier, .steps = steps},
      options.delta, pld);
  if (options.json) {
    fmt::print("{}\n", nlohmann::json({{"accountant", "pld"},
                                       {"epsilon", epsilon},
                                       {"delta", options.delta},
                                       {"discretization", pld.discretization},
                                       {"sampling_rate", q},
                                       {"noise_multiplier", options.noise_multiplier},
                                       {"steps", steps}})
                           .dump());
    return 0;
  }
  fmt::print(
      "epsilon {:.4f} at delta {:g} (PLD accountant, discretization {:g}) for {} steps of the "
      "Poisson-subsampled Gaussian mechanism, sampling rate {:g}, noise multiplier {:g}\n",
      epsilon, options.delta, pld.discretization, steps, q, options.noise_multiplier);
  return 0;
}

int print_epsilon(const EpsilonOptions& options) {
  if (options.accountant == "pld") return print_pld_epsilon(options);
  auto [q, steps] = rate_and_steps(options, "epsilon");
  privacy::Series series = options.exact ? privacy::Series::kExact : privacy::Series::kUpperBound;
  privacy::Spent spent = privacy::rdp_epsilon(
      {.sampling_rate = q, .noise_multiplier = options.noise_multiplier, .steps = steps},
      options.delta, {}, series);
  if (options.json) {
    fmt::print("{}\n", nlohmann::json({{"accountant", "rdp"},
                                       {"epsilon", spent.epsilon},
                                       {"delta", options.delta},
                                       {"order", spent.order},
                                       {"sampling_rate", q},
                                       {"noise_multiplier", options.noise_multiplier},
                                       {"steps", steps},
                                       {"series", options.exact ? "exact" : "upper_bound"}})
                           .dump());
    return 0;
  }
  fmt::print(
      "epsilon {:.4f} at delta {:g} (RDP accountant, Rényi order {:g}) for {} steps of the "
      "Poisson-subsampled Gaussian mechanism, sampling rate {:g}, noise multiplier {:g}\n",
      spent.epsilon, options.delta, spent.order, steps, q, options.noise_multiplier);
  return 0;
}

}  // namespace

Runner add_privacy_command(CLI::App& app) {
  auto* privacy =
      app.add_subcommand("privacy", "Differential privacy accounting (docs/privacy.md)");
  privacy->require_subcommand(1);
  auto* epsilon = privacy->add_subcommand(
      "epsilon",
      "The (epsilon, delta) of DP-SGD, the Poisson-subsampled Gaussian mechanism over its steps: "
      "by its Rényi DP (Mironov, Talwar and Zhang 2019) converted at the best of dp-accounting's "
      "orders (--accountant rdp, the default), or by its privacy loss distribution composed by "
      "FFT (--accountant pld: tighter)");
  auto options = std::make_shared<EpsilonOptions>();
  auto* noise = privacy->add_subcommand(
      "noise",
      "The smallest noise multiplier whose steps stay within a target epsilon at delta (the "
      "same accounting as `epsilon`: --accountant rdp with its upper-bound series, or pld); "
      "what to set as privacy.noise_multiplier for a budget");
  // The options both subcommands take: the mechanism's rate and length, delta, JSON.
  for (CLI::App* command : {epsilon, noise}) {
    command->add_option("--sampling-rate,-q", options->sampling_rate,
                        "Probability with which each example joins a batch, in (0, 1]");
    command->add_option("--batch", options->batch, "Expected batch size (with --examples)");
    command->add_option("--examples", options->examples, "Training examples (with --batch)");
    command->add_option("--steps", options->steps, "Steps taken");
    command->add_option("--epochs", options->epochs,
                        "Epochs instead of steps (each 1 / sampling rate steps, rounded up)");
    command->add_option("--delta", options->delta, "Target delta, in (0, 1)")
        ->capture_default_str();
    command->add_flag("--json", options->json, "Print one JSON object");
  }
  epsilon
      ->add_option("--noise-multiplier,--sigma", options->noise_multiplier,
                   "Noise standard deviation over the clipping norm, > 0")
      ->required();
  for (CLI::App* command : {epsilon, noise}) {
    command
        ->add_option("--accountant", options->accountant,
                     "rdp: Rényi DP (the default, as privacy.accountant's); pld: the privacy "
                     "loss distribution (dp-accounting's PLDAccountant), a smaller epsilon")
        ->check(CLI::IsMember({"rdp", "pld"}))
        ->capture_default_str();
  }
  epsilon->add_flag("--exact", options->exact,
                    "Sum the fractional orders' series with their signs (Opacus') instead of "
                    "the magnitudes' upper bound (dp-accounting's, the default)");
  noise->add_option("--epsilon", options->target_epsilon, "The target epsilon, > 0")->required();
  return [options, noise] {
    return noise->parsed() ? print_noise(*options) : print_epsilon(*options);
  };
}

}  // namespace kiln::cli
