// [[model.layers]] -> nn::Sequential.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/error.h"
#include "train/builders.h"
#include "train/data_parallel_parts.h"

namespace kiln::train {
namespace {

Padding padding_of(const LayerConfig& layer) {
  return layer.padding == "same" ? Padding::kSame : Padding::kValid;
}

Dims dims_of(const std::vector<int64_t>& values) {
  return Dims(values.begin(), values.end());
}

}  // namespace

nn::Module build_layer(const LayerConfig& layer) {
  const std::string& type = layer.type;
  if (type == "dense") {
    nn::DenseOptions options;
    if (layer.parallel == "column") options.parallel = nn::TensorParallel::kColumn;
    if (layer.parallel == "row") options.parallel = nn::TensorParallel::kRow;
    options.parallel_axis = kModelAxis;
    return nn::Dense(layer.features, options);
  }
  if (type == "conv2d") {
    nn::Conv2DOptions options;
    if (!layer.strides.empty()) options.strides = dims_of(layer.strides);
    options.padding = padding_of(layer);
    return nn::Conv2D(layer.features, dims_of(layer.kernel_size), options);
  }
  if (type == "max_pool") {
    return nn::MaxPool(dims_of(layer.window), dims_of(layer.strides), padding_of(layer));
  }
  if (type == "avg_pool") {
    return nn::AvgPool(dims_of(layer.window), dims_of(layer.strides), padding_of(layer));
  }
  if (type == "flatten") return nn::Flatten();
  if (type == "dropout") return nn::Dropout(layer.rate);
  if (type == "batch_norm") return nn::BatchNorm();
  if (type == "layer_norm") return nn::LayerNorm();
  if (type == "rms_norm") return nn::RMSNorm();
  // Everything else the schema accepts is an activation name.
  return nn::Activation(type);
}

nn::Gpt2Config gpt2_config(const Gpt2ModelConfig& config) {
  nn::Gpt2Config gpt2;
  gpt2.layers = config.layers;
  gpt2.heads = config.heads;
  gpt2.channels = config.channels;
  gpt2.vocab_size = config.vocab_size;
  // GPT-2's own padding: 50257 -> 50304, a size the output projection's GEMM tiles well.
  gpt2.padded_vocab_size = config.padded_vocab_size > 0 ? config.padded_vocab_size
                                                        : (config.vocab_size + 127) / 128 * 128;
  gpt2.max_context = config.max_context;
  // The schema allows only these three.
  gpt2.remat = config.remat == "blocks"             ? nn::Gpt2Remat::kBlocks
               : config.remat == "blocks_save_dots" ? nn::Gpt2Remat::kBlocksSaveDots
                                                    : nn::Gpt2Remat::kNone;
  return gpt2;
}

nn::Module build_model(const ModelConfig& config) {
  if (config.kind == "gpt2") return nn::Gpt2(gpt2_config(config.gpt2));
  std::vector<nn::Module> layers;
  layers.reserve(config.layers.size());
  for (const LayerConfig& layer : config.layers) layers.push_back(build_layer(layer));
  return nn::Sequential(std::move(layers));
}

std::map<std::string, PartitionSpec> tensor_parallel_specs(const ModelConfig& config) {
  std::map<std::string, PartitionSpec> specs;
  if (config.kind != "sequential") return specs;
  for (size_t i = 0; i < config.layers.size(); ++i) {
    const LayerConfig& layer = config.layers[i];
    std::string name = fmt::format("dense_{}", i);
    if (layer.parallel == "column") {
      specs.emplace(name + "/kernel", PartitionSpec{{}, {kModelAxis}});
      specs.emplace(name + "/bias", PartitionSpec{{kModelAxis}});
    } else if (layer.parallel == "row") {
      specs.emplace(name + "/kernel", PartitionSpec{{kModelAxis}, {}});
    }
  }
  return specs;
}

}  // namespace kiln::train
