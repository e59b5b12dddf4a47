// The test set's loss and accuracy after an epoch, and the running totals of an epoch's
// training metrics that the progress line and the epoch's record show.
#pragma once

#include <cstdint>

#include <functional>

#include "data/batch.h"
#include "train/batches.h"
#include "train/train_savepoint.h"
#include "train/train_step.h"

namespace kiln::train {

// Running totals of one epoch's training metrics.
struct EpochTotals {
  double loss_sum = 0;  // sum of batch-mean losses
  int64_t batches = 0;
  int64_t correct = 0;
  int64_t examples = 0;  // labels predicted: examples times labels per example
  double mean_loss() const { return batches ? loss_sum / static_cast<double>(batches) : 0; }
  double accuracy() const {
    return examples ? static_cast<double>(correct) / static_cast<double>(examples) : 0;
  }
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

// Each batch of `batches` (epoch 0, in order) as the model takes it, with its index and the
// host batch it came from (its labels, and how many of its rows are real examples): what an
// evaluation walks, in the trainer, at export and in `kiln verify`. From batch `first`, every
// `stride`-th (an MPI rank's share).
void for_each_batch(const data::BatchAssembler& batches, DType input_dtype,
                    const std::function<void(const Batch& batch, const data::HostBatch& host)>& fn,
                    int64_t first = 0, int64_t stride = 1);

// Every batch of `batches` through `eval`; the loss is the mean over labels (a language
// model predicts one per token).
EvalResult evaluate(const EvalStep& eval, const TrainState& mesh_state,
                    const data::BatchAssembler& batches, DType input_dtype);

}  // namespace kiln::train
