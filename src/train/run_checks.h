// What can be checked before a run creates its directory and takes its first step: the
// number of steps (overflow-checked), every layer's output and parameter sizes, the batch
// sizes BatchNorm will see in every epoch, and the learning rate over the whole schedule.
// Each failure is a kiln::Error naming the config key or layer, so a config that cannot
// train is refused up front instead of failing hours in, or "completing" with zeros.
#pragma once

#include <cstdint>

#include "data/dataset.h"
#include "kiln/nn/module.h"
#include "kiln/shape.h"
#include "train/config.h"

namespace kiln::train {

// The largest number of elements of one activation or parameter (8 GiB of f32).
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 31;

// The run's steps: epochs x batches per epoch, capped by train.max_steps. An error when it
// is 0, overflows, or exceeds the optimizer's i32 step count.
int64_t planned_steps(const TrainLoopConfig& train, int64_t train_examples,
                      int64_t batches_per_epoch);

// Each layer's output for the training and evaluation batch sizes, and its parameters,
// within kMaxTensorElements; every BatchNorm sees at least 2 values per channel in every
// training batch (the smallest is the last of an epoch). `image` is one example's type
// with a batch axis of 1.
void check_layers(const TrainConfig& config, const AbstractValue& image, int64_t train_examples,
                  int64_t total_steps);

// The learning rate at the steps where the schedule changes shape (its start, warmup,
// boundaries, end) is finite, at most 1e30, and 0 only where the schedule means it to be;
// else it would be an f32 0 or a subnormal (no training), or an infinity.
void check_schedule_range(const OptimConfig& optim, int64_t total_steps);

// [mesh] against this machine (its devices, the MPI job's processes) and this dataset (the
// last batch of an epoch must split into mesh.chunks).
void check_mesh_fits(const TrainConfig& config, int64_t train_examples);

// A classifier must map an example to a logit per class, a language model each position to
// a logit per token (with a vocabulary at least the data's).
void check_model_output(const ModelConfig& config, const nn::Module& model,
                        const AbstractValue& input, const data::Dataset& dataset);

}  // namespace kiln::train
