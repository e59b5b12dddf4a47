// A completed run's final weights as the trees of its model: params.safetensors (checked
// against the SHA-256 run.json records) and, for a model with state (BatchNorm's running
// statistics), state.safetensors, each leaf matched to the model's tree by its path.
// `kiln generate` and `kiln export` read a run's weights through this.
#pragma once

#include <filesystem>

#include "kiln/nn/module.h"
#include "kiln/shape.h"

namespace kiln::train {

// The variables of `model` for inputs of type `input` with the run's final weights. Errors
// name the run and what is wrong: no final weights (the run has not completed), weights
// that are not the ones run.json records, a tensor the model needs that the file lacks or
// holds in another shape.
nn::Variables final_variables(const std::filesystem::path& run_dir, const nn::Module& model,
                              const AbstractValue& input);

// The variables of `model` at the committed savepoint of `step` of the run (params and
// model state, as the trainer saved them). Errors name the run and the steps it has when
// there is no such savepoint, and the savepoint when it belongs to another run or does not
// fit the model.
nn::Variables savepoint_variables(const std::filesystem::path& run_dir, const nn::Module& model,
                                  const AbstractValue& input, int64_t step);

}  // namespace kiln::train
