// Forward-mode differentiation of flat functions (see include/kiln/jvp.h).
//
// linearize_flat traces the function into a Program and evaluates it on the primal values
// under the current interpreter, keeping every intermediate value, as vjp_flat does. The
// push-forward then walks the equations in order, calling each primitive's JVP rule on the
// kept primal values and the tangents that reach it. The rules are written with ordinary
// ops, so the walk itself traces and batches: jit(jvp(f)), jacfwd (a vmap of the walk) and
// hessian (jacfwd of jacrev) compose.
#include "transforms/forward.h"

#include <memory>

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/grad.h"
#include "kiln/jvp.h"
#include "kiln/ops.h"
#include "kiln/tracing.h"
#include "prims/registry.h"
#include "transforms/eval.h"
#include "transforms/trace.h"

namespace kiln::detail {
namespace {

[[noreturn]] void fail_not_differentiable(const PrimDef& prim, CallSite site) {
  fail(site,
       fmt::format(
           "cannot differentiate through {} in forward mode: it {}", prim.name,
           prim.has_flag(kNotDifferentiable) ? "is not differentiable" : "has no JVP rule yet"),
       prim.has_flag(kNotDifferentiable) ? not_differentiable_hint(prim) : "");
}

// Tangents of the outputs, pushed through the equations from `input_tangents`, with the
// primal value of every variable in `env`.
std::vector<Array> push_forward(const Program& program, const std::vector<Array>& env,
                                std::span<const Array> input_tangents) {
  KILN_CHECK(input_tangents.size() == program.inputs.size(), "{} tangents for {} inputs",
             input_tangents.size(), program.inputs.size());
  std::vector<Array> tangent(program.num_vars());
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    VarId var = program.inputs[i];
    if (input_tangents[i].defined() && is_floating(program.aval(var).dtype)) {
      tangent[static_cast<size_t>(var)] = input_tangents[i];
    }
  }
  std::vector<Array> in_values, out_values, in_tangents;
  for (const Equation& equation : program.equations) {
    in_tangents.clear();
    bool any = false;
    for (VarId var : equation.inputs) {
      in_tangents.push_back(tangent[static_cast<size_t>(var)]);
      any = any || in_tangents.back().defined();
    }
    if (!any) continue;
    const PrimDef& prim = prim_def(equation.prim);
    if (prim.jvp == nullptr) {
      // A primitive with no derivative still passes through where its results are not
      // floating point (a comparison, argmax, random bits): they carry no tangent.
      for (VarId var : equation.outputs) {
        if (is_floating(program.aval(var).dtype)) fail_not_differentiable(prim, equation.site);
      }
      continue;
    }
    in_values.clear();
    out_values.clear();
    for (VarId var : equation.inputs) in_values.push_back(env[static_cast<size_t>(var)]);
    for (VarId var : equation.outputs) out_values.push_back(env[static_cast<size_t>(var)]);
    ScopeOverride scope(equation.scope.empty() ? std::string("jvp") : "jvp/" + equation.scope);
    std::vector<Array> out_tangents = prim.jvp(
        JvpArgs{equation.prim, in_values, out_values, in_tangents, equation.params, equation.site});
    KILN_CHECK(out_tangents.size() == equation.outputs.size(),
               "{}'s JVP returned {} tangents for {} results", prim.name, out_tangents.size(),
               equation.outputs.size());
    for (size_t k = 0; k < equation.outputs.size(); ++k) {
      if (!out_tangents[k].defined()) continue;
      const AbstractValue& result = program.aval(equation.outputs[k]);
      KILN_CHECK(out_tangents[k].shape() == result.shape && out_tangents[k].dtype() == result.dtype,
                 "{}'s JVP gave a {} tangent for a {} result", prim.name,
                 out_tangents[k].aval().to_string(), result.to_string());
      tangent[static_cast<size_t>(equation.outputs[k])] = std::move(out_tangents[k]);
    }
  }
  std::vector<Array> output_tangents;
  for (VarId var : program.outputs) output_tangents.push_back(tangent[static_cast<size_t>(var)]);
  return output_tangents;
}

std::vector<Array> outputs_of(const Program& program, const std::vector<Array>& env) {
  std::vector<Array> outputs;
  for (VarId var : program.outputs) outputs.push_back(env[static_cast<size_t>(var)]);
  return outputs;
}

}  // namespace

ProgramJvp jvp_program(const Program& program, std::span<const Array> inputs,
                       std::span<const Array> tangents, CallSite site) {
  std::vector<Array> env = eval_program_env(program, inputs, site);
  std::vector<Array> out_tangents = push_forward(program, env, tangents);
  return ProgramJvp{outputs_of(program, env), std::move(out_tangents)};
}

FlatLinearized linearize_flat(const FlatFunction& fn, std::span<const Array> inputs,
                              CallSite site) {
  std::vector<AbstractValue> types;
  for (const Array& input : inputs) types.push_back(input.aval());
  std::shared_ptr<const Program> traced = trace_flat(fn, types, site).program;
  auto env = std::make_shared<std::vector<Array>>(eval_program_env(*traced, inputs, site));
  std::vector<Array> outputs = outputs_of(*traced, *env);
  auto forward = [traced, env](std::span<const Array> input_tangents) {
    return push_forward(*traced, *env, input_tangents);
  };
  return FlatLinearized{std::move(outputs), std::move(forward)};
}

std::vector<Array> checked_tangents(std::span<const Array> primals, std::string primal_structure,
                                    std::span<const Array> tangents, std::string tangent_structure,
                                    std::string_view what, CallSite site) {
  if (primal_structure != tangent_structure || primals.size() != tangents.size()) {
    fail_structure_mismatch(what, "tangent", tangent_structure, "primal", primal_structure, site);
  }
  std::vector<Array> checked(primals.size());
  for (size_t i = 0; i < primals.size(); ++i) {
    if (!is_floating(primals[i].dtype())) continue;
    const Array& tangent = tangents[i];
    if (!tangent.defined()) continue;
    if (tangent.shape() != primals[i].shape() || tangent.dtype() != primals[i].dtype()) {
      fail(site,
           fmt::format("{}: the tangent for leaf {} of the arguments is {}, but the primal is {}",
                       what, i, tangent.aval().to_string(), primals[i].aval().to_string()),
           "a tangent has the shape and dtype of its primal (astype the tangent to the "
           "primal's dtype)");
    }
    checked[i] = tangent;
  }
  return checked;
}

std::vector<Array> with_zero_tangents(std::vector<Array> tangents, std::span<const Array> outputs,
                                      CallSite site) {
  for (size_t k = 0; k < tangents.size(); ++k) {
    if (!tangents[k].defined()) tangents[k] = zeros_like(outputs[k], site);
  }
  return tangents;
}

}  // namespace kiln::detail
