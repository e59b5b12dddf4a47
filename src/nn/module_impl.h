// The helpers kiln's layers share for checking inputs and parameter trees (the interface
// they implement, nn::Layer, is public: kiln/nn/layer.h). Every error names the layer's
// scope and points at the line that called init or apply.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/nn/layer.h"

namespace kiln::nn::detail {

// ----- shared checks ---------------------------------------------------------------------
// Whether `kind` is lower-case letters, digits and '_' (a layer's kind, the stem of its
// path in a Sequential).
bool valid_kind(std::string_view kind);
// "[3, 3]" -> "3x3", for layer descriptions.
std::string window_string(const Dims& dims);
// Fails unless `dims` has two positive entries (height, width); `what` names the layer
// constructor and the argument ("Conv2D: kernel_size").
void check_pair(const Dims& dims, std::string_view what, CallSite site);
// Fails unless the input has a floating-point dtype and at least `min_rank` axes.
void check_float_input(const AbstractValue& input, int64_t min_rank, const LayerScope& scope,
                       const Layer& layer);
// Fails unless the input is NHWC (rank 4).
void check_nhwc_input(const AbstractValue& input, const LayerScope& scope, const Layer& layer);
// The dtype parameters are created in: the input's when it is floating point, else f32.
DType param_dtype(const AbstractValue& input);
// The {kernel, bias} params of Dense and Conv2D: the kernel drawn with fold_in(key, 0),
// the bias (of `features` elements, when use_bias) with fold_in(key, 1).
Tree kernel_and_bias(const Array& key, const Initializer& kernel_init, const Shape& kernel_shape,
                     bool use_bias, const Initializer& bias_init, int64_t features, DType dtype,
                     const LayerScope& scope);

// The params (or state) dict of a layer must hold exactly `names`; fails naming the layer
// and the keys it has otherwise. `what` is "params" or "state".
void check_entries(const Tree& tree, const std::vector<std::string>& names, std::string_view what,
                   const LayerScope& scope, const Layer& layer);
// The leaf `name` of `tree`, which must have shape `expected` (dtype not checked: params may be
// in another floating type): "dense_1/kernel: expected f32[784,512], got f32[784,256] ...".
const Array& param_leaf(const Tree& tree, std::string_view name, const Shape& expected,
                        const LayerScope& scope, const Layer& layer, const Array& x);

}  // namespace kiln::nn::detail
