// Where a NaN or an infinity comes from (JAX's jax_debug_nans, as a function you call):
// find_nonfinite traces f(args...) as make_program does, then runs the program one
// primitive at a time, eagerly, and stops at the first equation whose result holds a NaN or
// an infinity. Its inputs were all finite (else an earlier equation, or an argument, would
// have been found first), so that equation is where the value was made: the primitive, the
// named_scope it ran in and the line of the caller's code that called it.
//
//   auto loss = [](const Array& w, const Array& x) { return sum(log(matmul(x, w))); };
//   NonFiniteOrigin origin = find_nonfinite(loss, w, x);
//   if (origin.found()) std::cerr << origin.to_string();
//   // equation 1 of 3, log at mlp.cc:12 (scope "mlp"): f32[4,3] has 2 NaN, 0 infinite ...
//
// Under jit, grad and vmap the same f gives the same program, so a jitted step that
// returned a NaN is debugged by calling find_nonfinite on the function it was made from,
// with the same arguments. Slow on purpose: every result is copied to the host and checked.
// An equation that holds a sub-program (scan, cond, while, checkpoint) is reported whole.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "kiln/detail/pytree.h"
#include "kiln/error.h"

namespace kiln {

struct NonFiniteOrigin {
  enum class Kind {
    kNone,      // every argument and every result was finite
    kArgument,  // array argument `index` (in flattened leaf order) already held one
    kConstant,  // a value f closed over (index: its position among the program's constants)
    kEquation,  // equation `index` of the traced program made one
  };
  Kind kind = Kind::kNone;
  int64_t index = -1;
  int64_t equations = 0;         // how many the program has
  std::string primitive;         // kEquation: "log"
  std::string scope;             // kEquation: the named_scope path ("" outside any)
  CallSite site = kUnknownSite;  // kEquation: the user's line that called the primitive
  // The array that holds the value ("f32[4,3]"), and how many of its elements are NaN and
  // infinite; for an equation, the result that held one (index among its results).
  std::string value;
  int64_t result = 0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  // kEquation: each operand's type and, for floating ones, its finite range
  // ("f32[4,3] in [-1.5, 0]"), so that log(0) or x / 0 shows at once.
  std::vector<std::string> operands;

  bool found() const { return kind != Kind::kNone; }
  // A few lines for an error message or a log.
  std::string to_string() const;
};

namespace detail {

NonFiniteOrigin find_nonfinite_flat(const FlatFunction& fn, std::span<const Array> inputs,
                                    CallSite site);

}  // namespace detail

// f's arguments as for make_program (Arrays, Trees and pytrees of them; others static).
template <typename F, typename... Args>
NonFiniteOrigin find_nonfinite(F f, const Args&... args) {
  detail::FlatCall<F, Args...> call(std::move(f), args...);
  return detail::find_nonfinite_flat(call.function(), call.leaves(), CallSite());
}

}  // namespace kiln
