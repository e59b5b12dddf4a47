// Host batches (data::HostBatch, assembled by the data layer's loader) as device arrays for
// the train and eval steps, and the data pipeline's pieces for a run's splits.
#pragma once

#include <memory>

#include "data/batch.h"
#include "data/loader.h"
#include "kiln/array.h"
#include "train/config.h"

namespace kiln::train {

struct Batch {
  Array images;  // f32[n, ...example input shape], e.g. [n, 28, 28, 1]; or i32 tokens [n, T]
  Array labels;  // i32[n], or i32[n, T] (a label per token: the token after it)
  Array mask;    // f32[n]: 1 for a real example, 0 for padding (train.pad_remainder), else
                 // undefined
};

// `input_dtype`: the dataset's (f32, or i32 for token ids, which the host batch holds as
// floats: exact below 2^24).
Batch to_arrays(const data::HostBatch& batch, DType input_dtype = DType::f32);

// A run's data: the dataset, the training batches (shuffled by the seed, augmented when
// the config says so) behind a prefetching loader, and the test batches in file order.
struct RunData {
  RunData(const TrainConfig& config, const Array& augment_key);
  data::Dataset dataset;
  std::unique_ptr<data::BatchAssembler> train;
  std::unique_ptr<data::BatchAssembler> test;
  data::LoaderOptions loader_options;
  // The test batches again, `eval_batch_size` rows each (train.memory_budget may lower it).
  void set_eval_batch_size(int64_t eval_batch_size);
  // The training batches Poisson-sampled instead (DP-SGD; data::PoissonSampling): each
  // record at `rate`, drawn from `key`, into batches of `rows` rows.
  void use_poisson_sampling(double rate, int64_t rows, const Array& key);

 private:
  data::BatchOptions train_options_;
};

}  // namespace kiln::train
