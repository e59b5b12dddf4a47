// Sub-programs of the control-flow primitives: tracing a function into a closed program
// (closure conversion), running one, and the batching helpers the rules share.
//
// A traced body may use values it did not receive as arguments (arrays it captured, or
// values of an enclosing trace). trace_closed turns each into a leading input of the
// program and returns its value, which the caller passes as an operand: sub-programs refer
// to nothing outside themselves, as JAX's closed jaxprs.
#pragma once

#include <span>
#include <vector>

#include "ir/program.h"
#include "kiln/transforms.h"

namespace kiln::control_flow {

struct ClosedProgram {
  ProgramRef program;         // inputs: the captured values, then the function's arguments
  std::vector<Array> consts;  // the captured values, for the leading inputs
};

// Traces fn on arguments of `arg_types` with a fresh trace. Rank-0 concrete constants stay
// in the program as literals; every other captured value becomes a leading input.
ClosedProgram trace_closed(const detail::FlatFunction& fn, std::span<const AbstractValue> arg_types,
                           CallSite site);

// Runs a sub-program under the current interpreter.
std::vector<Array> run(const ProgramRef& program, std::span<const Array> inputs, CallSite site);

// Values without weak types (control-flow results and carries are strongly typed).
Array strong(const Array& value, CallSite site);
void make_strong(std::vector<Array>& values, CallSite site);
AbstractValue strong_type(AbstractValue aval);

// Branches that each take every branch's captured values (branch 0's first) before the
// shared arguments, as cond's operand list needs.
struct JoinedBranches {
  std::vector<ProgramRef> branches;
  std::vector<Array> consts;
};
JoinedBranches join_branches(const std::vector<ClosedProgram>& closed);

std::vector<AbstractValue> input_types(const Program& program);
std::vector<AbstractValue> types_of(std::span<const Array> values);

// ----- batching -------------------------------------------------------------------------
// Which outputs of `program` differ between examples when the inputs flagged in
// `batched` do (any batched operand makes every result of an equation batched: a safe
// over-approximation).
std::vector<bool> batched_outputs(const Program& program, const std::vector<bool>& batched);

// Runs `program` on values whose batch (of `size`) is on axis 0 where `batched` says so;
// outputs flagged in `force` come back batched on axis 0 (broadcast when they do not
// differ), the others unbatched. Written with ops and vmap, so it traces.
std::vector<Array> run_batched(const Program& program, std::span<const Array> values,
                               const std::vector<bool>& batched, const std::vector<bool>& force,
                               int64_t size, CallSite site);

// `program` batched as run_batched runs it, traced into a closed program whose batched
// inputs have a leading axis of `size`.
ClosedProgram batch_program(const Program& program, const std::vector<bool>& batched,
                            const std::vector<bool>& force, int64_t size, CallSite site);

// `aval` with a leading batch axis.
AbstractValue with_batch(AbstractValue aval, int64_t size);

}  // namespace kiln::control_flow
