// find_nonfinite (kiln/nonfinite.h): the traced program run as eval_program runs it, with
// every floating-point value checked on the host before the next equation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/program.h"
#include "kiln/nonfinite.h"
#include "kiln/ops.h"
#include "kiln/tracing.h"
#include "prims/bind.h"
#include "prims/registry.h"
#include "transforms/eval.h"
#include "transforms/trace.h"

namespace kiln {
namespace {

struct Census {
  int64_t nan = 0;
  int64_t inf = 0;
  double min = std::numeric_limits<double>::infinity();  // over the finite elements
  double max = -std::numeric_limits<double>::infinity();
  bool clean() const { return nan == 0 && inf == 0; }
};

bool checked(const Array& value) {
  return value.defined() && is_floating(value.dtype()) && value.size() > 0;
}

Census census(const Array& value) {
  Census c;
  if (!checked(value)) return c;
  HostArray host = astype(value, DType::f64).to_host();
  for (double x : host.as<double>()) {
    if (std::isnan(x)) {
      ++c.nan;
    } else if (std::isinf(x)) {
      ++c.inf;
    } else {
      c.min = std::min(c.min, x);
      c.max = std::max(c.max, x);
    }
  }
  return c;
}

std::string operand_text(const Array& value, const Census& c, bool constant) {
  std::string text = value.aval().to_string();
  if (checked(value)) {
    text += c.min <= c.max ? fmt::format(" in [{:g}, {:g}]", c.min, c.max)
                           : std::string(" with no finite element");
    if (!c.clean()) text += fmt::format(", {} NaN, {} infinite", c.nan, c.inf);
  }
  if (constant) text += " (a constant of the program)";
  return text;
}

void record(NonFiniteOrigin& origin, const Array& value, const Census& c) {
  origin.value = value.aval().to_string();
  origin.nan_count = c.nan;
  origin.inf_count = c.inf;
}

}  // namespace

std::string NonFiniteOrigin::to_string() const {
  std::string counts =
      fmt::format("{} has {} NaN and {} infinite element(s)", value, nan_count, inf_count);
  switch (kind) {
    case Kind::kNone:
      return fmt::format(
          "no NaN or infinity: every argument and every result of the {} "
          "equation(s) is finite",
          equations);
    case Kind::kArgument:
      return fmt::format("argument leaf {} already: {}", index, counts);
    case Kind::kEquation:
      break;
  }
  std::string text = fmt::format("equation {} of {}, {}", index, equations, primitive);
  if (site.known()) text += fmt::format(" at {}", site.to_string());
  if (!scope.empty()) text += fmt::format(" (scope \"{}\")", scope);
  text += fmt::format(": result {} {}, {}\n", result, counts, how);
  for (size_t i = 0; i < operands.size(); ++i) {
    text += fmt::format("  operand {}: {}\n", i, operands[i]);
  }
  return text;
}

namespace detail {

NonFiniteOrigin find_nonfinite_flat(const FlatFunction& fn, std::span<const Array> inputs,
                                    CallSite site) {
  if (&current_interpreter() != &eager_interpreter()) {
    fail(site, "find_nonfinite runs the function one primitive at a time on real values",
         "call it outside jit, grad, vmap and make_program, with the arguments that gave the "
         "NaN");
  }
  std::vector<AbstractValue> types;
  types.reserve(inputs.size());
  for (const Array& input : inputs) types.push_back(input.aval());
  TracedProgram traced = trace_flat(fn, types, site);
  const Program& program = *traced.program;

  NonFiniteOrigin origin;
  origin.equations = static_cast<int64_t>(program.equations.size());
  std::vector<Array> env(program.num_vars());
  std::vector<Census> seen(program.num_vars());
  std::vector<bool> is_constant(program.num_vars(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    Census c = census(inputs[i]);
    if (!c.clean()) {
      origin.kind = NonFiniteOrigin::Kind::kArgument;
      origin.index = static_cast<int64_t>(i);
      record(origin, inputs[i], c);
      return origin;
    }
    env[static_cast<size_t>(program.inputs[i])] = inputs[i];
    seen[static_cast<size_t>(program.inputs[i])] = c;
  }
  // Constants may hold infinities and NaNs on purpose (masks, a max's starting value).
  for (size_t i = 0; i < program.constants.size(); ++i) {
    size_t var = static_cast<size_t>(program.constants[i]);
    env[var] = program.constant_values[i];
    seen[var] = census(program.constant_values[i]);
    is_constant[var] = true;
  }
  // The first equation that only carried a non-finite value, in case none made one.
  std::optional<NonFiniteOrigin> carried;
  std::vector<Array> operands;
  for (size_t e = 0; e < program.equations.size(); ++e) {
    const Equation& equation = program.equations[e];
    operands.clear();
    bool operand_nan = false, operand_inf = false;
    for (VarId var : equation.inputs) {
      operands.push_back(env[static_cast<size_t>(var)]);
      operand_nan |= seen[static_cast<size_t>(var)].nan > 0;
      operand_inf |= seen[static_cast<size_t>(var)].inf > 0;
    }
    std::vector<Array> results;
    {
      ScopeOverride scope(equation.scope);
      results = bind(equation.prim, operands, equation.params, equation.site);
    }
    for (size_t r = 0; r < results.size(); ++r) {
      Census c = census(results[r]);
      size_t out = static_cast<size_t>(equation.outputs[r]);
      env[out] = std::move(results[r]);
      seen[out] = c;
      if (c.clean()) continue;
      // A NaN where no operand had one, or an infinity from operands without either.
      bool made = (c.nan > 0 && !operand_nan) || (c.inf > 0 && !operand_nan && !operand_inf);
      if (!made && carried) continue;
      NonFiniteOrigin found = origin;
      found.kind = NonFiniteOrigin::Kind::kEquation;
      found.index = static_cast<int64_t>(e);
      found.primitive = std::string(prim_name(equation.prim));
      found.scope = equation.scope;
      found.site = equation.site;
      found.result = static_cast<int64_t>(r);
      found.made = made;
      found.how = !made         ? "carried from an operand that held one (no equation made one)"
                  : operand_inf ? "a NaN from operands with infinities"
                                : "from finite operands";
      record(found, env[out], c);
      for (size_t i = 0; i < equation.inputs.size(); ++i) {
        size_t var = static_cast<size_t>(equation.inputs[i]);
        found.operands.push_back(operand_text(env[var], seen[var], is_constant[var]));
      }
      if (made) return found;
      carried = std::move(found);
    }
  }
  if (carried) return *carried;
  return origin;
}

}  // namespace detail
}  // namespace kiln
