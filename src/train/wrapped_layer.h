// A layer around another that changes one thing about it and is otherwise the inner layer:
// its params, state, keys and summary rows are the inner layer's own, and by default so is
// its kind (so a Sequential names it, and its params, after the inner layer). The config's
// wrappers (a registered type's name, a layer's own precision) override what they change.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/nn/layer.h"
#include "kiln/nn/module.h"

namespace kiln::train {

class WrappedLayer : public nn::Layer {
 public:
  explicit WrappedLayer(nn::Module inner) : inner_(std::move(inner)) {}

  std::string_view kind() const override { return inner().kind(); }
  std::string describe() const override { return inner().describe(); }
  AbstractValue output_type(const AbstractValue& input,
                            const nn::LayerScope& scope) const override {
    return inner().output_type(input, scope);
  }
  nn::LayerInit init(const Array& key, const AbstractValue& input,
                     const nn::LayerScope& scope) const override {
    return inner().init(key, input, scope);
  }
  nn::ApplyResult apply(const nn::Variables& variables, const Array& x,
                        const nn::ApplyOptions& options,
                        const nn::LayerScope& scope) const override {
    return inner().apply(variables, x, options, scope);
  }
  int64_t count_params(const AbstractValue& input, const nn::LayerScope& scope) const override {
    return inner().count_params(input, scope);
  }
  bool uses_key(const nn::ApplyOptions& options) const override {
    return inner().uses_key(options);
  }
  void summarize(const AbstractValue& input, const nn::LayerScope& scope,
                 std::vector<nn::SummaryRow>& rows) const override {
    inner().summarize(input, scope, rows);
  }
  void summarize_children(const AbstractValue& input, const nn::LayerScope& scope,
                          std::vector<nn::SummaryRow>& rows) const override {
    inner().summarize_children(input, scope, rows);
  }

 protected:
  const nn::Layer& inner() const { return inner_.layer(); }

 private:
  nn::Module inner_;
};

}  // namespace kiln::train
