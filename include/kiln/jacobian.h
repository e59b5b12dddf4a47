// Jacobians and Hessians, as jax.jacfwd, jax.jacrev and jax.hessian: the derivative of a
// function returning an Array with respect to an Array argument, as one Array of shape
// result.shape + argument.shape.
//
//   auto f = [](const kiln::Array& x) { return kiln::tanh(x) * 2.0; };
//   kiln::Array j = kiln::jacfwd(f)(x);              // f32[n, n] for an f32[n] x
//   kiln::Array h = kiln::hessian(loss)(w, batch);   // w.shape + w.shape
//
// jacfwd pushes one tangent per input element forward (a vmap of jvp): cheaper when the
// argument has fewer elements than the result. jacrev pulls one cotangent per result
// element back (a vmap of vjp): cheaper for many inputs and few outputs. hessian is
// jacfwd of jacrev, forward over reverse, as JAX's.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/detail/pytree.h"

namespace kiln {

namespace detail {

// d fn(inputs)[0] / d inputs[leaf], of shape output.shape + inputs[leaf].shape.
Array jacobian_flat(const FlatFunction& fn, std::span<const Array> inputs, size_t leaf,
                    bool forward, CallSite site);

template <bool kForward, int kArgnum, typename F>
class Jacobian {
 public:
  Jacobian(F f, CallSite site) : f_(std::move(f)), site_(site) {}

  template <typename... Args>
  Array operator()(const Args&... args) const {
    static_assert(kArgnum >= 0 && kArgnum < static_cast<int>(sizeof...(Args)),
                  "jacfwd/jacrev/hessian: the argnum is out of range for the arguments the "
                  "function was called with (argnums count from 0)");
    static_assert(
        std::is_same_v<std::decay_t<std::tuple_element_t<kArgnum, std::tuple<Args...>>>, Array>,
        "jacfwd/jacrev/hessian: differentiate with respect to an Array argument (for a pytree, "
        "use jvp or vjp on it, or pass the leaf you need as its own argument)");
    using Call = FlatCall<F, Args...>;
    static_assert(std::is_same_v<typename Call::Result, Array>,
                  "jacfwd/jacrev/hessian: the function must return one Array");
    Call call(f_, args...);
    std::vector<Array> leaves = call.leaves();
    return jacobian_flat(call.function(), leaves, call.leaf_range(kArgnum).first, kForward, site_);
  }

 private:
  F f_;
  CallSite site_;
};

}  // namespace detail

// The Jacobian of f with respect to argument kArgnum by forward mode.
template <int kArgnum = 0, typename F>
auto jacfwd(F f, CallSite site = {}) {
  return detail::Jacobian<true, kArgnum, F>(std::move(f), site);
}

// The Jacobian of f with respect to argument kArgnum by reverse mode.
template <int kArgnum = 0, typename F>
auto jacrev(F f, CallSite site = {}) {
  return detail::Jacobian<false, kArgnum, F>(std::move(f), site);
}

// The Hessian of f (returning a scalar) with respect to argument kArgnum:
// jacfwd(jacrev(f)), of shape argument.shape + argument.shape.
template <int kArgnum = 0, typename F>
auto hessian(F f, CallSite site = {}) {
  return jacfwd<kArgnum>(jacrev<kArgnum>(std::move(f), site), site);
}

}  // namespace kiln
