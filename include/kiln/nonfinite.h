// Where a NaN or an infinity comes from (JAX's jax_debug_nans, as a function you call):
// find_nonfinite traces f(args...) as make_program does, then runs the program one
// primitive at a time, eagerly, and stops at the first equation that made a NaN or an
// infinity its operands did not hold (a NaN from operands without one, an infinity from
// finite operands): the primitive, the named_scope it ran in and the line of the caller's
// code that called it.
//
//   auto loss = [](const Array& w, const Array& x) { return sum(log(matmul(x, w))); };
//   NonFiniteOrigin origin = find_nonfinite(loss, w, x);
//   if (origin.found()) std::cerr << origin.to_string();
//   // equation 1 of 3, log at mlp.cc:12 (scope "mlp"): result 0 f32[4,3] has 0 NaN and 2
//   // infinite element(s), from finite operands
//
// Programs hold non-finite values on purpose (-inf to mask a score or pad a max-pool, NaN
// for an invalid label's loss); those come in as constants and are carried along, not
// made, so they are not origins. When no equation made one and a result still holds one,
// the first such equation is reported with `made` false: the operands listed
// show where it came from (a constant, marked so).
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
    kNone,      // no argument and no result holds a NaN or an infinity
    kArgument,  // array argument `index` (in flattened leaf order) already held one
    kEquation,  // equation `index` of the traced program (see from_finite_operands)
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
  // kEquation: whether it made the value (true), or only carried one an operand held, and
  // how, in words: "from finite operands", "a NaN from operands with infinities", "carried
  // from an operand that held one (no equation made one)".
  bool made = true;
  std::string how;
  // kEquation: each operand's type and, for floating ones, its finite range and its
  // non-finite elements ("f32[4,3] in [-1.5, 0]"), so that log(0) or x / 0 shows at once.
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
