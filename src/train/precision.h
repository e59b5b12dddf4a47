// Mixed precision in the train and eval steps (docs/precision.md): the layers run in the
// policy's compute dtype on copies of the f32 params and of the inputs; the outputs come
// back as f32 for the loss, and the model state (batch norm's running statistics) is kept
// in its own dtype. The casts are ordinary operations, so the gradient reaches the f32
// params through them: the optimizer updates a full-precision master copy.
#pragma once

#include <string>

#include "kiln/dtype.h"
#include "kiln/nn/layer.h"
#include "kiln/nn/module.h"
#include "train/config.h"

namespace kiln::train {

// model.apply in `compute` (f32: unchanged). Integer inputs (token ids) are not cast.
nn::ApplyResult apply_in(DType compute, const nn::Module& model, const nn::Variables& variables,
                         const Array& x, const nn::ApplyOptions& options = {});

// "f32", "bf16" or "f16" (model.compute_dtype) as a dtype.
DType compute_dtype_of(const std::string& name);

// Whether a layer of the model sets its own compute_dtype: then every layer casts its own
// params and input (layer_in_precision) and the steps run the model as f32.
bool per_layer_precision(const ModelConfig& config);
// What the steps cast the whole model to: model.compute_dtype, or f32 when the layers cast
// themselves (per_layer_precision).
DType step_compute_dtype(const ModelConfig& config);
// Whether any part of the model computes in `dtype` (the model or one of its layers).
bool computes_in(const ModelConfig& config, const std::string& dtype);
// `layer` computing in `dtype`: its floating params, state and input cast to it, its output
// left in it (the next layer casts it to its own); the new state back in the state's
// dtypes. Transparent: named, keyed and summarized as `layer`.
nn::Module layer_in_precision(nn::Module layer, DType dtype);

}  // namespace kiln::train
