// Module's public methods (each opens a root LayerScope and calls the layer), the defaults of
// Layer, the input and parameter checks the layers share, and the summary table.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/random.h"
#include "nn/module_impl.h"

namespace kiln::nn {

LayerScope LayerScope::child(std::string_view name) const {
  return LayerScope{path.empty() ? std::string(name) : fmt::format("{}/{}", path, name), site};
}

std::string LayerScope::prefix() const {
  return path.empty() ? std::string() : path + ": ";
}

std::string LayerScope::param_path(std::string_view name) const {
  return path.empty() ? std::string(name) : fmt::format("{}/{}", path, name);
}

LayerInit Layer::init(const Array& /*key*/, const AbstractValue& input,
                      const LayerScope& scope) const {
  return LayerInit{Variables{}, output_type(input, scope)};
}

int64_t Layer::count_params(const AbstractValue& /*input*/, const LayerScope& /*scope*/) const {
  return 0;
}

bool Layer::uses_key(const ApplyOptions& /*options*/) const {
  return false;
}

void Layer::summarize(const AbstractValue& input, const LayerScope& scope,
                      std::vector<SummaryRow>& rows) const {
  rows.push_back(SummaryRow{scope.path, describe(), output_type(input, scope).to_string(),
                            count_params(input, scope)});
}

void Layer::summarize_children(const AbstractValue& /*input*/, const LayerScope& /*scope*/,
                               std::vector<SummaryRow>& /*rows*/) const {}

namespace detail {

bool valid_kind(std::string_view kind) {
  return !kind.empty() && std::all_of(kind.begin(), kind.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string window_string(const Dims& dims) {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i) text += fmt::format("{}{}", i ? "x" : "", dims[i]);
  return text;
}

void check_pair(const Dims& dims, std::string_view what, CallSite site) {
  if (dims.size() != 2 || dims[0] < 1 || dims[1] < 1) {
    fail(site,
         fmt::format("{} must be two positive sizes (height, width), got {}", what,
                     dims_to_string(dims)),
         "e.g. {3, 3}");
  }
}

void check_float_input(const AbstractValue& input, int64_t min_rank, const LayerScope& scope,
                       const Layer& layer) {
  if (!is_floating(input.dtype)) {
    fail(scope.site,
         fmt::format("{}{} expects floating-point inputs, got {}", scope.prefix(), layer.describe(),
                     input.to_string()),
         "convert the input first, e.g. astype(x, DType::f32)");
  }
  if (input.shape.rank() < min_rank) {
    fail(scope.site,
         fmt::format("{}{} expects inputs of rank >= {}, got {}", scope.prefix(), layer.describe(),
                     min_rank, input.to_string()),
         "inputs have the batch axis first");
  }
}

void check_nhwc_input(const AbstractValue& input, const LayerScope& scope, const Layer& layer) {
  if (input.shape.rank() != 4) {
    fail(scope.site,
         fmt::format("{}{} expects NHWC inputs of rank 4 (batch, height, width, channels), got {}",
                     scope.prefix(), layer.describe(), input.to_string()),
         input.shape.rank() == 3 ? "add the channel axis, e.g. reshape to [N, H, W, 1]"
                                 : "reshape to [batch, height, width, channels]");
  }
}

DType param_dtype(const AbstractValue& input) {
  return is_floating(input.dtype) ? input.dtype : DType::f32;
}

Tree kernel_and_bias(const Array& key, const Initializer& kernel_init, const Shape& kernel_shape,
                     bool use_bias, const Initializer& bias_init, int64_t features, DType dtype,
                     const LayerScope& scope) {
  std::vector<Tree::Item> params;
  params.emplace_back("kernel",
                      kernel_init(random::fold_in(key, 0, scope.site), kernel_shape, dtype));
  if (use_bias) {
    params.emplace_back("bias",
                        bias_init(random::fold_in(key, 1, scope.site), Shape{features}, dtype));
  }
  return Tree::dict(std::move(params));
}

namespace {

std::string key_list(const std::vector<std::string>& keys) {
  return fmt::format("{{{}}}", fmt::join(keys, ", "));
}

std::string tree_kind(const Tree& tree) {
  switch (tree.kind()) {
    case Tree::Kind::kNone:
      return "none";
    case Tree::Kind::kLeaf:
      return fmt::format("a leaf {}", tree.leaf().aval().to_string());
    case Tree::Kind::kDict:
      return fmt::format("a dict with keys {}", key_list(tree.keys()));
    case Tree::Kind::kList:
      return fmt::format("a list of {}", tree.size());
  }
  return "?";
}

constexpr std::string_view kParamsHint =
    "pass the variables that init returned for this model and this input type";

}  // namespace

void check_entries(const Tree& tree, const std::vector<std::string>& names, std::string_view what,
                   const LayerScope& scope, const Layer& layer) {
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty()) {
    if (tree.is_none()) return;
    fail(scope.site,
         fmt::format("{}{} has no {}, got {}", scope.prefix(), layer.describe(), what,
                     tree_kind(tree)),
         std::string(kParamsHint));
  }
  if (!tree.is_dict() || tree.keys() != sorted) {
    fail(scope.site,
         fmt::format("{}{} expects {} {}, got {}", scope.prefix(), layer.describe(), what,
                     key_list(sorted), tree_kind(tree)),
         std::string(kParamsHint));
  }
}

const Array& param_leaf(const Tree& tree, std::string_view name, const Shape& expected,
                        const LayerScope& scope, const Layer& layer, const Array& x) {
  const Tree& entry = tree[TreeKey(name, scope.site)];
  if (!entry.is_leaf()) {
    fail(scope.site,
         fmt::format("{}: expected an array, got {} ({})", scope.param_path(name), tree_kind(entry),
                     layer.describe()),
         std::string(kParamsHint));
  }
  const Array& leaf = entry.leaf();
  if (leaf.shape() != expected) {
    fail(scope.site,
         fmt::format("{}: expected {}, got {} ({} on inputs {})", scope.param_path(name),
                     AbstractValue(expected, leaf.dtype()).to_string(), leaf.aval().to_string(),
                     layer.describe(), x.aval().to_string()),
         std::string(kParamsHint));
  }
  return leaf;
}

}  // namespace detail

namespace {

LayerScope root_scope(CallSite site) {
  return LayerScope{"", site};
}

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

Module::Module(std::shared_ptr<const Layer> layer, CallSite site) : layer_(std::move(layer)) {
  if (!layer_)
    fail(site, "nn::Module: the layer is null", "e.g. nn::Module(std::make_shared<MyLayer>())");
  if (!detail::valid_kind(layer_->kind())) {
    fail(site,
         fmt::format("nn::Module: the layer's kind '{}' must be lower-case letters, digits and '_'",
                     layer_->kind()),
         "the kind is the stem of the path Sequential gives the layer, e.g. \"residual_mlp\"");
  }
}

Variables Module::init(const Array& key, const AbstractValue& input, CallSite site) const {
  if (!key.defined()) {
    fail(site, fmt::format("{}.init: the key is an empty Array", kind()),
         "pass a key, e.g. random::key(0)");
  }
  return layer_->init(key, input, root_scope(site)).variables;
}

ApplyResult Module::apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                          CallSite site) const {
  if (!x.defined()) {
    fail(site, fmt::format("{}.apply: the input is an empty Array", layer_->describe()));
  }
  return layer_->apply(variables, x, options, root_scope(site));
}

AbstractValue Module::output_type(const AbstractValue& input, CallSite site) const {
  return layer_->output_type(input, root_scope(site));
}

std::string_view Module::kind() const {
  return layer_->kind();
}

std::string Module::summary(const AbstractValue& input) const {
  LayerScope scope = root_scope(CallSite());
  std::vector<SummaryRow> rows;
  layer_->summarize_children(input, scope, rows);
  if (rows.empty()) layer_->summarize(input, scope, rows);
  for (SummaryRow& row : rows) {
    if (row.path.empty()) row.path = std::string(kind());
  }
  // Container rows repeat their children's counts, so the total comes from the root.
  int64_t total = layer_->count_params(input, scope);
  std::vector<std::string> counts;
  size_t widths[4] = {4, 5, 6, 6};  // the headers' lengths
  for (const SummaryRow& row : rows) {
    counts.push_back(with_commas(row.params));
    widths[0] = std::max(widths[0], row.path.size());
    widths[1] = std::max(widths[1], row.layer.size());
    widths[2] = std::max(widths[2], row.output.size());
    widths[3] = std::max(widths[3], counts.back().size());
  }
  std::string out = fmt::format("{} on {}\n", layer_->describe(), input.to_string());
  auto line = [&](std::string_view a, std::string_view b, std::string_view c, std::string_view d) {
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>{}}\n", a, widths[0], b, widths[1], c, widths[2],
                       d, widths[3]);
  };
  line("path", "layer", "output", "params");
  line(std::string(widths[0], '-'), std::string(widths[1], '-'), std::string(widths[2], '-'),
       std::string(widths[3], '-'));
  for (size_t i = 0; i < rows.size(); ++i) {
    line(rows[i].path, rows[i].layer, rows[i].output, counts[i]);
  }
  out += fmt::format("total params: {}\n", with_commas(total));
  return out;
}

int64_t parameter_count(const Tree& params) {
  int64_t total = 0;
  for (const Array& leaf : params.leaves()) total += leaf.size();
  return total;
}

}  // namespace kiln::nn
