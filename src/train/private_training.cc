#include "train/private_training.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kiln/error.h"

namespace kiln::train {

PrivacyPlan plan_privacy(const TrainConfig& config, int64_t train_examples, int64_t planned_steps) {
  const PrivacyConfig& p = config.privacy;
  const int64_t batch = config.train.batch_size;
  if (batch > train_examples) {
    fail(kUnknownSite,
         fmt::format("{}: privacy.enabled = true with train.batch_size = {} and {} training "
                     "examples: the sampling rate q = batch_size / examples must be at most 1",
                     config.source, batch, train_examples),
         "lower train.batch_size (the expected number of examples each step draws)");
  }
  const double rate = static_cast<double>(batch) / static_cast<double>(train_examples);
  // Every device of a mesh takes the same number of whole chunks.
  const int64_t chunk = p.examples_per_chunk * std::max<int64_t>(1, config.mesh.data);
  int64_t rows = std::max<int64_t>(
      1, privacy::poisson_batch_rows(train_examples, rate, kPoissonOverflowPerStep));
  rows = (rows + chunk - 1) / chunk * chunk;
  const privacy::Accountant accountant =
      p.accountant == "pld" ? privacy::Accountant::kPld : privacy::Accountant::kRdp;
  PrivacyPlan plan{rate, rows,
                   privacy::StepAccountant(rate, p.noise_multiplier, p.delta, accountant),
                   planned_steps, ""};
  if (p.max_epsilon > 0) {
    plan.steps_within_budget = plan.accountant.steps_within(p.max_epsilon, planned_steps);
    if (plan.steps_within_budget == 0) {
      fail(kUnknownSite,
           fmt::format("{}: privacy.max_epsilon = {}: one step already spends epsilon {:.4g} at "
                       "delta {} (q {:.4g}, noise_multiplier {})",
                       config.source, p.max_epsilon, plan.accountant.after(1).epsilon, p.delta,
                       rate, p.noise_multiplier),
           "raise privacy.max_epsilon or privacy.noise_multiplier, or lower train.batch_size");
    }
  }
  if (p.delta * static_cast<double>(train_examples) >= 1) {
    plan.warning = fmt::format(
        "privacy.delta = {} is not below 1 / N = {:.3g} (N = {} training examples): a mechanism "
        "that publishes one example in the clear meets such a delta; choose delta well below "
        "1 / N",
        p.delta, 1.0 / static_cast<double>(train_examples), train_examples);
  }
  return plan;
}

nlohmann::json privacy_record(const TrainConfig& config, const PrivacyPlan& plan, int64_t steps,
                              int64_t truncated_examples) {
  const PrivacyConfig& p = config.privacy;
  privacy::Spent spent = plan.accountant.after(steps);
  const bool pld = plan.accountant.accountant() == privacy::Accountant::kPld;
  nlohmann::json record = {
      {"mechanism", "DP-SGD, Poisson sampling"},
      {"accountant", pld ? "PLD (connect-the-dots discretization 1e-4, Doroshenko et al. 2022)"
                         : "RDP (Mironov et al. 2019), Balle et al. 2020 conversion"},
      {"sampling_rate", plan.sampling_rate},
      {"noise_multiplier", p.noise_multiplier},
      {"clip_norm", p.clip_norm},
      {"batch_rows", plan.batch_rows},
      {"steps", steps},
      {"delta", p.delta},
      {"epsilon", spent.epsilon},
      {"overflow_probability_bound", static_cast<double>(steps) * kPoissonOverflowPerStep},
      {"truncated_examples", truncated_examples}};
  if (!pld) record["rdp_order"] = spent.order;
  if (p.max_epsilon > 0) {
    record["max_epsilon"] = p.max_epsilon;
    record["steps_within_budget"] = plan.steps_within_budget;
  }
  return record;
}

}  // namespace kiln::train
