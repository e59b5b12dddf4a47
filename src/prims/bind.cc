// bind(): registry checks, abstract evaluation, then the current interpreter.
#include "prims/bind.h"
#include "base/check.h"

#include <fmt/format.h>

namespace kiln {
namespace {
thread_local Interpreter* current = nullptr;
}  // namespace

Interpreter& current_interpreter() {
  return current != nullptr ? *current : eager_interpreter();
}

InterpreterScope::InterpreterScope(Interpreter& interpreter) : previous_(current) {
  current = &interpreter;
}
InterpreterScope::~InterpreterScope() {
  current = previous_;
}

namespace {

// A result whose byte count overflows int64 (a shape like [3, 3, 1, 2^62] that every rule
// accepts axis by axis) would be allocated with a wrapped size and then written out of
// bounds by its kernel: it is refused here, for every primitive, before an interpreter
// queues anything.
void check_result_sizes(std::span<const AbstractValue> outputs, const RuleContext& context) {
  for (const AbstractValue& out : outputs) {
    bool empty = false;
    for (int64_t axis = 0; axis < out.shape.rank(); ++axis) empty = empty || out.shape[axis] == 0;
    if (empty) continue;
    int64_t bytes = dtype_size(out.dtype);
    for (int64_t axis = 0; axis < out.shape.rank(); ++axis) {
      if (__builtin_mul_overflow(bytes, out.shape[axis], &bytes)) {
        context.fail(fmt::format("the result would be {}, more than 2^63 bytes", out.to_string()),
                     "a size given to the op (a layer's features, a kernel or window size, a "
                     "batch size) is far too large");
      }
    }
  }
}

}  // namespace

std::vector<AbstractValue> abstract_eval(PrimId id, std::span<const AbstractValue> inputs,
                                         const Params& params, CallSite site) {
  const PrimDef& prim = prim_def(id);
  RuleContext context{prim, site};
  if (prim.arity >= 0 && static_cast<int>(inputs.size()) != prim.arity) {
    context.fail(fmt::format("expects {} operand(s), got {}", prim.arity, inputs.size()));
  }
  KILN_CHECK(params.index() == prim.params_index, "{} bound with the wrong params kind", prim.name);
  KILN_CHECK(prim.abstract_eval != nullptr, "{} has no abstract_eval rule", prim.name);
  std::vector<AbstractValue> outputs = prim.abstract_eval(inputs, params, context);
  check_result_sizes(outputs, context);
  return outputs;
}

std::vector<Array> bind(PrimId id, std::span<const Array> inputs, const Params& params,
                        CallSite site) {
  std::vector<AbstractValue> in_avals;
  in_avals.reserve(inputs.size());
  for (const Array& input : inputs) {
    if (!input.defined()) {
      fail(site,
           fmt::format("{}: operand {} is an empty Array (default-constructed)", prim_name(id),
                       in_avals.size()),
           "initialise the Array from an op or from_host before using it");
    }
    in_avals.push_back(input.aval());
  }
  std::vector<AbstractValue> out_avals = abstract_eval(id, in_avals, params, site);
  return current_interpreter().apply(prim_def(id), inputs, params, std::move(out_avals), site);
}

Array bind1(PrimId id, std::span<const Array> inputs, const Params& params, CallSite site) {
  std::vector<Array> outputs = bind(id, inputs, params, site);
  KILN_CHECK(outputs.size() == 1, "{} returned {} results", prim_name(id), outputs.size());
  return std::move(outputs[0]);
}

}  // namespace kiln
