// What a private run ([privacy], docs/privacy.md) settles before its first step: the
// sampling rate, the rows of its Poisson batches, and the accountant that says what each
// step spends; and what it records of that in run.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "kiln/privacy.h"
#include "train/config.h"

namespace kiln::train {

// The chance that a step draws more examples than its batch has rows for. At most steps x
// this is added to the run's delta (docs/privacy.md); at 1e-14 a run of a million steps adds
// 1e-8, well under any delta in use.
inline constexpr double kPoissonOverflowPerStep = 1e-14;

struct PrivacyPlan {
  double sampling_rate = 0;  // q = train.batch_size / N
  int64_t batch_rows = 0;    // rows of every batch: a multiple of examples_per_chunk x devices
  privacy::StepAccountant accountant;
  // The steps privacy.max_epsilon allows (no budget: the run's own steps).
  int64_t steps_within_budget = 0;
  // A warning to print (delta not below 1 / N), or empty.
  std::string warning;
};

// Checks the settings against the training set (q in (0, 1], names the keys otherwise) and
// computes the plan for a run of `planned_steps` steps.
PrivacyPlan plan_privacy(const TrainConfig& config, int64_t train_examples, int64_t planned_steps);

// run.json's "privacy" after `steps` steps, of which `truncated_examples` examples were drawn
// but found no row.
nlohmann::json privacy_record(const TrainConfig& config, const PrivacyPlan& plan, int64_t steps,
                              int64_t truncated_examples);

}  // namespace kiln::train
