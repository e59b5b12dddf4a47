// Dense (x @ kernel + bias over the last axis) and Embedding (a table lookup). A layer's
// parameter i is drawn with random::fold_in(layer_key, i): kernel 0, bias 1, table 0.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/random.h"
#include "kiln/sharding.h"
#include "nn/module_impl.h"

namespace kiln::nn {
namespace {

void check_initializer(const Initializer& init, std::string_view what, CallSite site) {
  if (!init) fail(site, fmt::format("{} is an empty Initializer", what));
}

// The size of `axis` while shard_map traces a body over a mesh that has it; 0 elsewhere.
int64_t bound_axis_size(const std::string& axis) {
  return axis_is_bound(axis) ? axis_size(axis) : 0;
}

std::string_view split_name(TensorParallel parallel) {
  switch (parallel) {
    case TensorParallel::kColumn:
      return "column";
    case TensorParallel::kRow:
      return "row";
    case TensorParallel::kNone:
      break;
  }
  return "none";
}

class DenseImpl final : public Layer {
 public:
  DenseImpl(int64_t features, DenseOptions options, CallSite site)
      : features_(features), options_(std::move(options)) {
    if (features_ < 1) {
      fail(site, fmt::format("Dense: features must be positive, got {}", features_));
    }
    check_initializer(options_.kernel_init, "Dense: kernel_init", site);
    if (options_.use_bias) check_initializer(options_.bias_init, "Dense: bias_init", site);
  }

  std::string_view kind() const override { return "dense"; }
  std::string describe() const override {
    std::string split;
    if (options_.parallel != TensorParallel::kNone) {
      split =
          fmt::format(", {}-split over {}", split_name(options_.parallel), options_.parallel_axis);
    }
    return fmt::format("Dense({}{}{})", features_, options_.use_bias ? "" : ", no bias", split);
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    detail::check_float_input(input, 1, scope, *this);
    Shape shape = input.shape;
    shape[shape.rank() - 1] = features_;
    return AbstractValue(shape, input.dtype);
  }

  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    AbstractValue output = output_type(input, scope);
    int64_t in = input.shape[input.shape.rank() - 1];
    DType dtype = detail::param_dtype(input);
    Tree params =
        detail::kernel_and_bias(key, options_.kernel_init, Shape{in, features_}, options_.use_bias,
                                options_.bias_init, features_, dtype, scope);
    return LayerInit{Variables{std::move(params), Tree()}, output};
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& /*options*/,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    // Split only where shard_map binds the axis; an axis of size 1 still takes the psum, so
    // that the result is known to be the same along it.
    const int64_t devices =
        options_.parallel == TensorParallel::kNone ? 0 : bound_axis_size(options_.parallel_axis);
    const bool column = devices > 0 && options_.parallel == TensorParallel::kColumn;
    const bool row = devices > 0 && options_.parallel == TensorParallel::kRow;
    if (column && features_ % devices != 0) {
      fail(scope.site,
           fmt::format("{}{}: {} features do not split evenly over the {} devices of mesh axis "
                       "'{}'",
                       scope.prefix(), describe(), features_, devices, options_.parallel_axis),
           "choose features divisible by the axis size, or leave the layer unsplit");
    }
    // This device's share: the column-split layer computes features / n of the outputs.
    const int64_t out = column ? features_ / devices : features_;
    int64_t in = x.dim(-1);
    const Tree& params = variables.params;
    detail::check_entries(params, names(), "params", scope, *this);
    const Tree& kernel_entry = params["kernel"];
    // A kernel of the right features but another in-size means the input is what is wrong
    // (the usual mistake: a layer before this one changed), so say that.
    if (kernel_entry.is_leaf() && kernel_entry.leaf().rank() == 2 &&
        kernel_entry.leaf().dim(1) == out && kernel_entry.leaf().dim(0) != in) {
      fail(scope.site,
           fmt::format("{}{} expects inputs whose last axis is {}, got {}", scope.prefix(),
                       describe(), kernel_entry.leaf().dim(0), x.aval().to_string()),
           row ? "a row-split layer takes the output of a column-split one: check the layers "
                 "before this one"
               : "the kernel was created for another input size: check the layers before this "
                 "one, or init again with the input type you apply to");
    }
    const Array& kernel = detail::param_leaf(params, "kernel", Shape{in, out}, scope, *this, x);
    Array y = matmul(x, kernel, scope.site);
    // Every device adds its rows' share of the product; the sum is the whole layer's.
    if (row) y = psum(y, options_.parallel_axis, scope.site);
    if (options_.use_bias) {
      y = add(y, detail::param_leaf(params, "bias", Shape{out}, scope, *this, x), scope.site);
    }
    return ApplyResult{y, variables.state};
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    output_type(input, scope);
    int64_t in = input.shape[input.shape.rank() - 1];
    return in * features_ + (options_.use_bias ? features_ : 0);
  }

 private:
  std::vector<std::string> names() const {
    if (options_.use_bias) return {"bias", "kernel"};
    return {"kernel"};
  }

  int64_t features_;
  DenseOptions options_;
};

class EmbeddingImpl final : public Layer {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t features, Initializer init, CallSite site)
      : num_embeddings_(num_embeddings), features_(features), init_(std::move(init)) {
    if (num_embeddings_ < 1 || features_ < 1) {
      fail(site,
           fmt::format("Embedding: num_embeddings and features must be positive, got {} and {}",
                       num_embeddings_, features_));
    }
    check_initializer(init_, "Embedding: embedding_init", site);
  }

  std::string_view kind() const override { return "embedding"; }
  std::string describe() const override {
    return fmt::format("Embedding({}, {})", num_embeddings_, features_);
  }

  AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const override {
    if (!is_integer(input.dtype)) {
      fail(scope.site,
           fmt::format("{}{} expects integer indices, got {}", scope.prefix(), describe(),
                       input.to_string()),
           "pass token ids as i32, e.g. astype(ids, DType::i32)");
    }
    Shape shape = input.shape;
    shape.dims().push_back(features_);
    return AbstractValue(shape, DType::f32);
  }

  LayerInit init(const Array& key, const AbstractValue& input,
                 const LayerScope& scope) const override {
    AbstractValue output = output_type(input, scope);
    Array table =
        init_(random::fold_in(key, 0, scope.site), Shape{num_embeddings_, features_}, DType::f32);
    return LayerInit{Variables{Tree::dict({{"embedding", table}}), Tree()}, output};
  }

  ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& /*options*/,
                    const LayerScope& scope) const override {
    output_type(x.aval(), scope);
    detail::check_entries(variables.params, {"embedding"}, "params", scope, *this);
    const Array& table = detail::param_leaf(variables.params, "embedding",
                                            Shape{num_embeddings_, features_}, scope, *this, x);
    return ApplyResult{take(table, x, 0, std::nullopt, scope.site), variables.state};
  }

  int64_t count_params(const AbstractValue& input, const LayerScope& scope) const override {
    output_type(input, scope);
    return num_embeddings_ * features_;
  }

 private:
  int64_t num_embeddings_;
  int64_t features_;
  Initializer init_;
};

}  // namespace

Module Dense(int64_t features, DenseOptions options, CallSite site) {
  return Module(std::make_shared<DenseImpl>(features, std::move(options), site));
}

Module Embedding(int64_t num_embeddings, int64_t features, Initializer embedding_init,
                 CallSite site) {
  return Module(
      std::make_shared<EmbeddingImpl>(num_embeddings, features, std::move(embedding_init), site));
}

}  // namespace kiln::nn
