// TraceContext and name scopes (see trace.h).
#include "transforms/trace.h"

#include <fmt/format.h>

#include "kiln/transforms.h"

namespace kiln {
namespace {
thread_local std::string scope_stack;
}  // namespace

const std::string& current_scope() {
  return scope_stack;
}

ScopeOverride::ScopeOverride(std::string scope) : previous_(std::move(scope_stack)) {
  scope_stack = std::move(scope);
}
ScopeOverride::~ScopeOverride() {
  scope_stack = std::move(previous_);
}

NamedScope::NamedScope(std::string_view name) : previous_length_(scope_stack.size()) {
  if (!scope_stack.empty()) scope_stack += '/';
  scope_stack += name;
}
NamedScope::~NamedScope() {
  scope_stack.resize(previous_length_);
}

void fail_escaped_value(const AbstractValue& aval, CallSite site) {
  fail(site,
       fmt::format("a traced value ({}) is used after the transformation that made it has "
                   "finished",
                   aval.to_string()),
       "a value computed inside a transformed function (grad, vmap, make_program...) must be "
       "returned from it, not stored and used later");
}

TraceContext::TraceContext() : self_(std::make_shared<Interpreter*>(this)) {}

TraceContext::~TraceContext() {
  *self_ = nullptr;
}

Array TraceContext::new_input(const AbstractValue& aval) {
  VarId var = builder_.add_input(aval);
  return Array(std::make_shared<Tracer>(aval, self_, var));
}

VarId TraceContext::var_of(const Array& value, CallSite site) {
  if (const auto* own = dynamic_cast<const TransformValue*>(value.impl())) {
    if (own->owner() == nullptr) fail_escaped_value(value.aval(), site);
    if (own->owner() == this) return static_cast<const Tracer*>(own)->var();
    // A value of an enclosing transformation: a constant of this trace.
  }
  auto found = constant_vars_.find(value.impl());
  if (found != constant_vars_.end()) return found->second;
  VarId var = builder_.add_constant(value);
  constant_vars_.emplace(value.impl(), var);
  return var;
}

std::vector<Array> TraceContext::apply(const PrimDef& prim, std::span<const Array> inputs,
                                       const Params& params, std::vector<AbstractValue> out_avals,
                                       CallSite site) {
  std::vector<VarId> in_vars;
  in_vars.reserve(inputs.size());
  for (const Array& input : inputs) in_vars.push_back(var_of(input, site));
  std::vector<VarId> out_vars =
      builder_.add_equation(prim.id, std::move(in_vars), params, site, current_scope());
  std::vector<Array> outputs;
  outputs.reserve(out_vars.size());
  for (size_t i = 0; i < out_vars.size(); ++i) {
    outputs.emplace_back(std::make_shared<Tracer>(std::move(out_avals[i]), self_, out_vars[i]));
  }
  return outputs;
}

Program TraceContext::finish(std::span<const Array> outputs, CallSite site) {
  std::vector<VarId> out_vars;
  for (const Array& output : outputs) out_vars.push_back(var_of(output, site));
  builder_.set_outputs(std::move(out_vars));
  *self_ = nullptr;
  return builder_.take();
}

}  // namespace kiln
