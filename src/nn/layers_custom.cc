// nn::custom_module: a layer from a user's init and apply functions (module.h, *modules of
// your own*). It is an ordinary Layer, so Sequential, Residual, summaries and the
// transformations treat it as they treat kiln's own layers.
#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kiln/error.h"
#include "kiln/nn/module.h"
#include "kiln/random.h"
#include "nn/module_impl.h"

namespace kiln::nn {
namespace {

class CustomModule final : public Layer {
 public:
  explicit CustomModule(ModuleFunctions functions) : f_(std::move(functions)) {}

  std::string_view kind() const override { return f_.name; }
  std::string describe() const override {
    return f_.description.empty() ? f_.name : f_.description;
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    if (f_.output_type) return guarded(scope, [&] { return f_.output_type(input); });
    return trial(random::key(0), input, scope).output;
  }

  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    if (!f_.output_type) return trial(key, input, scope);
    Variables variables = guarded(scope, [&] { return f_.init(key, input); });
    return LayerInit{std::move(variables), output_type(input, scope)};
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                    const LayerScope& scope) const override {
    ApplyResult result = guarded(scope, [&] { return f_.apply(variables, x, options); });
    if (!result.y.defined()) {
      fail(scope.site, fmt::format("{}{}: apply returned no output (an empty Array)",
                                   scope.prefix(), describe()));
    }
    return result;
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    Tree params = guarded(scope, [&] { return f_.init(random::key(0), input).params; });
    return parameter_count(params);
  }

  bool uses_key(const ApplyOptions& options) const override { return options.train && f_.uses_key; }

 private:
  // The user's functions' errors, prefixed with where the layer sits: "block_1: ...".
  template <typename F>
  auto guarded(const LayerScope& scope, F&& body) const -> decltype(body()) {
    try {
      return body();
    } catch (const Error& error) {
      fail(scope.site, fmt::format("{}{}: {}", scope.prefix(), describe(), error.message()),
           error.hint());
    }
  }

  // init, then apply on zeros of the input type in evaluation mode: the output type of a
  // module that did not say what it is.
  LayerInit trial(const Array& key, const AbstractValue& input, const LayerScope& scope) const {
    Variables variables = guarded(scope, [&] { return f_.init(key, input); });
    Array zeros_in = zeros(input.shape, input.dtype);
    ApplyResult out = apply(variables, zeros_in, ApplyOptions{}, scope);
    return LayerInit{std::move(variables), out.y.aval()};
  }

  ModuleFunctions f_;
};

}  // namespace

Module custom_module(ModuleFunctions functions, CallSite site) {
  if (!detail::valid_kind(functions.name)) {
    fail(site,
         fmt::format("nn::custom_module: name '{}' must be lower-case letters, digits and '_'",
                     functions.name),
         "the name is the stem of the path Sequential gives the layer, e.g. \"residual_mlp\"");
  }
  if (!functions.init || !functions.apply) {
    fail(site,
         fmt::format("nn::custom_module '{}': {} is an empty function", functions.name,
                     functions.init ? "apply" : "init"),
         "a module needs both init (key, input type -> variables) and apply");
  }
  return Module(std::make_shared<CustomModule>(std::move(functions)), site);
}

}  // namespace kiln::nn
