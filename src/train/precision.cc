// Mixed precision (precision.h).
#include "train/precision.h"
#include "base/check.h"

#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/tree.h"

namespace kiln::train {
namespace {

Tree floats_as(const Tree& tree, DType dtype) {
  return tree_map([dtype](const Array& x) { return is_floating(x.dtype()) ? x.astype(dtype) : x; },
                  tree);
}

}  // namespace

nn::ApplyResult apply_in(DType compute, const nn::Module& model, const nn::Variables& variables,
                         const Array& x, const nn::ApplyOptions& options) {
  if (compute == DType::f32) return model.apply(variables, x, options);
  nn::Variables low{floats_as(variables.params, compute), floats_as(variables.state, compute)};
  Array input = is_floating(x.dtype()) ? x.astype(compute) : x;
  nn::ApplyResult out = model.apply(low, input, options);
  out.y = out.y.astype(DType::f32);
  // The new state in the dtypes of the state it replaces (f32 running statistics).
  std::vector<Array> kept = variables.state.leaves(), next = out.state.leaves();
  if (kept.size() == next.size()) {
    for (size_t i = 0; i < next.size(); ++i) next[i] = next[i].astype(kept[i].dtype());
    out.state = unflatten(out.state.structure(), next);
  }
  return out;
}

DType compute_dtype_of(const std::string& name) {
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  KILN_CHECK(name == "f32", "model.compute_dtype is f32, bf16 or f16");
  return DType::f32;
}

}  // namespace kiln::train
