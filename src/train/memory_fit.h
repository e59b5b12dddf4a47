// train.memory_budget (docs/memory.md): before the first step, the plan that fits the run's
// train step in a memory budget, chosen from the memory planner's estimate of each
// candidate's compiled step rather than by trying and running out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/config.h"

namespace kiln::train {

// One plan tried: how the update's rows are split and what the backward pass recomputes.
struct MemoryCandidate {
  int64_t accumulate = 1;  // micro-batches per update (train.accumulate)
  int64_t batch_size = 0;  // rows per micro-batch (train.batch_size)
  // model.gpt2.remat; for a sequential model "none" or "blocks" (memory_candidates), empty
  // where the search has no choice of remat.
  std::string remat;
  int64_t planned_peak_bytes = 0;
  std::string not_possible;  // why this plan cannot run (then it has no peak)
};

// An evaluation batch size tried, and its evaluation step's planned peak.
struct EvalCandidate {
  int64_t eval_batch_size = 0;
  int64_t planned_peak_bytes = 0;
};

struct MemoryFit {
  int64_t budget_bytes = 0;
  std::vector<MemoryCandidate> tried;     // in the order tried; the last one is chosen
  std::vector<EvalCandidate> eval_tried;  // fit_eval_batch_size: the last one is chosen
  TrainConfig config;                     // the written config with the chosen plan's keys
  // The table printed before the run: every plan tried, its planned peak, the choice.
  std::string to_string() const;
};

// The plans for `written` in the order they are tried: the fewest micro-batches first (from
// train.accumulate on, each count dividing the update's batch_size x accumulate rows), and
// for each the least recomputation first (a GPT-2: none, blocks_save_dots, blocks, from
// model.gpt2.remat on; a sequential model whose config sets no remat: none, then "blocks",
// every dense or conv2d layer starting a block to the next one, recomputed with
// save_nothing, except the last block and blocks of one layer).
std::vector<TrainConfig> memory_candidates(const TrainConfig& written);

// The first plan whose train step the memory planner expects to fit in `budget_bytes`.
// `planned_peak` compiles a candidate's step and returns its planned peak (arguments,
// constants, outputs and intermediates: MemoryPlanReport::peak_bytes), or throws a
// kiln::Error when the plan cannot run (its message is recorded and the next plan tried).
// `state_bytes` (parameters and optimizer state, which every plan holds) larger than the
// budget is refused before anything compiles. Counts of micro-batches are tried while they
// lower the planned peak: once a count's best plan is no lower than the count before it,
// the search stops. No plan fitting is refused with the table of the plans tried.
MemoryFit fit_memory_budget(const TrainConfig& written, int64_t budget_bytes, int64_t state_bytes,
                            const std::function<int64_t(const TrainConfig&)>& planned_peak);

// The evaluation under the same budget: train.eval_batch_size (at most `test_rows`, the
// largest batch an evaluation takes) halved until the evaluation step's planned peak
// (`planned_peak` of a batch size) fits; the batch size changes no result. Refused when one
// row does not fit. Records the sizes tried in `fit` and the choice in fit.config.
void fit_eval_batch_size(MemoryFit& fit, int64_t test_rows,
                         const std::function<int64_t(int64_t eval_batch_size)>& planned_peak);

}  // namespace kiln::train
