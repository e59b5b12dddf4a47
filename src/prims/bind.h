// bind(): the single entry point from ops to primitives. It checks the call against the
// registry (arity, params kind, abstract evaluation: shapes and dtypes, with errors at the
// user's call site) and hands it to the interpreter in charge on this thread: the eager
// runtime by default, a tracer while a transformation is recording.
#pragma once

#include <span>
#include <vector>

#include "kiln/array.h"
#include "prims/registry.h"

namespace kiln {

class Interpreter {
 public:
  virtual ~Interpreter() = default;
  // Applies a checked primitive call; out_avals come from the primitive's abstract_eval.
  virtual std::vector<Array> apply(const PrimDef& prim, std::span<const Array> inputs,
                                   const Params& params, std::vector<AbstractValue> out_avals,
                                   CallSite site) = 0;
};

// The eager interpreter, provided by the runtime layer.
Interpreter& eager_interpreter();
// The eager interpreter, except that each op runs on the calling thread before bind
// returns, instead of behind everything already queued on its device: for constant folding
// at compile time, which needs a few small values now and must not wait (nor make the
// compile time it reports wait) for a queue of earlier work. An op still waits for its own
// operands. Not a tracing interpreter (jit inlines under it, as under any other).
Interpreter& immediate_interpreter();

// The interpreter that handles binds on this thread now (the eager one when none is set).
Interpreter& current_interpreter();

// Makes `interpreter` handle binds on this thread until the scope ends.
class InterpreterScope {
 public:
  explicit InterpreterScope(Interpreter& interpreter);
  ~InterpreterScope();
  InterpreterScope(const InterpreterScope&) = delete;
  InterpreterScope& operator=(const InterpreterScope&) = delete;

 private:
  Interpreter* previous_;
};

std::vector<AbstractValue> abstract_eval(PrimId id, std::span<const AbstractValue> inputs,
                                         const Params& params, CallSite site);
std::vector<Array> bind(PrimId id, std::span<const Array> inputs, const Params& params,
                        CallSite site);
// For primitives with exactly one result.
Array bind1(PrimId id, std::span<const Array> inputs, const Params& params, CallSite site);
inline Array bind1(PrimId id, std::initializer_list<Array> inputs, const Params& params,
                   CallSite site) {
  return bind1(id, std::span<const Array>(inputs.begin(), inputs.size()), params, site);
}

}  // namespace kiln
