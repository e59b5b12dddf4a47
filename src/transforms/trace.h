// Tracing: while a TraceContext is the current interpreter, every primitive that ops bind
// is recorded as an equation instead of being run. Values of the function being traced
// are Tracers (an ArrayImpl carrying a variable); anything else an op receives (concrete
// arrays, values of an enclosing trace) becomes a constant of the program.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/program.h"
#include "prims/bind.h"
#include "transforms/transform_value.h"

namespace kiln {

class TraceContext;

// A value inside a trace: its type and the variable that will hold it.
class Tracer final : public TransformValue {
 public:
  Tracer(AbstractValue aval, std::shared_ptr<Interpreter*> trace, VarId var)
      : TransformValue(std::move(aval), std::move(trace)), var_(var) {}
  VarId var() const { return var_; }

 private:
  VarId var_;
};

class TraceContext final : public Interpreter {
 public:
  TraceContext();
  ~TraceContext() override;
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  // A new input of the program, as a value the traced function can use.
  Array new_input(const AbstractValue& aval);
  // Ends the trace: `outputs` become the program's outputs (values that are not this
  // trace's become constants). Tracers of this trace are unusable afterwards.
  Program finish(std::span<const Array> outputs, CallSite site);

  std::vector<Array> apply(const PrimDef& prim, std::span<const Array> inputs, const Params& params,
                           std::vector<AbstractValue> out_avals, CallSite site) override;

 private:
  VarId var_of(const Array& value, CallSite site);

  ProgramBuilder builder_;
  std::shared_ptr<Interpreter*> self_;  // shared with this trace's tracers; null once finished
  // Constants already captured, so that one array used twice is one constant. Looked up
  // only; never iterated, so hash order cannot reach the program.
  std::unordered_map<const ArrayImpl*, VarId> constant_vars_;
};

// The current name scope ("mlp/dense1"), recorded on every traced equation.
const std::string& current_scope();

// Replaces the current name scope while it lives (used to re-emit equations under the
// scope they were first traced in).
class ScopeOverride {
 public:
  explicit ScopeOverride(std::string scope);
  ~ScopeOverride();
  ScopeOverride(const ScopeOverride&) = delete;
  ScopeOverride& operator=(const ScopeOverride&) = delete;

 private:
  std::string previous_;
};

}  // namespace kiln
