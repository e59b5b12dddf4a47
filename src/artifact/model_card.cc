// MODEL_CARD.md (model_card.h).
#include "artifact/model_card.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/ops.h"

namespace kiln::artifact {
namespace {

std::string percent(double fraction) {
  return fmt::format("{:.2f}%", 100 * fraction);
}

std::string intended_use(const Manifest& m, const data::Dataset& dataset) {
  bool language_model = dataset.input_dtype == DType::i32;
  std::string what =
      language_model
          ? fmt::format("predicts the next token at each of {} positions (a vocabulary of {})",
                        m.input.shape.at(1), m.output.shape.back())
          : fmt::format("classifies records of {}[{}] into {} classes", dtype_name(m.raw_dtype),
                        fmt::join(m.raw_shape, ","), m.output.shape.back());
  return fmt::format(
      "## Intended use\n\n"
      "The model {}. It was trained by kiln from the run below, as a baseline for the data "
      "it was trained on: for research, comparison and the checks of a pipeline, on records "
      "like the training data (the same source, dtype, shape and preprocessing).\n\n"
      "## Limitations\n\n"
      "- Evaluated only on the run's test split (below): its figures say nothing of data from "
      "another source, time or population, where accuracy may be much lower.\n"
      "- No analysis of fairness, robustness to corrupted or adversarial inputs, or "
      "calibration of its outputs was made.\n"
      "- The outputs are logits; their largest is the predicted class. They are not "
      "calibrated probabilities.\n"
      "- Inputs must be preprocessed as recorded in manifest.json (`kiln predict` and "
      "`Artifact::predict` do it); a record of another shape or dtype is refused.\n\n",
      what);
}

std::string training_data(const track::RunInfo& info, const data::Dataset& dataset) {
  std::string out = fmt::format(
      "## Training data\n\n"
      "- Dataset identity (SHA-256 of its content): `{}`\n"
      "- Training examples: {} ({} dropped by the contracts); test examples: {} ({} dropped)\n"
      "- Preprocessing: `{}`\n"
      "- Contracts: {} training and {} test records violated them "
      "(run.json's `dataset` has the full reports)\n\n"
      "| role | file | SHA-256 |\n|---|---|---|\n",
      info.identity ? info.identity->data_sha256 : dataset.identity, dataset.train.size(),
      dataset.dropped_train, dataset.test.size(), dataset.dropped_test, dataset.normalize,
      dataset.train_report.bad_record_count(), dataset.test_report.bad_record_count());
  for (const data::SourceFile& file : dataset.files) {
    out += fmt::format("| {} | `{}` | `{}` |\n", file.role, file.path, file.sha256);
  }
  return out + "\n";
}

std::string per_class(const Evaluation& e) {
  std::string out = "| class | support | precision | recall |\n|---|---|---|---|\n";
  for (int64_t c = 0; c < e.classes; ++c) {
    int64_t support = 0, predicted = 0;
    for (int64_t k = 0; k < e.classes; ++k) {
      support += e.confusion[static_cast<size_t>(c * e.classes + k)];
      predicted += e.confusion[static_cast<size_t>(k * e.classes + c)];
    }
    int64_t hits = e.confusion[static_cast<size_t>(c * e.classes + c)];
    auto ratio = [](int64_t a, int64_t b) {
      return b > 0 ? percent(static_cast<double>(a) / static_cast<double>(b)) : std::string("-");
    };
    out += fmt::format("| {} | {} | {} | {} |\n", c, support, ratio(hits, predicted),
                       ratio(hits, support));
  }
  out += "\nConfusion matrix (rows: label, columns: predicted class):\n\n|   |";
  for (int64_t c = 0; c < e.classes; ++c) out += fmt::format(" {} |", c);
  out += "\n|---|";
  for (int64_t c = 0; c < e.classes; ++c) out += "---|";
  out += "\n";
  for (int64_t row = 0; row < e.classes; ++row) {
    out += fmt::format("| **{}** |", row);
    for (int64_t col = 0; col < e.classes; ++col) {
      out += fmt::format(" {} |", e.confusion[static_cast<size_t>(row * e.classes + col)]);
    }
    out += "\n";
  }
  return out + "\n";
}

std::string evaluation_section(const Evaluation& e, const track::RunInfo& info) {
  double accuracy =
      e.predictions > 0 ? static_cast<double>(e.correct) / static_cast<double>(e.predictions) : NAN;
  auto [low, high] = wilson_interval(e.correct, e.predictions);
  std::string out = fmt::format(
      "## Evaluation\n\n"
      "Measured on the exported artifact itself, on the run's whole test split ({} "
      "predictions), at export (its outputs equal the trainer's bit for bit):\n\n"
      "- Accuracy: **{}** (95% Wilson interval {} to {})\n",
      e.predictions, percent(accuracy), percent(low), percent(high));
  if (info.final_metrics && std::isfinite(info.final_metrics->test_loss)) {
    out += fmt::format("- Test loss (cross-entropy, as the run recorded it): {:.4f}\n",
                       info.final_metrics->test_loss);
  }
  out += "\n";
  if (e.confusion.empty()) {
    return out + fmt::format("Per-class figures are left out for {} classes.\n\n", e.classes);
  }
  return out + per_class(e);
}

}  // namespace

void Evaluation::add(const Array& outputs, const std::vector<int32_t>& labels, int64_t examples) {
  classes = outputs.dim(outputs.rank() - 1);
  if (confusion.empty() && outputs.rank() == 2 && classes <= kMaxCardClasses) {
    confusion.assign(static_cast<size_t>(classes * classes), 0);
  }
  std::vector<int32_t> predicted = argmax(outputs, -1, DType::i32).to_vector<int32_t>();
  const size_t per_row = predicted.size() / static_cast<size_t>(outputs.dim(0));
  const size_t counted = static_cast<size_t>(examples) * per_row;
  for (size_t i = 0; i < counted; ++i) {
    ++predictions;
    correct += predicted[i] == labels[i];
    if (!confusion.empty()) {
      ++confusion[static_cast<size_t>(labels[i]) * static_cast<size_t>(classes) +
                  static_cast<size_t>(predicted[i])];
    }
  }
}

std::pair<double, double> wilson_interval(int64_t successes, int64_t trials) {
  if (trials <= 0) return {NAN, NAN};
  const double z = 1.959963984540054;  // the 97.5th percentile of the standard normal
  const double n = static_cast<double>(trials);
  const double p = static_cast<double>(successes) / n;
  const double denominator = 1 + z * z / n;
  const double center = (p + z * z / (2 * n)) / denominator;
  const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

std::string model_card(const Manifest& m, const Evaluation& evaluation, const track::RunInfo& info,
                       const data::Dataset& dataset, const std::string& config_toml) {
  std::string card = fmt::format(
      "# Model card: {}\n\n"
      "Exported by kiln {} from run `{}`{} (kernels: {}). Input {}[{}], output {}[{}] (the "
      "first axis is the batch; `kiln predict` takes any number of records). The artifact's "
      "version and the SHA-256 of its files are in manifest.json.\n\n",
      m.name, m.kiln_version, m.run,
      m.checkpoint_step ? fmt::format(", its savepoint of step {}", *m.checkpoint_step) : "",
      m.kernels, dtype_name(m.input.dtype), fmt::join(m.input.shape, ","),
      dtype_name(m.output.dtype), fmt::join(m.output.shape, ","));
  card += intended_use(m, dataset);
  card += training_data(info, dataset);
  card += evaluation_section(evaluation, info);
  card += fmt::format(
      "## Training config\n\n"
      "The resolved config (every key; the hash of what in it changes the weights, the "
      "run's `config_sha256`: `{}`), also in this artifact as config.toml:\n\n"
      "```toml\n{}```\n\n## Reproducing it\n\n",
      m.config_sha256, config_toml);
  if (m.checkpoint_step) {
    card += fmt::format(
        "These are the weights of the run's savepoint of step {}: `kiln resume` of the run "
        "continues from there, bit for bit, and `kiln train config.toml` trains the whole run "
        "again (its savepoint of step {} is this model).\n",
        *m.checkpoint_step, *m.checkpoint_step);
  } else {
    card += fmt::format(
        "```sh\nkiln train config.toml\n```\n\n"
        "trains it again from the same config{}; with the same data (identity above), kiln "
        "version and kernels, the weights are the same bits (params SHA-256 `{}`; `kiln "
        "reproduce` checks it).\n",
        info.seed ? fmt::format(" (seed {})", *info.seed) : "", m.params_sha256);
  }
  return card;
}

}  // namespace kiln::artifact
