// Dropout, activations as layers, and the two containers: Sequential (children named
// "<kind>_<position>", child i initialised with random::fold_in(key, i) and, when it reads
// one, applied with random::fold_in(options.key, i)) and Residual (x + inner(x); the inner
// module's variables, keys and path are the Residual's own).
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/random.h"
#include "kiln/tracing.h"
#include "nn/module_impl.h"

namespace kiln::nn {
namespace {

class DropoutImpl final : public Layer {
 public:
  DropoutImpl(double rate, CallSite site) : rate_(rate) {
    if (!(rate >= 0 && rate <= 1)) {
      fail(site, fmt::format("Dropout: rate must be in [0, 1], got {}", rate),
           "rate is the probability of zeroing an element, e.g. 0.1");
    }
  }

  std::string_view kind() const override { return "dropout"; }
  std::string describe() const override { return fmt::format("Dropout({})", rate_); }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    detail::check_float_input(input, 0, scope, *this);
    return input;
  }

  bool uses_key(const ApplyOptions& options) const override { return options.train && rate_ > 0; }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    detail::check_entries(variables.params, {}, "params", scope, *this);
    if (!uses_key(options)) return ApplyResult{x, variables.state};
    if (!options.key.defined()) {
      fail(
          scope.site,
          fmt::format("{}{} in training needs a random key, and ApplyOptions.key is empty",
                      scope.prefix(), describe()),
          "pass one key per step: apply(v, x, {.train = true, .key = random::fold_in(key, step)})");
    }
    CallSite site = scope.site;
    Array zero = kiln::detail::weak_scalar_like(0, true, x, site);
    if (rate_ >= 1) return ApplyResult{mul(x, zero, site), variables.state};
    Array keep = random::bernoulli(options.key, 1 - rate_, x.shape(), site);
    // Times the reciprocal, not divided by 1 - rate: the two differ in the last bit for
    // some x, and this is what Flax's `inputs / keep_prob` computes under XLA, which turns
    // a division by a scalar into a multiplication (checked bit for bit in
    // FlaxLayers.DropoutAndEmbeddingMatchFlax).
    Array y = where(keep, Operand(x, site) * (1 / (1 - rate_)), zero, site);
    return ApplyResult{y, variables.state};
  }

 private:
  double rate_;
};

class ActivationImpl final : public Layer {
 public:
  ActivationImpl(std::string_view name, CallSite site)
      : name_(name), fn_(activation_by_name(name, site)) {}

  std::string_view kind() const override { return name_; }
  std::string describe() const override { return name_; }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    detail::check_float_input(input, 0, scope, *this);
    return input;
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& /*options*/,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    detail::check_entries(variables.params, {}, "params", scope, *this);
    return ApplyResult{fn_(x), variables.state};
  }

 private:
  std::string name_;
  ActivationFn fn_;
};

class SequentialImpl final : public Layer {
 public:
  explicit SequentialImpl(std::vector<Module> layers) : layers_(std::move(layers)) {
    for (size_t i = 0; i < layers_.size(); ++i) {
      names_.push_back(fmt::format("{}_{}", layers_[i].kind(), i));
    }
  }

