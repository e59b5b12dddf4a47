// Mixed precision (precision.h).
#include "train/precision.h"

#include <memory>
#include <vector>

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/tree.h"
#include "train/wrapped_layer.h"

namespace kiln::train {
namespace {

Tree floats_as(const Tree& tree, DType dtype) {
  return tree_map([dtype](const Array& x) { return is_floating(x.dtype()) ? x.astype(dtype) : x; },
                  tree);
}

// The new state in the dtypes of the state it replaces (f32 running statistics).
Tree state_as(const Tree& kept_state, const Tree& next_state) {
  std::vector<Array> kept = kept_state.leaves(), next = next_state.leaves();
  if (kept.size() != next.size()) return next_state;
  for (size_t i = 0; i < next.size(); ++i) next[i] = next[i].astype(kept[i].dtype());
  return unflatten(next_state.structure(), next);
}

class LayerInPrecision final : public WrappedLayer {
 public:
  LayerInPrecision(nn::Module inner, DType dtype) : WrappedLayer(std::move(inner)), dtype_(dtype) {}

  std::string describe() const override {
    return fmt::format("{} in {}", inner().describe(), dtype_name(dtype_));
  }
  AbstractValue output_type(const AbstractValue& input,
                            const nn::LayerScope& scope) const override {
    AbstractValue out = inner().output_type(cast(input), scope);
    if (is_floating(out.dtype)) out.dtype = dtype_;
    return out;
  }
  nn::ApplyResult apply(const nn::Variables& variables, const Array& x,
                        const nn::ApplyOptions& options,
                        const nn::LayerScope& scope) const override {
    nn::Variables low{floats_as(variables.params, dtype_), floats_as(variables.state, dtype_)};
    Array input = is_floating(x.dtype()) ? x.astype(dtype_) : x;
    nn::ApplyResult out = inner().apply(low, input, options, scope);
    out.state = state_as(variables.state, out.state);
    return out;
  }

 private:
  AbstractValue cast(AbstractValue type) const {
    if (is_floating(type.dtype)) type.dtype = dtype_;
    return type;
  }
  DType dtype_;
};

}  // namespace

nn::ApplyResult apply_in(DType compute, const nn::Module& model, const nn::Variables& variables,
                         const Array& x, const nn::ApplyOptions& options) {
  if (compute == DType::f32) {
    nn::ApplyResult out = model.apply(variables, x, options);
    // Layers that cast themselves (a per-layer policy) may end in another dtype.
    if (is_floating(out.y.dtype()) && out.y.dtype() != DType::f32) {
      out.y = out.y.astype(DType::f32);
    }
    return out;
  }
  nn::Variables low{floats_as(variables.params, compute), floats_as(variables.state, compute)};
  Array input = is_floating(x.dtype()) ? x.astype(compute) : x;
  nn::ApplyResult out = model.apply(low, input, options);
  out.y = out.y.astype(DType::f32);
  out.state = state_as(variables.state, out.state);
  return out;
}

DType compute_dtype_of(const std::string& name) {
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  KILN_CHECK(name == "f32", "model.compute_dtype is f32, bf16 or f16");
  return DType::f32;
}

bool per_layer_precision(const ModelConfig& config) {
  for (const LayerConfig& layer : config.layers) {
    if (!layer.compute_dtype.empty()) return true;
  }
  return false;
}

DType step_compute_dtype(const ModelConfig& config) {
  return per_layer_precision(config) ? DType::f32 : compute_dtype_of(config.compute_dtype);
}

bool computes_in(const ModelConfig& config, const std::string& dtype) {
  if (config.compute_dtype == dtype) return true;
  for (const LayerConfig& layer : config.layers) {
    if (layer.compute_dtype == dtype) return true;
  }
  return false;
}

nn::Module layer_in_precision(nn::Module layer, DType dtype) {
  return nn::Module(std::make_shared<LayerInPrecision>(std::move(layer), dtype));
}

}  // namespace kiln::train
