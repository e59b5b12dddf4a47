// BatchNorm (batch statistics over every axis but the last in training, running ones in
// evaluation), LayerNorm and RMSNorm (over the last axis). All normalise with the biased
// variance; BatchNorm's running variance moves toward the unbiased one, as in PyTorch.
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/nn/functional.h"
#include "nn/module_impl.h"

namespace kiln::nn {
namespace {

void check_epsilon(const NormOptions& options, std::string_view layer, CallSite site) {
  if (!(options.epsilon > 0)) {
    fail(site, fmt::format("{}: epsilon must be positive, got {}", layer, options.epsilon));
  }
}

// The shared shape of the normalisation layers: a float input whose last axis holds the
// features, learned scale (init 1) and bias (init 0) of that size.
class NormBase : public Layer {
 public:
  NormBase(NormOptions options, bool allow_bias) : options_(options) {
    if (!allow_bias) options_.use_bias = false;
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    detail::check_float_input(input, 1, scope, *this);
    return input;
  }

  LayerInit init(const Array& /*key*/, const AbstractValue& input,
                 const LayerScope& scope) const override {
    AbstractValue output = output_type(input, scope);
    int64_t features = input.shape[input.shape.rank() - 1];
    DType dtype = detail::param_dtype(input);
    std::vector<Tree::Item> params;
    if (options_.use_scale) params.emplace_back("scale", ones(Shape{features}, dtype));
    if (options_.use_bias) params.emplace_back("bias", zeros(Shape{features}, dtype));
    Tree tree = params.empty() ? Tree() : Tree::dict(std::move(params));
    return LayerInit{Variables{tree, init_state(features, dtype)}, output};
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    output_type(input, scope);
    int64_t features = input.shape[input.shape.rank() - 1];
    return features * ((options_.use_scale ? 1 : 0) + (options_.use_bias ? 1 : 0));
  }

 protected:
  virtual Tree init_state(int64_t /*features*/, DType /*dtype*/) const { return Tree(); }

  // normalized * scale + bias, with the params checked against the features of x.
  Array affine(const Array& normalized, const Tree& params, const Array& x,
               const LayerScope& scope) const {
    std::vector<std::string> names;
    if (options_.use_bias) names.push_back("bias");
    if (options_.use_scale) names.push_back("scale");
    detail::check_entries(params, names, "params", scope, *this);
    Shape features{x.dim(-1)};
    Array y = normalized;
    if (options_.use_scale) {
      y = mul(y, detail::param_leaf(params, "scale", features, scope, *this, x), scope.site);
    }
    if (options_.use_bias) {
      y = add(y, detail::param_leaf(params, "bias", features, scope, *this, x), scope.site);
    }
    return y;
  }

  std::string flags() const {
    std::string text = fmt::format("eps {}", options_.epsilon);
    if (!options_.use_scale) text += ", no scale";
    if (!options_.use_bias && kind() != "rms_norm") text += ", no bias";
    return text;
  }

  NormOptions options_;
};

class BatchNormImpl final : public NormBase {
 public:
  BatchNormImpl(double momentum, NormOptions options, CallSite site)
      : NormBase(options, true), momentum_(momentum) {
    check_epsilon(options, "BatchNorm", site);
    if (!(momentum >= 0 && momentum <= 1)) {
      fail(site, fmt::format("BatchNorm: momentum must be in [0, 1], got {}", momentum),
           "running = momentum * running + (1 - momentum) * batch; 0.9 or 0.99 are usual");
    }
  }

  std::string_view kind() const override { return "batch_norm"; }
  std::string describe() const override {
    return fmt::format("BatchNorm(momentum {}, {})", momentum_, flags());
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    int64_t features = x.dim(-1);
    detail::check_entries(variables.state, {"mean", "var"}, "state", scope, *this);
    const Array& running_mean =
        detail::param_leaf(variables.state, "mean", Shape{features}, scope, *this, x);
    const Array& running_var =
        detail::param_leaf(variables.state, "var", Shape{features}, scope, *this, x);
    CallSite site = scope.site;
    if (!options.train) {
      Array normalized = mul(sub(x, running_mean, site),
                             rsqrt(Operand(running_var, site) + options_.epsilon, site), site);
      return ApplyResult{affine(normalized, variables.params, x, scope), variables.state};
    }
    Dims axes;
    int64_t count = 1;
    for (int64_t i = 0; i + 1 < x.rank(); ++i) {
      axes.push_back(i);
      count *= x.dim(i);
    }
    if (count < 2) {
      fail(site,
           fmt::format("{}{} in training needs more than one value per feature to estimate a "
                       "variance, got {}",
                       scope.prefix(), describe(), x.aval().to_string()),
           "use a batch of at least 2, or apply with train = false");
    }
    Array batch_mean = mean(x, axes, false, site);
    Array centered = sub(x, batch_mean, site);
    Array batch_var = mean(mul(centered, centered, site), axes, false, site);
    Array normalized =
        mul(centered, rsqrt(Operand(batch_var, site) + options_.epsilon, site), site);
    double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
    Array new_mean = add(Operand(running_mean, site) * momentum_,
                         Operand(batch_mean, site) * (1 - momentum_), site);
    Array new_var = add(Operand(running_var, site) * momentum_,
                        Operand(batch_var, site) * ((1 - momentum_) * unbias), site);
    Tree state = Tree::dict({{"mean", new_mean}, {"var", new_var}});
    return ApplyResult{affine(normalized, variables.params, x, scope), state};
  }

 protected:
  Tree init_state(int64_t features, DType dtype) const override {
    return Tree::dict(
        {{"mean", zeros(Shape{features}, dtype)}, {"var", ones(Shape{features}, dtype)}});
  }

 private:
  double momentum_;
};

class LayerNormImpl final : public NormBase {
 public:
  LayerNormImpl(NormOptions options, bool rms, CallSite site) : NormBase(options, !rms), rms_(rms) {
    check_epsilon(options, rms ? "RMSNorm" : "LayerNorm", site);
  }

  std::string_view kind() const override { return rms_ ? "rms_norm" : "layer_norm"; }
  std::string describe() const override {
    return fmt::format("{}({})", rms_ ? "RMSNorm" : "LayerNorm", flags());
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& /*options*/,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    CallSite site = scope.site;
    // The functions of kiln/nn/functional.h, without their scale and bias: affine() adds
    // the module's own.
    Array normalized = rms_ ? rms_norm(x, std::nullopt, options_.epsilon, site)
                            : layer_norm(x, std::nullopt, std::nullopt, options_.epsilon, site);
    return ApplyResult{affine(normalized, variables.params, x, scope), variables.state};
  }

 private:
  bool rms_;
};

}  // namespace

Module BatchNorm(double momentum, NormOptions options, CallSite site) {
  return Module(std::make_shared<BatchNormImpl>(momentum, options, site));
}

Module LayerNorm(NormOptions options, CallSite site) {
  return Module(std::make_shared<LayerNormImpl>(options, false, site));
}

Module RMSNorm(NormOptions options, CallSite site) {
  return Module(std::make_shared<LayerNormImpl>(options, true, site));
}

}  // namespace kiln::nn
