// nn::Remat (module.h): a module whose training-time backward pass recomputes its
// intermediate values, through kiln::checkpoint over its apply.
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kiln/checkpoint.h"
#include "kiln/nn/module.h"
#include "nn/module_impl.h"

namespace kiln::nn {
namespace {

class RematImpl final : public Layer {
 public:
  RematImpl(Module inner, CheckpointPolicy policy)
      : inner_(std::move(inner)), policy_(std::move(policy)) {}

  // Transparent: a Sequential names it, and so its params, after the inner module.
  std::string_view kind() const override { return inner_.layer().kind(); }
  std::string describe() const override {
    return fmt::format("Remat({}, {})", inner_.layer().describe(), policy_.to_string());
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    return inner_.layer().output_type(input, scope);
  }
  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    return inner_.layer().init(key, input, scope);
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                    const LayerScope& scope) const override {
    // Without training there is no backward pass to save memory for.
    if (!options.train) return inner_.layer().apply(variables, x, options, scope);
    const Layer& inner = inner_.layer();
    // The key is an input of the checkpointed function, so that the recomputation draws the
    // same dropout masks as the forward pass.
    if (options.key.defined()) {
      auto body = [&](const Tree& params, const Tree& state, const Array& input, const Array& key) {
        ApplyOptions keyed = options;
        keyed.key = key;
        ApplyResult out = inner.apply(Variables{params, state}, input, keyed, scope);
        return std::make_pair(out.y, out.state);
      };
      auto [y, state] =
          checkpoint(body, policy_, scope.site)(variables.params, variables.state, x, options.key);
      return ApplyResult{y, state};
    }
    auto body = [&](const Tree& params, const Tree& state, const Array& input) {
      ApplyResult out = inner.apply(Variables{params, state}, input, options, scope);
      return std::make_pair(out.y, out.state);
    };
    auto [y, state] = checkpoint(body, policy_, scope.site)(variables.params, variables.state, x);
    return ApplyResult{y, state};
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    return inner_.layer().count_params(input, scope);
  }
  bool uses_key(const ApplyOptions& options) const override {
    return inner_.layer().uses_key(options);
  }
  void summarize(const AbstractValue& input, const LayerScope& scope,
                 std::vector<SummaryRow>& rows) const override {
    inner_.layer().summarize(input, scope, rows);
  }

 private:
  Module inner_;
  CheckpointPolicy policy_;
};

}  // namespace

Module Remat(Module inner) {
  return Remat(std::move(inner), save_nothing());
}

Module Remat(Module inner, const CheckpointPolicy& policy) {
  return Module(std::make_shared<RematImpl>(std::move(inner), policy));
}

}  // namespace kiln::nn
