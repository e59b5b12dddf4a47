// The interface every layer implements behind kiln::nn::Module, and the helpers the layers
// share for checking inputs and parameter trees. A Scope carries the layer's path
// ("sequential_2/dense_0", empty for the root) and the user's call site, so that every error
// names the layer and points at the line that called init or apply.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn::detail {

struct Scope {
  std::string path;  // "" for the module init/apply was called on
  CallSite site;

  // The scope of a child named `name` ("dense_1").
  Scope child(std::string_view name) const;
  // "dense_3: " (nothing for the root), to start an error message.
  std::string prefix() const;
  // The path of a parameter of this layer: "dense_3/kernel" (or "kernel" at the root).
  std::string param_path(std::string_view name) const;
};

struct InitResult {
  Variables variables;
  AbstractValue output;
};

// One row of Module::summary.
struct SummaryRow {
  std::string path;
  std::string layer;
  std::string output;
  int64_t params = 0;
};

class ModuleImpl {
 public:
  virtual ~ModuleImpl() = default;

  // "dense", "conv2d", ... (the stem of the names Sequential gives its children).
  virtual std::string_view kind() const = 0;
  // The layer and its configuration, for errors and summaries: "Dense(512)".
  virtual std::string describe() const = 0;

  // The output type for `input`; an error naming the scope when the input does not fit.
  virtual AbstractValue output_type(const AbstractValue& input, const Scope& scope) const = 0;
  // Default: no params and no state (after checking the input through output_type).
  virtual InitResult init(const Array& key, const AbstractValue& input, const Scope& scope) const;
  virtual ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                            const Scope& scope) const = 0;

  // Scalar parameters this layer creates for `input` (default 0).
  virtual int64_t count_params(const AbstractValue& input, const Scope& scope) const;
  // Whether apply reads options.key for these options (Dropout in training). Containers
  // fold a child's position into the key only for children that do.
  virtual bool uses_key(const ApplyOptions& options) const;
  // Appends this layer's summary rows; containers add one per child.
  virtual void summarize(const AbstractValue& input, const Scope& scope,
                         std::vector<SummaryRow>& rows) const;
  // Rows for a container's children (nothing for a plain layer).
  virtual void summarize_children(const AbstractValue& input, const Scope& scope,
                                  std::vector<SummaryRow>& rows) const;
};

// ----- shared checks ---------------------------------------------------------------------
// "[3, 3]" -> "3x3", for layer descriptions.
std::string window_string(const Dims& dims);
// Fails unless `dims` has two positive entries (height, width); `what` names the layer
// constructor and the argument ("Conv2D: kernel_size").
void check_pair(const Dims& dims, std::string_view what, CallSite site);
// Fails unless the input has a floating-point dtype and at least `min_rank` axes.
void check_float_input(const AbstractValue& input, int64_t min_rank, const Scope& scope,
                       const ModuleImpl& layer);
// Fails unless the input is NHWC (rank 4).
void check_nhwc_input(const AbstractValue& input, const Scope& scope, const ModuleImpl& layer);
// The dtype parameters are created in: the input's when it is floating point, else f32.
DType param_dtype(const AbstractValue& input);
// The {kernel, bias} params of Dense and Conv2D: the kernel drawn with fold_in(key, 0),
// the bias (of `features` elements, when use_bias) with fold_in(key, 1).
Tree kernel_and_bias(const Array& key, const Initializer& kernel_init, const Shape& kernel_shape,
                     bool use_bias, const Initializer& bias_init, int64_t features, DType dtype,
                     const Scope& scope);

// The params (or state) dict of a layer must hold exactly `names`; fails naming the layer
// and the keys it has otherwise. `what` is "params" or "state".
void check_entries(const Tree& tree, const std::vector<std::string>& names, std::string_view what,
                   const Scope& scope, const ModuleImpl& layer);
// The leaf `name` of `tree`, which must have shape `expected` (dtype not checked: params may be
// in another floating type): "dense_1/kernel: expected f32[784,512], got f32[784,256] ...".
const Array& param_leaf(const Tree& tree, std::string_view name, const Shape& expected,
                        const Scope& scope, const ModuleImpl& layer, const Array& x);

}  // namespace kiln::nn::detail
