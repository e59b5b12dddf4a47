#include "train/memory_fit.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "base/byte_size.h"
#include "kiln/error.h"

namespace kiln::train {
namespace {

const std::vector<std::string>& remat_order() {
  static const auto* order = new std::vector<std::string>{"none", "blocks_save_dots", "blocks"};
  return *order;
}

bool any_layer_remat(const ModelConfig& model) {
  return std::any_of(model.layers.begin(), model.layers.end(),
                     [](const LayerConfig& layer) { return layer.remat != "none"; });
}

// `model` with the blocks the budget may recompute, each with save_nothing: a block starts at
// every dense or conv2d layer and runs to the next one. The layers before the first are in no
// block; the last block is left alone (its output, the logits, goes straight to the loss), and
// so is a block of one layer (the next layer keeps its output anyway: nothing is saved).
ModelConfig with_remat_blocks(ModelConfig model) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].type == "dense" || model.layers[i].type == "conv2d") starts.push_back(i);
  }
  for (size_t b = 0; b + 1 < starts.size(); ++b) {
    size_t span = starts[b + 1] - starts[b];
    if (span < 2) continue;
    model.layers[starts[b]].remat = "save_nothing";
    model.layers[starts[b]].remat_span = static_cast<int64_t>(span);
  }
  return model;
}

// Whether the search may choose blocks for this sequential model: it has some, and the config
// sets none of its own (a config's blocks are its choice, kept in every plan).
bool budget_chooses_blocks(const TrainConfig& written) {
  return written.model.kind == "sequential" && !any_layer_remat(written.model) &&
         any_layer_remat(with_remat_blocks(written.model));
}

MemoryCandidate describe(const TrainConfig& config, bool chooses_blocks) {
  MemoryCandidate candidate;
  candidate.accumulate = config.train.accumulate;
  candidate.batch_size = config.train.batch_size;
  if (config.model.kind == "gpt2") candidate.remat = config.model.gpt2.remat;
  if (chooses_blocks) candidate.remat = any_layer_remat(config.model) ? "blocks" : "none";
  return candidate;
}

std::string plan_name(const MemoryCandidate& c) {
  std::string name = fmt::format("accumulate {} x batch_size {}", c.accumulate, c.batch_size);
  if (!c.remat.empty()) name += fmt::format(", remat {}", c.remat);
  return name;
}

std::string table(const std::vector<MemoryCandidate>& tried, int64_t budget, bool chosen_last) {
  std::string text;
  for (size_t i = 0; i < tried.size(); ++i) {
    const MemoryCandidate& c = tried[i];
    std::string verdict = !c.not_possible.empty()          ? "cannot run: " + c.not_possible
                          : c.planned_peak_bytes <= budget ? "fits"
                                                           : "over";
    bool chosen = chosen_last && i + 1 == tried.size();
    text +=
        fmt::format("  {} {:<54} {:>10}  {}\n", chosen ? "->" : "  ", plan_name(c),
                    c.not_possible.empty() ? format_byte_size(c.planned_peak_bytes) : "-", verdict);
  }
  return text;
}

}  // namespace

std::string MemoryFit::to_string() const {
  std::string text =
      fmt::format("memory budget {}: the train step's planned peak for each plan tried\n{}",
                  format_byte_size(budget_bytes), table(tried, budget_bytes, true));
  for (size_t i = 0; i < eval_tried.size(); ++i) {
    const EvalCandidate& e = eval_tried[i];
    text += fmt::format("  {} {:<54} {:>10}  {}\n", i + 1 == eval_tried.size() ? "->" : "  ",
                        fmt::format("evaluation, eval_batch_size {}", e.eval_batch_size),
                        format_byte_size(e.planned_peak_bytes),
                        e.planned_peak_bytes <= budget_bytes ? "fits" : "over");
  }
  return text;
}

void fit_eval_batch_size(MemoryFit& fit, int64_t test_rows,
                         const std::function<int64_t(int64_t eval_batch_size)>& planned_peak) {
  int64_t rows = std::max<int64_t>(1, std::min(fit.config.train.eval_batch_size, test_rows));
  while (true) {
    fit.eval_tried.push_back(EvalCandidate{rows, planned_peak(rows)});
    if (fit.eval_tried.back().planned_peak_bytes <= fit.budget_bytes) break;
    if (rows == 1) {
      fail(kUnknownSite,
           fmt::format("train.memory_budget = {}: the evaluation does not fit even one example "
                       "at a time ({} planned)",
                       format_byte_size(fit.budget_bytes),
                       format_byte_size(fit.eval_tried.back().planned_peak_bytes)),
           "raise train.memory_budget (or --memory-budget)");
    }
    rows = (rows + 1) / 2;
  }
  // Only a size smaller than the config's changes it (a test set smaller than the batch
  // leaves the key as written).
  if (rows < fit.config.train.eval_batch_size && fit.eval_tried.size() > 1) {
    fit.config.train.eval_batch_size = rows;
  }
}

