// Conv2D (NHWC input, HWIO kernel), MaxPool and AvgPool over H and W, and Flatten. Output
// sizes follow conv2d/max_pool in ops: VALID gives (in - span) / stride + 1 cells, SAME gives
// ceil(in / stride); they are computed here so that errors name the layer before any op runs.
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/random.h"
#include "nn/module_impl.h"

namespace kiln::nn {
namespace {

std::string padding_suffix(Padding padding) {
  return padding == Padding::kSame ? ", same" : "";
}

// Output size of one spatial axis, or -1 when a VALID window spans more than the input.
int64_t spatial_out(int64_t in, int64_t span, int64_t stride, Padding padding) {
  if (padding == Padding::kSame) return (in + stride - 1) / stride;
  if (span > in) return -1;
  return (in - span) / stride + 1;
}

class Conv2DImpl final : public Layer {
 public:
  Conv2DImpl(int64_t features, Dims kernel_size, Conv2DOptions options, CallSite site)
      : features_(features), kernel_size_(std::move(kernel_size)), options_(std::move(options)) {
    if (features_ < 1) {
      fail(site, fmt::format("Conv2D: features must be positive, got {}", features_));
    }
    detail::check_pair(kernel_size_, "Conv2D: kernel_size", site);
    detail::check_pair(options_.strides, "Conv2D: strides", site);
    detail::check_pair(options_.dilation, "Conv2D: dilation", site);
    if (!options_.kernel_init || (options_.use_bias && !options_.bias_init)) {
      fail(site, "Conv2D: kernel_init or bias_init is an empty Initializer");
    }
  }

  std::string_view kind() const override { return "conv2d"; }
  std::string describe() const override {
    std::string text = fmt::format("Conv2D({}, {}", features_, detail::window_string(kernel_size_));
    if (options_.strides != Dims{1, 1}) {
      text += fmt::format(", stride {}", detail::window_string(options_.strides));
    }
    if (options_.dilation != Dims{1, 1}) {
      text += fmt::format(", dilation {}", detail::window_string(options_.dilation));
    }
    text += padding_suffix(options_.padding);
    if (!options_.use_bias) text += ", no bias";
    return text + ")";
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    detail::check_nhwc_input(input, scope, *this);
    detail::check_float_input(input, 4, scope, *this);
    Shape shape = input.shape;
    for (int64_t i = 0; i < 2; ++i) {
      size_t u = static_cast<size_t>(i);
      int64_t span = (kernel_size_[u] - 1) * options_.dilation[u] + 1;
      int64_t out = spatial_out(input.shape[i + 1], span, options_.strides[u], options_.padding);
      if (out < 0) {
        fail(scope.site,
             fmt::format("{}{} needs inputs of at least {}x{} (height x width) with VALID "
                         "padding, got {}",
                         scope.prefix(), describe(),
                         (kernel_size_[0] - 1) * options_.dilation[0] + 1,
                         (kernel_size_[1] - 1) * options_.dilation[1] + 1, input.to_string()),
             "use Padding::kSame, a smaller kernel, or fewer poolings before this layer");
      }
      shape[i + 1] = out;
    }
    shape[3] = features_;
    return AbstractValue(shape, input.dtype);
  }

  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    AbstractValue output = output_type(input, scope);
    DType dtype = detail::param_dtype(input);
    Tree params =
        detail::kernel_and_bias(key, options_.kernel_init, kernel_shape(input.shape[3]),
                                options_.use_bias, options_.bias_init, features_, dtype, scope);
    return LayerInit{Variables{std::move(params), Tree()}, output};
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& /*options*/,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    int64_t channels = x.dim(3);
    const Tree& params = variables.params;
    std::vector<std::string> names = {"kernel"};
    if (options_.use_bias) names.insert(names.begin(), "bias");
    detail::check_entries(params, names, "params", scope, *this);
    const Tree& entry = params["kernel"];
    if (entry.is_leaf() && entry.leaf().rank() == 4 && entry.leaf().dim(0) == kernel_size_[0] &&
        entry.leaf().dim(1) == kernel_size_[1] && entry.leaf().dim(3) == features_ &&
        entry.leaf().dim(2) != channels) {
      fail(scope.site,
           fmt::format("{}{} expects inputs with {} channels (the last axis), got {}",
                       scope.prefix(), describe(), entry.leaf().dim(2), x.aval().to_string()),
           "the kernel was created for another input; check the layers before this one");
    }
    const Array& kernel =
        detail::param_leaf(params, "kernel", kernel_shape(channels), scope, *this, x);
    Array y =
        conv2d(x, kernel, options_.strides, options_.padding, options_.dilation, 1, scope.site);
    if (options_.use_bias) {
      y = add(y, detail::param_leaf(params, "bias", Shape{features_}, scope, *this, x), scope.site);
    }
    return ApplyResult{y, variables.state};
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    output_type(input, scope);
    return kernel_shape(input.shape[3]).num_elements() + (options_.use_bias ? features_ : 0);
  }

