// kiln::checkpoint (kiln/checkpoint.h): rematerialization built on the custom-function
// machinery of custom_vjp.cc.
//
// A call traces f into a program P and closure-converts it (values f captured become extra
// operands, so gradients reach them). One custom function per distinct P (keyed by P's
// text) runs it: the forward evaluates P and returns f's results with, as residuals, the
// operands and the values the policy saves, nothing else; the backward passes those
// residuals through an optimization_barrier (so the jit passes cannot merge the
// recomputation with the original forward), replays P on them with each saved equation
// replaced by its saved value, and pulls the cotangents back through the replay. A saved
// value still differentiates as the equation that made it (transforms/saved_values.h).
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "ir/printer.h"
#include "kiln/checkpoint.h"
#include "prims/bind.h"
#include "prims/ids/contract.h"
#include "prims/ids/custom.h"
#include "transforms/eval.h"
#include "transforms/saved_values.h"
#include "transforms/trace.h"

namespace kiln {
namespace {

void check_mark_name(std::string_view name, std::string_view what, CallSite site) {
  if (name.empty() || name.find_first_of("\"\\\n") != std::string_view::npos) {
    fail(site,
         fmt::format("{}: a checkpoint name must be non-empty, without quotes, backslashes or "
                     "line breaks, got \"{}\"",
                     what, name),
         "names are printed quoted in program text; use plain words like \"attn_out\"");
  }
}

// A closure-converted program of f for one signature, and how to run it under remat.
struct CheckpointFunction {
  std::shared_ptr<const Program> program;  // inputs: f's argument leaves, then captured values
  std::vector<bool> differentiable;        // per operand: floats that may carry a gradient
  std::vector<int64_t> saved_ids;          // per equation: its saved-value function, or -1
  CallSite site;
};

// The values the policy keeps: the results of these equations, in program order.
std::vector<bool> saved_equations(const Program& program, const CheckpointPolicy& policy,
                                  CallSite site) {
  std::vector<bool> saved(program.equations.size(), false);
  if (policy.kind == CheckpointPolicy::Kind::kSaveNothing) return saved;
  std::set<std::string> marks;  // sorted, for a deterministic error message
  for (size_t i = 0; i < program.equations.size(); ++i) {
    const Equation& equation = program.equations[i];
    if (policy.kind == CheckpointPolicy::Kind::kSaveDotOutputs) {
      saved[i] = equation.prim == prim::dot_general;
    } else if (equation.prim == prim::checkpoint_name) {
      const std::string& name = std::get<CheckpointNameParams>(equation.params).name;
      marks.insert(name);
      for (const std::string& wanted : policy.names) saved[i] = saved[i] || wanted == name;
    }
  }
  if (policy.kind == CheckpointPolicy::Kind::kSaveNamed) {
    for (const std::string& wanted : policy.names) {
      if (marks.count(wanted) != 0) continue;
      std::string found;
      for (const std::string& mark : marks) found += (found.empty() ? "\"" : ", \"") + mark + "\"";
      fail(site,
           fmt::format("checkpoint: the policy {} names \"{}\", but the function marks no value "
                       "with that name (it marks {})",
                       policy.to_string(), wanted, found.empty() ? "none" : found),
           fmt::format("mark the value to keep with kiln::checkpoint_name(x, \"{}\") inside the "
                       "checkpointed function, or remove the name from save_named",
                       wanted));
    }
  }
  return saved;
}

detail::CustomResult run_forward(const CheckpointFunction& fn, std::span<const Array> operands) {
  const Program& program = *fn.program;
  std::vector<Array> env = eval_program_env(program, operands, fn.site);
  detail::CustomResult result;
  for (VarId var : program.outputs) result.outputs.push_back(env[static_cast<size_t>(var)]);
  result.residuals.assign(operands.begin(), operands.end());
  for (Array& value : detail::saved_results(program, fn.saved_ids, env)) {
    result.residuals.push_back(std::move(value));
  }
  return result;
}

std::vector<Array> run_backward(const CheckpointFunction& fn, std::span<const Array> residuals,
                                std::span<const Array> cts) {
  size_t num_operands = fn.program->inputs.size();
  std::vector<Array> kept = residuals.empty()
                                ? std::vector<Array>()
                                : bind(prim::optimization_barrier, residuals, NoParams{}, fn.site);
  std::vector<Array> saved(kept.begin() + static_cast<std::ptrdiff_t>(num_operands), kept.end());
  detail::FlatFunction recompute = [&fn, saved](std::span<const Array> operands) {
    return detail::replay_with_saved(*fn.program, fn.saved_ids, operands, saved);
  };
  detail::FlatVjp vjp = detail::vjp_flat(
      recompute, std::span<const Array>(kept.data(), num_operands), fn.differentiable, fn.site);
  return vjp.pullback(cts);
}

}  // namespace

std::string CheckpointPolicy::to_string() const {
  switch (kind) {
    case Kind::kSaveNothing:
      return "save_nothing";
    case Kind::kSaveDotOutputs:
      return "save_dot_outputs";
    case Kind::kSaveNamed: {
      std::string text;
      for (const std::string& name : names) text += (text.empty() ? "" : ",") + name;
      return "save_named(" + text + ")";
    }
  }
  return "?";
}

CheckpointPolicy save_named(std::vector<std::string> names, CallSite site) {
  for (const std::string& name : names) check_mark_name(name, "save_named", site);
  return CheckpointPolicy{CheckpointPolicy::Kind::kSaveNamed, std::move(names)};
}

Array checkpoint_name(const Array& x, std::string_view name, CallSite site) {
  check_mark_name(name, "checkpoint_name", site);
  return bind1(prim::checkpoint_name, {x}, CheckpointNameParams{std::string(name)}, site);
}

namespace detail {

// The custom function of each checkpointed program, process-wide: by the policy, the
// program's text and which operands are differentiable, which together determine it. So a
// checkpoint(f) written inline in a loss (a new object each step) reuses the function
// registered at the first step instead of registering one per step. Only looked up, never
// iterated.
struct CheckpointRegistry {
  std::mutex mutex;
  std::map<std::string, int64_t> ids;
};

CheckpointRegistry& checkpoint_registry() {
  static CheckpointRegistry* instance = new CheckpointRegistry;  // ids outlive everything
  return *instance;
}

std::vector<Array> checkpoint_flat(const CheckpointPolicy& policy, const FlatFunction& fn,
                                   std::span<const Array> inputs, CallSite site) {
  // Trace f: its program for these argument types (and these static arguments).
  std::vector<AbstractValue> types;
  for (const Array& input : inputs) types.push_back(input.aval());
  auto program = std::make_shared<Program>(*trace_flat(fn, types, site).program);
  // Closure conversion: captured values (concrete arrays, or values of an enclosing
  // transformation, which a gradient may need to reach) become operands.
  std::vector<Array> operands(inputs.begin(), inputs.end());
  std::vector<bool> differentiable;
  for (const Array& input : inputs) differentiable.push_back(is_floating(input.dtype()));
  for (const Array& value : program->constant_values) {
    operands.push_back(value);
    // A concrete array cannot depend on anything being differentiated.
    bool traced = dynamic_cast<const TransformValue*>(value.impl()) != nullptr;
    differentiable.push_back(traced && is_floating(value.dtype()));
  }
  program->inputs.insert(program->inputs.end(), program->constants.begin(),
                         program->constants.end());
  program->constants.clear();
  program->constant_values.clear();

  std::string key = policy.to_string() + "\n";
  for (bool d : differentiable) key += d ? '1' : '0';
  key += "\n" + print_program(*program, PrintOptions{.show_scopes = true});
  CheckpointRegistry& known = checkpoint_registry();
  int64_t id;
  {
    std::lock_guard lock(known.mutex);
    auto found = known.ids.find(key);
    if (found != known.ids.end()) {
      id = found->second;
    } else {
      std::vector<bool> saved = saved_equations(*program, policy, site);
      auto function = std::make_shared<CheckpointFunction>();
      function->program = program;
      function->differentiable = differentiable;
      function->site = site;
      function->saved_ids = saved_value_functions(program, saved);
      std::shared_ptr<const CheckpointFunction> shared = function;
      id = register_custom_function(
          fmt::format("checkpoint[{}]", policy.to_string()),
          [shared](std::span<const Array> in) { return run_forward(*shared, in); },
          [shared](std::span<const Array> residuals, std::span<const Array> cts) {
            return run_backward(*shared, residuals, cts);
          },
          ForwardMode::kThroughForward);
      known.ids.emplace(std::move(key), id);
    }
  }
  return call_custom_function(id, operands, site);
}

}  // namespace detail
}  // namespace kiln
