// The trainer's side of savepoints (io/savepoint.h holds the format): what a savepoint
// of a run holds (params, model state, optimizer state, the data and dropout keys, the
// data position, counters, the metrics recorded so far, the run identity; the loss scale's
// state with dynamic loss scaling) and turning one
// back into a run's state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "io/savepoint.h"
#include "kiln/array.h"
#include "train/run_identity.h"
#include "train/train_step.h"

namespace kiln::train {

// Where the data order stands: `position` is the index of the next batch of epoch `epoch`
// (0-based, the number shuffle() takes); batches_per_epoch means the epoch's batches are
// done and its evaluation is next.
struct DataPosition {
  int64_t epoch = 0;
  int64_t position = 0;
};

// The small values beside the tensors.
struct SavedCounters {
  int64_t step = 0;
  DataPosition data;
  int64_t batch_size = 0;
  int64_t skipped_steps = 0;  // all of them, loss-scale overflows included
  // Of those, the loss-scale overflows (dynamic loss scaling; none without).
  std::optional<int64_t> overflow_steps;
  int64_t metrics_lines = 0;  // lines of metrics.jsonl recorded up to this step
  // The running totals of the epoch in progress (its evaluation reports their mean).
  double epoch_loss_sum = 0;
  int64_t epoch_batches = 0;
  int64_t epoch_correct = 0;
  int64_t epoch_examples = 0;
};

struct RunKeys {
  Array data;     // shuffling: fold_in(data, epoch)
  Array dropout;  // dropout: fold_in(dropout, step)
};

// Queues private copies of the state's arrays (savepoint::copy_tree); does not wait for
// the step that produces them.
savepoint::Snapshot take_snapshot(const TrainState& state, const RunKeys& keys,
                                  const SavedCounters& counters, const RunIdentity& identity);

struct Restored {
  TrainState state;
  RunKeys keys;
  SavedCounters counters;
};

// The savepoint's state arranged as `like` (the config's freshly initialised state);
// errors name the savepoint and what does not fit.
Restored restore(const savepoint::Loaded& loaded, const TrainState& like, const RunKeys& keys_like);

}  // namespace kiln::train
