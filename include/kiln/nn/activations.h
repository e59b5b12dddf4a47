// Activation functions, written with kiln's ops so that they trace, differentiate, batch
// and jit like any other code. Each stays finite and accurate at large |x| (no exp of a
// large positive number, no log of 0): see docs/training.md for how each is computed.
#pragma once

#include <cstdint>

#include "kiln/array.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::nn {

Array relu(const Array& x, CallSite site = {});
Array leaky_relu(const Array& x, double negative_slope = 0.01, CallSite site = {});
Array elu(const Array& x, double alpha = 1.0, CallSite site = {});
// Exact: x * Phi(x) with the Gaussian CDF through erf. Approximate: the tanh form.
Array gelu(const Array& x, bool approximate = false, CallSite site = {});
Array silu(const Array& x, CallSite site = {});     // x * sigmoid(x)
Array sigmoid(const Array& x, CallSite site = {});  // kiln::logistic, for floats
// nn::tanh is kiln::tanh itself (not a second function of the same signature), so code
// that uses both namespaces can call tanh(x) unambiguously.
using kiln::tanh;
Array softplus(const Array& x, CallSite site = {});  // log(1 + exp(x)), stable both ways
// Along `axis` (negative counts from the end), shifted by the maximum first.
Array softmax(const Array& x, int64_t axis = -1, CallSite site = {});
Array log_softmax(const Array& x, int64_t axis = -1, CallSite site = {});
// With a mask, as jax.nn's where=: `where` (bool, broadcasting to x) selects the elements
// that take part. softmax gives 0 for the others, log_softmax -inf; a row with none gives
// all 0 (softmax) or all -inf (log_softmax), and a gradient of 0 throughout, never NaN.
Array softmax(const Array& x, int64_t axis, const Array& where, CallSite site = {});
Array log_softmax(const Array& x, int64_t axis, const Array& where, CallSite site = {});

// The names accepted by activation_by_name (and by configs): relu, leaky_relu, elu, gelu,
// gelu_tanh, silu, sigmoid, tanh, softplus, identity. An unknown name is an error with a
// did-you-mean suggestion.
using ActivationFn = Array (*)(const Array&);
ActivationFn activation_by_name(std::string_view name, CallSite site = {});

}  // namespace kiln::nn
