// Mixed precision in the train and eval steps (docs/precision.md): the layers run in the
// policy's compute dtype on copies of the f32 params and of the inputs; the outputs come
// back as f32 for the loss, and the model state (batch norm's running statistics) is kept
// in its own dtype. The casts are ordinary operations, so the gradient reaches the f32
// params through them: the optimizer updates a full-precision master copy.
#pragma once

#include "kiln/dtype.h"
#include "kiln/nn/module.h"

namespace kiln::train {

// model.apply in `compute` (f32: unchanged). Integer inputs (token ids) are not cast.
nn::ApplyResult apply_in(DType compute, const nn::Module& model, const nn::Variables& variables,
                         const Array& x, const nn::ApplyOptions& options = {});

// "f32", "bf16" or "f16" (model.compute_dtype) as a dtype.
DType compute_dtype_of(const std::string& name);

}  // namespace kiln::train
