// Tracing ordinary C++ functions into programs: make_program, name scopes and
// stop_gradient. A function may take and return Arrays, Trees, std::vectors of Arrays and
// pairs/tuples of these ("pytrees"); any other argument is static: it is passed through
// unchanged and is part of what was traced.
//
//   std::cout << kiln::make_program(loss, w, x);   // prints the traced program
#pragma once

#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/array.h"
#include "kiln/detail/pytree.h"

namespace kiln {

class Program;

// Names the equations traced while it lives ("mlp/dense1" when nested); the names appear
// in printed programs, errors and (later) profiles.
//   { auto scope = kiln::named_scope("dense1"); y = matmul(x, w) + b; }
class NamedScope {
 public:
  explicit NamedScope(std::string_view name);
  ~NamedScope();
  NamedScope(const NamedScope&) = delete;
  NamedScope& operator=(const NamedScope&) = delete;

 private:
  size_t previous_length_;
};
inline NamedScope named_scope(std::string_view name) {
  return NamedScope(name);
}

// The value unchanged, but no gradient flows through it.
Array stop_gradient(const Array& x, CallSite site = {});

// ----- programs ---------------------------------------------------------------------------

// A traced function's program.
struct TracedProgram {
  std::shared_ptr<const Program> program;
  std::string to_string() const;
};
std::ostream& operator<<(std::ostream& out, const TracedProgram& traced);

namespace detail {

TracedProgram trace_flat(const FlatFunction& fn, std::span<const AbstractValue> input_types,
                         CallSite site);

}  // namespace detail

// Traces f(args...) into a program: Array and Tree arguments become the program's inputs
// (only their types matter); other arguments are static.
template <typename F, typename... Args>
TracedProgram make_program(F f, const Args&... args) {
  detail::FlatCall<F, Args...> call(std::move(f), args...);
  std::vector<AbstractValue> types;
  for (const Array& leaf : call.leaves()) types.push_back(leaf.aval());
  return detail::trace_flat(call.function(), types, CallSite());
}

}  // namespace kiln