 private:
  Shape kernel_shape(int64_t channels) const {
    return Shape{kernel_size_[0], kernel_size_[1], channels, features_};
  }

  int64_t features_;
  Dims kernel_size_;
  Conv2DOptions options_;
};

class PoolImpl final : public Layer {
 public:
  PoolImpl(bool is_max, Dims window, Dims strides, Padding padding, CallSite site)
      : is_max_(is_max),
        window_(std::move(window)),
        strides_(strides.empty() ? window_ : std::move(strides)),
        padding_(padding) {
    detail::check_pair(window_, fmt::format("{}: window", name()), site);
    detail::check_pair(strides_, fmt::format("{}: strides", name()), site);
  }

  std::string_view kind() const override { return is_max_ ? "max_pool" : "avg_pool"; }
  std::string describe() const override {
    std::string text = fmt::format("{}({}", name(), detail::window_string(window_));
    if (strides_ != window_) text += fmt::format(", stride {}", detail::window_string(strides_));
    return text + padding_suffix(padding_) + ")";
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    detail::check_nhwc_input(input, scope, *this);
    if (!is_max_) detail::check_float_input(input, 4, scope, *this);
    Shape shape = input.shape;
    for (int64_t i = 0; i < 2; ++i) {
      size_t u = static_cast<size_t>(i);
      int64_t out = spatial_out(input.shape[i + 1], window_[u], strides_[u], padding_);
      if (out < 0) {
        fail(scope.site,
             fmt::format("{}{}: the {} window is larger than the {}x{} (height x width) of the "
                         "input {} with VALID padding",
                         scope.prefix(), describe(), detail::window_string(window_), input.shape[1],
                         input.shape[2], input.to_string()),
             "use Padding::kSame, a smaller window, or fewer poolings before this layer");
      }
      shape[i + 1] = out;
    }
    return AbstractValue(shape, input.dtype);
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& /*options*/,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    detail::check_entries(variables.params, {}, "params", scope, *this);
    Array y = is_max_ ? max_pool(x, window_, strides_, padding_, scope.site)
                      : avg_pool(x, window_, strides_, padding_, scope.site);
    return ApplyResult{y, variables.state};
  }

 private:
  std::string_view name() const { return is_max_ ? "MaxPool" : "AvgPool"; }

  bool is_max_;
  Dims window_;
  Dims strides_;
  Padding padding_;
};

class FlattenImpl final : public Layer {
 public:
  std::string_view kind() const override { return "flatten"; }
  std::string describe() const override { return "Flatten"; }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    if (input.shape.rank() < 1) {
      fail(scope.site,
           fmt::format("{}Flatten expects inputs with a batch axis, got {}", scope.prefix(),
                       input.to_string()),
           "inputs have the batch axis first");
    }
    int64_t rest = 1;
    for (int64_t i = 1; i < input.shape.rank(); ++i) rest *= input.shape[i];
    return AbstractValue(Shape{input.shape[0], rest}, input.dtype);
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& /*options*/,
                    const LayerScope& scope) const override {
    AbstractValue output = output_type(x.aval(), scope);
    detail::check_entries(variables.params, {}, "params", scope, *this);
    return ApplyResult{reshape(x, output.shape, scope.site), variables.state};
  }
};

}  // namespace

Module Conv2D(int64_t features, Dims kernel_size, Conv2DOptions options, CallSite site) {
  return Module(
      std::make_shared<Conv2DImpl>(features, std::move(kernel_size), std::move(options), site));
}

Module MaxPool(Dims window, Dims strides, Padding padding, CallSite site) {
  return Module(
      std::make_shared<PoolImpl>(true, std::move(window), std::move(strides), padding, site));
}

Module AvgPool(Dims window, Dims strides, Padding padding, CallSite site) {
  return Module(
      std::make_shared<PoolImpl>(false, std::move(window), std::move(strides), padding, site));
}

Module Flatten() {
  return Module(std::make_shared<FlattenImpl>());
}

}  // namespace kiln::nn
