// nn::Layer: what every layer implements behind a Module, kiln's own and yours alike.
// A Module is a handle; the Layer behind it holds the configuration and answers five
// questions: its kind, a description, the output type for an input type, the variables
// for an input type (init), and the output for variables and an input (apply). Containers
// (Sequential, Residual, Remat) call their children's Layer through `child.layer()` with
// the child's scope, so errors and parameter paths name where each layer sits.
//
//   class Scaled final : public nn::Layer {   // y = x * scale, one learned scalar
//    public:
//     std::string_view kind() const override { return "scaled"; }
//     std::string describe() const override { return "Scaled"; }
//     AbstractValue output_type(const AbstractValue& input, const LayerScope&) const override {
//       return input;
//     }
//     LayerInit init(const Array&, const AbstractValue& input, const LayerScope& scope)
//         const override {
//       return {{Tree::dict({{"scale", ones({}, input.dtype)}}), Tree()}, input};
//     }
//     ApplyResult apply(const Variables& v, const Array& x, const ApplyOptions&,
//                       const LayerScope&) const override {
//       return {x * v.params["scale"].leaf(), v.state};
//     }
//     int64_t count_params(const AbstractValue&, const LayerScope&) const override { return 1; }
//   };
//   nn::Module scaled = nn::Module(std::make_shared<Scaled>());
//
// nn::custom_module (module.h) builds a Layer from two functions, for the common case of
// a layer without children. docs/training.md, *Modules of your own*, has a worked example
// of each.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/array.h"
#include "kiln/error.h"
#include "kiln/nn/module.h"
#include "kiln/shape.h"

namespace kiln::nn {

// Where a layer sits: its path ("sequential_2/dense_0", empty for the module that init or
// apply was called on) and the user's call site, so that an error names the layer and
// points at the line that called init or apply.
struct LayerScope {
  std::string path;
  CallSite site;

  // The scope of a child named `name` ("dense_1").
  LayerScope child(std::string_view name) const;
  // "dense_3: " (nothing for the root), to start an error message.
  std::string prefix() const;
  // The path of a parameter of this layer: "dense_3/kernel" (or "kernel" at the root).
  std::string param_path(std::string_view name) const;
};

struct LayerInit {
  Variables variables;
  AbstractValue output;  // the output type for the input init was given
};

// One row of Module::summary.
struct SummaryRow {
  std::string path;
  std::string layer;
  std::string output;
  int64_t params = 0;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // "dense", "conv2d", ...: lower-case letters, digits and '_', the stem of the names
  // Sequential gives its children ("dense_1").
  virtual std::string_view kind() const = 0;
  // The layer and its configuration, for errors and summaries: "Dense(512)".
  virtual std::string describe() const = 0;

  // The output type for `input`; an error naming the scope when the input does not fit.
  virtual AbstractValue output_type(const AbstractValue& input, const LayerScope& scope) const = 0;
  // Default: no params and no state (after checking the input through output_type).
  virtual LayerInit init(const Array& key, const AbstractValue& input,
                         const LayerScope& scope) const;
  virtual ApplyResult apply(const Variables& variables, const Array& x, const ApplyOptions& options,
                            const LayerScope& scope) const = 0;

  // Scalar parameters this layer creates for `input` (default 0).
  virtual int64_t count_params(const AbstractValue& input, const LayerScope& scope) const;
  // Whether apply reads options.key for these options (Dropout in training). Containers
  // fold a child's position into the key only for children that do.
  virtual bool uses_key(const ApplyOptions& options) const;
  // Appends this layer's summary rows (default: one, from describe, output_type and
  // count_params); containers add one per child.
  virtual void summarize(const AbstractValue& input, const LayerScope& scope,
                         std::vector<SummaryRow>& rows) const;
  // Rows for a container's children (nothing for a plain layer).
  virtual void summarize_children(const AbstractValue& input, const LayerScope& scope,
                                  std::vector<SummaryRow>& rows) const;
};

}  // namespace kiln::nn
