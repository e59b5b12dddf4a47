// Dropout, activations as layers, and the two containers: Sequential (children named
// "<kind>_<position>", child i initialised with random::fold_in(key, i) and, when it reads
// one, applied with random::fold_in(options.key, i)) and Residual (x + inner(x); the inner
// module's variables, keys and path are the Residual's own). A Sequential's remat spans
// apply runs of its children under one checkpoint each in training, the children keeping
// their names, keys and params' paths.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/checkpoint.h"
#include "kiln/nn/remat_span.h"
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
  explicit SequentialImpl(std::vector<Module> layers, std::vector<RematSpan> spans = {},
                          CallSite site = {})
      : layers_(std::move(layers)), spans_(std::move(spans)) {
    for (size_t i = 0; i < layers_.size(); ++i) {
      names_.push_back(fmt::format("{}_{}", layers_[i].kind(), i));
    }
    std::sort(spans_.begin(), spans_.end(),
              [](const RematSpan& a, const RematSpan& b) { return a.first < b.first; });
    auto size = static_cast<int64_t>(layers_.size());
    for (size_t k = 0; k < spans_.size(); ++k) {
      const RematSpan& span = spans_[k];
      std::string where =
          fmt::format("remat span of {} children from position {}", span.count, span.first);
      if (span.count < 1 || span.first < 0 || span.first + span.count > size) {
        fail(site, fmt::format("Sequential of {} layers: {} is not within its layers", size, where),
             "a span covers count >= 1 children starting at 0 <= first, first + count <= the "
             "number of layers");
      }
      if (k > 0 && spans_[k - 1].first + spans_[k - 1].count > span.first) {
        fail(site,
             fmt::format("Sequential: {} overlaps the span from position {}", where,
                         spans_[k - 1].first),
             "give each child to at most one span");
      }
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
    size_t next_span = 0;
    for (size_t i = 0; i < layers_.size();) {
      // Without training there is no backward pass to save memory for.
      if (next_span < spans_.size() && static_cast<size_t>(spans_[next_span].first) == i) {
        const RematSpan& span = spans_[next_span++];
        auto end = i + static_cast<size_t>(span.count);
        if (options.train) {
          y = apply_span(span, variables, y, options, scope, state);
          i = end;
          continue;
        }
      }
      y = apply_child(i, variables, y, options, scope, state);
      ++i;
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
  // Child i on x; its state, if any, is appended to `state`.
  Array apply_child(size_t i, const Variables& variables, const Array& x,
                    const ApplyOptions& options, const LayerScope& scope,
                    std::vector<Tree::Item>& state) const {
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
      return layer.apply(child, x, child_options, scope.child(names_[i]));
    }();
    if (!result.state.is_none()) state.emplace_back(names_[i], result.state);
    return result.y;
  }

  // The span's children, in order, under one checkpoint whose inputs are their params and
  // state (keyed by their own names), x, and the step's key where one is used, so that the
  // recomputation draws the same dropout masks as the forward pass (as nn::Remat does).
  Array apply_span(const RematSpan& span, const Variables& variables, const Array& x,
                   const ApplyOptions& options, const LayerScope& scope,
                   std::vector<Tree::Item>& state) const {
    auto first = static_cast<size_t>(span.first), end = first + static_cast<size_t>(span.count);
    std::vector<Tree::Item> params_in, state_in;
    for (size_t i = first; i < end; ++i) {
      if (variables.params.contains(names_[i])) {
        params_in.emplace_back(names_[i], variables.params[names_[i]]);
      }
      if (variables.state.contains(names_[i])) {
        state_in.emplace_back(names_[i], variables.state[names_[i]]);
      }
    }
    auto run = [&](const Tree& params, const Tree& state_tree, const Array& input,
                   const ApplyOptions& run_options) {
      std::vector<Tree::Item> out_state;
      Array h = input;
      for (size_t i = first; i < end; ++i) {
        h = apply_child(i, Variables{params, state_tree}, h, run_options, scope, out_state);
      }
      return std::make_pair(h, as_tree(std::move(out_state)));
    };
    Tree params_tree = as_tree(std::move(params_in)), state_tree = as_tree(std::move(state_in));
    std::pair<Array, Tree> out;
    if (options.key.defined()) {
      auto body = [&](const Tree& p, const Tree& s, const Array& input, const Array& key) {
        ApplyOptions keyed = options;
        keyed.key = key;
        return run(p, s, input, keyed);
      };
      out = checkpoint(body, span.policy, scope.site)(params_tree, state_tree, x, options.key);
    } else {
      auto body = [&](const Tree& p, const Tree& s, const Array& input) {
        return run(p, s, input, options);
      };
      out = checkpoint(body, span.policy, scope.site)(params_tree, state_tree, x);
    }
    if (!out.second.is_none()) {
      for (const std::string& name : out.second.keys()) state.emplace_back(name, out.second[name]);
    }
    return out.first;
  }

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
  std::vector<RematSpan> spans_;  // sorted by first, disjoint
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

Module Sequential(std::vector<Module> layers, std::vector<RematSpan> remat, CallSite site) {
  return Module(std::make_shared<SequentialImpl>(std::move(layers), std::move(remat), site));
}

Module Residual(Module inner) {
  return Module(std::make_shared<ResidualImpl>(std::move(inner)));
}

}  // namespace kiln::nn
