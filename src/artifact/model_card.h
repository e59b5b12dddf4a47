// MODEL_CARD.md of an artifact (docs/artifacts.md, "The model card"): what the model is
// for and not for, the data it was trained and evaluated on (identity, files, contracts'
// outcome), its evaluation on the run's test split measured on the exported artifact itself
// (accuracy with a 95% interval, per-class precision and recall, the confusion matrix),
// the training config and the command that trains it again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artifact/manifest.h"
#include "data/dataset.h"
#include "track/run_info.h"

namespace kiln::artifact {

// The artifact's predictions on the evaluation set against its labels.
struct Evaluation {
  int64_t classes = 0;  // outputs per prediction (a language model's vocabulary)
  int64_t predictions = 0;
  int64_t correct = 0;
  // confusion[label * classes + predicted], kept for classifiers of up to kMaxCardClasses.
  std::vector<int64_t> confusion;

  // Adds one batch: `outputs` [rows, classes] (or [rows, tokens, classes]) and the labels,
  // the first `examples` rows counting.
  void add(const Array& outputs, const std::vector<int32_t>& labels, int64_t examples);
};

// A classifier with more classes than this gets no per-class table or confusion matrix.
inline constexpr int64_t kMaxCardClasses = 100;

// The 95% Wilson score interval of a proportion of `successes` in `trials`.
std::pair<double, double> wilson_interval(int64_t successes, int64_t trials);

std::string model_card(const Manifest& manifest, const Evaluation& evaluation,
                       const track::RunInfo& info, const data::Dataset& dataset,
                       const std::string& config_toml);

}  // namespace kiln::artifact
