// Reverse-mode differentiation of flat functions (see include/kiln/transforms.h).
//
// vjp_flat traces the function into a Program, evaluates it forward on the primal values
// under the current interpreter (keeping every intermediate value), and returns a pullback
// that walks the equations backwards calling each primitive's VJP rule. The rules are
// written with ordinary ops, so inside an enclosing trace the backward pass is itself
// traced: grad(grad(f)) and jit(grad(f)) compose.
#include <fmt/format.h>

#include "base/check.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/bind.h"
#include "prims/ids/shape.h"
#include "transforms/eval.h"
#include "transforms/trace.h"

namespace kiln {
namespace detail {
namespace {

// Marks the variables that depend on a differentiated input through float values.
std::vector<bool> active_vars(const Program& program, const std::vector<bool>& differentiable) {
  std::vector<bool> active(program.num_vars(), false);
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    VarId var = program.inputs[i];
    active[static_cast<size_t>(var)] = differentiable[i] && is_floating(program.aval(var).dtype);
  }
  for (const Equation& equation : program.equations) {
    // Nothing flows through stop_gradient, so what it produces does not depend on the
    // differentiated inputs (and a non-differentiable primitive after it is fine).
    if (equation.prim == prim::stop_gradient) continue;
    bool any = false;
    for (VarId var : equation.inputs) any = any || active[static_cast<size_t>(var)];
    if (!any) continue;
    for (VarId var : equation.outputs) {
      active[static_cast<size_t>(var)] = is_floating(program.aval(var).dtype);
    }
  }
  return active;
}

void accumulate(Array& slot, const Array& cotangent, CallSite site) {
  slot = slot.defined() ? add(slot, cotangent, site) : cotangent;
}

}  // namespace

void check_cotangent_type(const Array& cotangent, const AbstractValue& output, size_t index,
                          CallSite site) {
  if (cotangent.shape() != output.shape || cotangent.dtype() != output.dtype) {
    fail(site,
         fmt::format("vjp: the cotangent for output {} is {}, but the output is {}", index,
                     cotangent.aval().to_string(), output.to_string()),
         "a cotangent has the shape and dtype of the output it belongs to");
  }
}

Array zeros_cotangent(const Array& leaf, CallSite site) {
  return kiln::zeros_like(leaf, site);
}

Array unit_cotangent(const Array& output, CallSite site) {
  return kiln::ones_like(output, site);
}

void fail_structure_mismatch(std::string_view what, std::string_view role, const std::string& found,
                             std::string_view expected_role, const std::string& expected,
                             CallSite site) {
  fail(site,
       fmt::format("{}: the {} has structure {}, but the {} has structure {}", what, role, found,
                   expected_role, expected),
       "structures list dict keys and list lengths; '*' is one array");
}

void check_scalar_output(const Array& output, std::string_view what, CallSite site) {
  if (!output.defined()) {
    fail(site, fmt::format("{}: the function must return a single scalar Array", what),
         "to differentiate a function with several outputs, use vjp; for (loss, aux) use "
         "value_and_grad(f, kiln::HasAux{})");
  }
  if (output.rank() != 0 || !is_floating(output.dtype())) {
    fail(site,
         fmt::format("{}: the function must return a scalar floating-point Array, got {}", what,
                     output.aval().to_string()),
         output.rank() != 0 ? "reduce the output first (e.g. sum or mean), or use vjp for "
                              "non-scalar outputs"
                            : "compute the loss in a floating-point dtype");
  }
}

void check_differentiable_leaves(std::span<const Array> leaves, std::string_view what,
                                 CallSite site) {
  for (const Array& leaf : leaves) {
    if (!is_floating(leaf.dtype())) {
      fail(site,
           fmt::format("{}: cannot differentiate with respect to {}, which is not a "
                       "floating-point array",
                       what, leaf.aval().to_string()),
           "differentiate with respect to float arguments only; pass integer data (labels, "
           "indices) as another argument");
    }
  }
}

FlatVjp vjp_flat(const FlatFunction& fn, std::span<const Array> inputs,
                 const std::vector<bool>& differentiable, CallSite site) {
  KILN_CHECK(differentiable.size() == inputs.size(), "one flag per input expected");
  std::vector<AbstractValue> types;
  for (const Array& input : inputs) types.push_back(input.aval());
  auto program = std::make_shared<Program>(*trace_flat(fn, types, site).program);
  auto env = std::make_shared<std::vector<Array>>(eval_program_env(*program, inputs, site));
  std::vector<Array> outputs;
  for (VarId var : program->outputs) outputs.push_back((*env)[static_cast<size_t>(var)]);
  auto active = std::make_shared<std::vector<bool>>(active_vars(*program, differentiable));

  auto pullback = [program, env, active, differentiable,
                   site](std::span<const Array> output_cotangents) {
    const Program& p = *program;
    KILN_CHECK(output_cotangents.size() == p.outputs.size(), "{} cotangents for {} outputs",
               output_cotangents.size(), p.outputs.size());
    std::vector<Array> cotangent(p.num_vars());
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      const Array& ct = output_cotangents[i];
      if (!ct.defined()) continue;
      check_cotangent_type(ct, p.aval(p.outputs[i]), i, site);
      accumulate(cotangent[static_cast<size_t>(p.outputs[i])], ct, site);
    }
    std::vector<Array> in_values, out_values, out_cts;
    std::unique_ptr<bool[]> wanted;
    for (auto it = p.equations.rbegin(); it != p.equations.rend(); ++it) {
      const Equation& equation = *it;
      bool has_cotangent = false;
      for (VarId var : equation.outputs) {
        has_cotangent = has_cotangent || cotangent[static_cast<size_t>(var)].defined();
      }
      if (!has_cotangent) continue;
      wanted.reset(new bool[equation.inputs.size()]);
      bool any_wanted = false;
      for (size_t k = 0; k < equation.inputs.size(); ++k) {
        wanted[k] = (*active)[static_cast<size_t>(equation.inputs[k])];
        any_wanted = any_wanted || wanted[k];
      }
      if (!any_wanted) continue;
      const PrimDef& prim = prim_def(equation.prim);
      if (prim.vjp == nullptr) {
        fail(equation.site,
             fmt::format("cannot differentiate through {}: it {}", prim.name,
                         prim.has_flag(kNotDifferentiable) ? "is not differentiable"
                                                           : "has no VJP rule yet"),
             prim.has_flag(kNotDifferentiable) ? not_differentiable_hint(prim) : "");
      }
      in_values.clear();
      out_values.clear();
      out_cts.clear();
      for (VarId var : equation.inputs) in_values.push_back((*env)[static_cast<size_t>(var)]);
      for (VarId var : equation.outputs) {
        out_values.push_back((*env)[static_cast<size_t>(var)]);
        out_cts.push_back(cotangent[static_cast<size_t>(var)]);
      }
      ScopeOverride scope(equation.scope.empty() ? std::string("grad") : "grad/" + equation.scope);
      std::vector<Array> in_cts =
          prim.vjp(VjpArgs{in_values, out_values, out_cts, equation.params, equation.site,
                           std::span<const bool>(wanted.get(), equation.inputs.size())});
      KILN_CHECK(in_cts.size() == equation.inputs.size(),
                 "{}'s VJP returned {} cotangents for {} "
                 "operands",
                 prim.name, in_cts.size(), equation.inputs.size());
      for (size_t k = 0; k < equation.inputs.size(); ++k) {
        if (!wanted[k] || !in_cts[k].defined()) continue;
        const AbstractValue& operand = p.aval(equation.inputs[k]);
        KILN_CHECK(in_cts[k].shape() == operand.shape && in_cts[k].dtype() == operand.dtype,
                   "{}'s VJP gave a {} cotangent for a {} operand", prim.name,
                   in_cts[k].aval().to_string(), operand.to_string());
        accumulate(cotangent[static_cast<size_t>(equation.inputs[k])], in_cts[k], equation.site);
      }
    }
    // Differentiated inputs that nothing reached get zeros; the others get nothing, so
    // that no unused zeros are computed (or traced) for them.
    std::vector<Array> input_cotangents;
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      Array ct = cotangent[static_cast<size_t>(p.inputs[i])];
      if (!ct.defined() && differentiable[i]) {
        ct = zeros_like((*env)[static_cast<size_t>(p.inputs[i])], site);
      }
      input_cotangents.push_back(std::move(ct));
    }
    return input_cotangents;
  };
  return FlatVjp{std::move(outputs), std::move(pullback)};
}

TracedProgram trace_flat(const FlatFunction& fn, std::span<const AbstractValue> input_types,
                         CallSite site) {
  TraceContext trace;
  std::vector<Array> tracers;
  for (const AbstractValue& type : input_types) tracers.push_back(trace.new_input(type));
  std::vector<Array> outputs;
  {
    InterpreterScope scope(trace);
    outputs = fn(tracers);
  }
  return TracedProgram{std::make_shared<const Program>(trace.finish(outputs, site))};
}

}  // namespace detail

Array stop_gradient(const Array& x, CallSite site) {
  return bind1(prim::stop_gradient, {x}, NoParams{}, site);
}

}  // namespace kiln
