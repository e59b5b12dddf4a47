// [[model.layers]] -> nn::Sequential, each layer built by its type (kiln's own or a
// registered one).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/error.h"
#include "kiln/nn/layer.h"
#include "kiln/nn/remat_span.h"
#include "train/builders.h"
#include "train/config_schema.h"
#include "train/data_parallel_parts.h"
#include "train/precision.h"
#include "train/wrapped_layer.h"

namespace kiln::train {
namespace {

Padding padding_of(const LayerConfig& layer) {
  return layer.padding == "same" ? Padding::kSame : Padding::kValid;
}

Dims dims_of(const std::vector<int64_t>& values) {
  return Dims(values.begin(), values.end());
}

// `inner` under another kind: transparent otherwise, as nn::Residual and nn::Remat are.
class NamedLayer final : public WrappedLayer {
 public:
  NamedLayer(std::string kind, nn::Module inner)
      : WrappedLayer(std::move(inner)), kind_(std::move(kind)) {}
  std::string_view kind() const override { return kind_; }

 private:
  std::string kind_;
};

}  // namespace

nn::Module build_layer(const LayerConfig& layer) {
  const schema::LayerTypeRow* type = schema::find_layer_type(layer.type);
  // The config's reader refused unknown types; a type registered after the config was read
  // is still known, so this is reached only by a config made in code.
  if (!type) {
    fail(CallSite(),
         fmt::format("model layer (line {}): unknown layer type '{}'", layer.line, layer.type),
         fmt::format("a layer's type is one of {}", schema::join(schema::layer_type_names())));
  }
  nn::Module module = type->build(layer);
  if (module.kind() == type->name) return module;
  // A registered type may build a module of another kind (a Sequential): named after the
  // type, its params sit where the config says ("wide_block_1/...", not "sequential_1/...").
  return nn::Module(std::make_shared<NamedLayer>(std::string(type->name), std::move(module)));
}

nn::Module build_dense(const LayerConfig& layer) {
  nn::DenseOptions options;
  if (layer.parallel == "column") options.parallel = nn::TensorParallel::kColumn;
  if (layer.parallel == "row") options.parallel = nn::TensorParallel::kRow;
  options.parallel_axis = kModelAxis;
  return nn::Dense(layer.features, options);
}

nn::Module build_conv2d(const LayerConfig& layer) {
  nn::Conv2DOptions options;
  if (!layer.strides.empty()) options.strides = dims_of(layer.strides);
  options.padding = padding_of(layer);
  return nn::Conv2D(layer.features, dims_of(layer.kernel_size), options);
}

nn::Module build_max_pool(const LayerConfig& layer) {
  return nn::MaxPool(dims_of(layer.window), dims_of(layer.strides), padding_of(layer));
}

nn::Module build_avg_pool(const LayerConfig& layer) {
  return nn::AvgPool(dims_of(layer.window), dims_of(layer.strides), padding_of(layer));
}

nn::Module build_flatten(const LayerConfig& /*layer*/) {
  return nn::Flatten();
}

nn::Module build_dropout(const LayerConfig& layer) {
  return nn::Dropout(layer.rate);
}

nn::Module build_batch_norm(const LayerConfig& /*layer*/) {
  return nn::BatchNorm();
}

nn::Module build_layer_norm(const LayerConfig& /*layer*/) {
  return nn::LayerNorm();
}

nn::Module build_rms_norm(const LayerConfig& /*layer*/) {
  return nn::RMSNorm();
}

nn::Module build_activation(const LayerConfig& layer) {
  return nn::Activation(layer.type);
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
  gpt2.attention = config.attention == "flash" ? nn::AttentionImplementation::kFlash
                                               : nn::AttentionImplementation::kPlain;
  return gpt2;
}

nn::Module build_model(const ModelConfig& config) {
  if (config.kind == "gpt2") return nn::Gpt2(gpt2_config(config.gpt2));
  std::vector<nn::Module> layers;
  std::vector<nn::RematSpan> remat;
  layers.reserve(config.layers.size());
  // A policy per layer: each layer casts its own params and input (precision.h).
  const bool per_layer = per_layer_precision(config);
  for (const LayerConfig& layer : config.layers) {
    nn::Module module = build_layer(layer);
    if (per_layer) {
      module = layer_in_precision(
          std::move(module), compute_dtype_of(layer.compute_dtype.empty() ? config.compute_dtype
                                                                          : layer.compute_dtype));
    }
    if (layer.remat != "none") {
      // The schema allows only these two besides none; check_remat_spans placed the spans.
      remat.push_back(
          {.first = static_cast<int64_t>(layers.size()),
           .count = layer.remat_span,
           .policy = layer.remat == "save_dot_outputs" ? save_dot_outputs() : save_nothing()});
    }
    layers.push_back(std::move(module));
  }
  if (remat.empty()) return nn::Sequential(std::move(layers));
  return nn::Sequential(std::move(layers), std::move(remat));
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
