// From a validated config to the objects a run trains: the dataset's spec (for
// data::load_dataset), the model (an nn::Module) and the optimizer (an
// optim::GradientTransformation). The config has already checked names and
// ranges; these only translate.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "data/dataset.h"
#include "kiln/nn/gpt2.h"
#include "kiln/nn/module.h"
#include "kiln/optim.h"
#include "kiln/sharding.h"
#include "train/config.h"

namespace kiln::train {

data::DatasetSpec build_dataset_spec(const DataConfig& config);
nn::Module build_model(const ModelConfig& config);
// [model.gpt2] with its padded vocabulary resolved.
nn::Gpt2Config gpt2_config(const Gpt2ModelConfig& config);
// One layer of it (build_model makes an nn::Sequential of these): its type's build.
nn::Module build_layer(const LayerConfig& layer);
// The builds of kiln's own layer types (the rows of schema::layer_types()).
nn::Module build_dense(const LayerConfig& layer);
nn::Module build_conv2d(const LayerConfig& layer);
nn::Module build_max_pool(const LayerConfig& layer);
nn::Module build_avg_pool(const LayerConfig& layer);
nn::Module build_flatten(const LayerConfig& layer);
nn::Module build_dropout(const LayerConfig& layer);
nn::Module build_batch_norm(const LayerConfig& layer);
nn::Module build_layer_norm(const LayerConfig& layer);
nn::Module build_rms_norm(const LayerConfig& layer);
nn::Module build_activation(const LayerConfig& layer);  // the type is the activation's name
// The specs of the tensor-parallel dense layers' params over mesh axis `model`, by their
// path in build_model's params (Sequential names layer i "dense_<i>"): a column-split
// kernel {_, model} and bias {model}, a row-split kernel {model, _} (its bias replicated).
std::map<std::string, PartitionSpec> tensor_parallel_specs(const ModelConfig& config);
// total_steps: the run's length, for schedules that decay over the whole run.
optim::Schedule build_schedule(const OptimConfig& config, int64_t total_steps);
optim::GradientTransformation build_optimizer(const OptimConfig& config, int64_t total_steps);

}  // namespace kiln::train