  std::string_view kind() const override { return "sequential"; }
  std::string describe() const override {
    return fmt::format("Sequential({} layer{})", layers_.size(), layers_.size() == 1 ? "" : "s");
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    AbstractValue type = input;
    for (size_t i = 0; i < layers_.size(); ++i) {
      type = layers_[i].layer().output_type(type, scope.child(names_[i]));
    }
    return type;
  }

  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    std::vector<Tree::Item> params, state;
    AbstractValue type = input;
    for (size_t i = 0; i < layers_.size(); ++i) {
      Array child_key = random::fold_in(key, static_cast<uint32_t>(i), scope.site);
      LayerInit child = layers_[i].layer().init(child_key, type, scope.child(names_[i]));
      if (!child.variables.params.is_none()) params.emplace_back(names_[i], child.variables.params);
      if (!child.variables.state.is_none()) state.emplace_back(names_[i], child.variables.state);
      type = child.output;
    }
    return LayerInit{Variables{as_tree(std::move(params)), as_tree(std::move(state))}, type};
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                    const LayerScope& scope) const override {
    check_children(variables.params, "params", scope);
    check_children(variables.state, "state", scope);
    std::vector<Tree::Item> state;
    Array y = x;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& layer = layers_[i].layer();
      Variables child{entry(variables.params, names_[i]), entry(variables.state, names_[i])};
      ApplyOptions child_options{options.train, Array()};
      if (layer.uses_key(options) && options.key.defined()) {
        child_options.key = random::fold_in(options.key, static_cast<uint32_t>(i), scope.site);
      }
      // The child's name on the equations it traces ("dense_3"), so that programs, profiles
      // and find_nonfinite say which layer an operation belongs to.
      ApplyResult result = [&] {
        NamedScope name(names_[i]);
        return layer.apply(child, y, child_options, scope.child(names_[i]));
      }();
      if (!result.state.is_none()) state.emplace_back(names_[i], result.state);
      y = result.y;
    }
    return ApplyResult{y, as_tree(std::move(state))};
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    int64_t total = 0;
    AbstractValue type = input;
    for (size_t i = 0; i < layers_.size(); ++i) {
      total += layers_[i].layer().count_params(type, scope.child(names_[i]));
      type = layers_[i].layer().output_type(type, scope.child(names_[i]));
    }
    return total;
  }

  bool uses_key(const ApplyOptions& options) const override {
    for (const Module& layer : layers_) {
      if (layer.layer().uses_key(options)) return true;
    }
    return false;
  }

  void summarize(const AbstractValue& input, const LayerScope& scope,
                 std::vector<SummaryRow>& rows) const override {
    Layer::summarize(input, scope, rows);
    summarize_children(input, scope, rows);
  }

  void summarize_children(const AbstractValue& input, const LayerScope& scope,
                          std::vector<SummaryRow>& rows) const override {
    AbstractValue type = input;
    for (size_t i = 0; i < layers_.size(); ++i) {
      LayerScope child = scope.child(names_[i]);
      layers_[i].layer().summarize(type, child, rows);
      type = layers_[i].layer().output_type(type, child);
    }
  }

 private:
  static Tree as_tree(std::vector<Tree::Item> items) {
    return items.empty() ? Tree() : Tree::dict(std::move(items));
  }

  static Tree entry(const Tree& tree, const std::string& name) {
    return tree.contains(name) ? tree[name] : Tree();
  }

  // The params (or state) of a Sequential is none or a dict whose keys all name children;
  // which children need an entry is checked by the children themselves.
  void check_children(const Tree& tree, std::string_view what, const LayerScope& scope) const {
    if (tree.is_none()) return;
    auto names = [&] { return fmt::format("{}", fmt::join(names_, ", ")); };
    if (!tree.is_dict()) {
      fail(scope.site,
           fmt::format("{}{} expects {} as a dict keyed by its layers' names ({}), got {}",
                       scope.prefix(), describe(), what, names(), tree.to_string()),
           "pass the variables that init returned for this model");
    }
    for (const std::string& key : tree.keys()) {
      bool known = false;
      for (const std::string& name : names_) known = known || name == key;
      if (!known) {
        fail(scope.site,
             fmt::format("{}{} has no layer named '{}' (its layers are {}), but its {} have an "
                         "entry for it",
                         scope.prefix(), describe(), key, names(), what),
             "pass the variables that init returned for this model; layers are named "
             "<kind>_<position>");
      }
    }
  }

  std::vector<Module> layers_;
  std::vector<std::string> names_;
};

class ResidualImpl final : public Layer {
 public:
  explicit ResidualImpl(Module inner) : inner_(std::move(inner)) {}

  std::string_view kind() const override { return "residual"; }
  std::string describe() const override {
    return fmt::format("Residual({})", inner_.layer().describe());
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    AbstractValue inner = inner_.layer().output_type(input, scope);
    if (inner.shape != input.shape || inner.dtype != input.dtype) {
      fail(scope.site,
           fmt::format("{}Residual needs its inner module to keep the input type {}, but {} "
                       "gives {}",
                       scope.prefix(), input.to_string(), inner_.layer().describe(),
                       inner.to_string()),
           "x + inner(x) needs equal types: make the inner module's last layer output the "
           "input's features");
    }
    return input;
  }

  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    output_type(input, scope);
    LayerInit result = inner_.layer().init(key, input, scope);
    result.output = input;
    return result;
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    ApplyResult inner = inner_.layer().apply(variables, x, options, scope);
    return ApplyResult{add(x, inner.y, scope.site), inner.state};
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    return inner_.layer().count_params(input, scope);
  }

  bool uses_key(const ApplyOptions& options) const override {
    return inner_.layer().uses_key(options);
  }

  void summarize(const AbstractValue& input, const LayerScope& scope,
                 std::vector<SummaryRow>& rows) const override {
    Layer::summarize(input, scope, rows);
    inner_.layer().summarize_children(input, scope, rows);
  }

 private:
  Module inner_;
};

}  // namespace

Module Dropout(double rate, CallSite site) {
  return Module(std::make_shared<DropoutImpl>(rate, site));
}

Module Activation(std::string_view name, CallSite site) {
  return Module(std::make_shared<ActivationImpl>(name, site));
}

Module Relu() {
  return Activation("relu");
}

Module Sequential(std::vector<Module> layers) {
  return Module(std::make_shared<SequentialImpl>(std::move(layers)));
}

Module Residual(Module inner) {
  return Module(std::make_shared<ResidualImpl>(std::move(inner)));
}

}  // namespace kiln::nn