std::vector<TrainConfig> memory_candidates(const TrainConfig& written) {
  const int64_t rows = written.train.batch_size * written.train.accumulate;
  std::vector<std::string> remats = {""};
  if (written.model.kind == "gpt2") {
    const auto& order = remat_order();
    auto from = std::find(order.begin(), order.end(), written.model.gpt2.remat);
    remats.assign(from == order.end() ? order.begin() : from, order.end());
  } else if (budget_chooses_blocks(written)) {
    remats = {"", "blocks"};
  }
  std::vector<TrainConfig> candidates;
  for (int64_t k = std::max<int64_t>(written.train.accumulate, 1); k <= rows; ++k) {
    if (rows % k != 0) continue;
    for (const std::string& remat : remats) {
      TrainConfig candidate = written;
      candidate.train.accumulate = k;
      candidate.train.batch_size = rows / k;
      if (written.model.kind == "gpt2") {
        candidate.model.gpt2.remat = remat;
      } else if (remat == "blocks") {
        candidate.model = with_remat_blocks(std::move(candidate.model));
      }
      candidates.push_back(std::move(candidate));
    }
  }
  return candidates;
}

MemoryFit fit_memory_budget(const TrainConfig& written, int64_t budget_bytes, int64_t state_bytes,
                            const std::function<int64_t(const TrainConfig&)>& planned_peak) {
  if (state_bytes > budget_bytes) {
    fail(kUnknownSite,
         fmt::format("train.memory_budget = {} is less than the model's parameters and optimizer "
                     "state alone ({}), which every step holds",
                     format_byte_size(budget_bytes), format_byte_size(state_bytes)),
         "raise train.memory_budget (or --memory-budget), or train a smaller model");
  }
  MemoryFit fit;
  fit.budget_bytes = budget_bytes;
  // The lowest planned peak of the plans with the previous and the current count of
  // micro-batches: more micro-batches stop paying once the gradients' sums, which every
  // count holds, outweigh the activations they save, and each count compiles a larger step.
  std::optional<int64_t> previous_best, best;
  int64_t previous_count = 0, count = 0;
  std::string stopped;
  const bool chooses_blocks = budget_chooses_blocks(written);
  for (const TrainConfig& candidate : memory_candidates(written)) {
    if (candidate.train.accumulate != count) {
      if (best && previous_best && *best >= *previous_best) {
        stopped = fmt::format(
            "; more micro-batches stopped lowering the planned peak ({} with {}, {} with {}), "
            "so no more were tried",
            format_byte_size(*previous_best), previous_count, format_byte_size(*best), count);
        break;
      }
      if (best) {
        previous_best = best;
        previous_count = count;
      }
      best.reset();
      count = candidate.train.accumulate;
    }
    MemoryCandidate tried = describe(candidate, chooses_blocks);
    try {
      tried.planned_peak_bytes = planned_peak(candidate);
      best = std::min(best.value_or(tried.planned_peak_bytes), tried.planned_peak_bytes);
    } catch (const Error& error) {
      tried.not_possible = error.message();
    }
    fit.tried.push_back(tried);
    if (tried.not_possible.empty() && tried.planned_peak_bytes <= budget_bytes) {
      fit.config = candidate;
      return fit;
    }
  }
  fail(kUnknownSite,
       fmt::format("train.memory_budget = {}: no plan's train step fits{}; the memory planner "
                   "expects\n{}",
                   format_byte_size(budget_bytes), stopped, table(fit.tried, budget_bytes, false)),
       std::string("raise train.memory_budget (or --memory-budget), or make the model, the batch "
                   "or data.context smaller") +
           (std::any_of(fit.tried.begin(), fit.tried.end(),
                        [](const MemoryCandidate& c) { return !c.not_possible.empty(); })
                ? "; with train.pad_remainder = true an epoch's last batch splits into any "
                  "number of micro-batches"
                : ""));
}

}  // namespace kiln::train
