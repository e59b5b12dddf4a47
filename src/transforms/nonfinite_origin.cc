// find_nonfinite (kiln/nonfinite.h): the traced program run as eval_program runs it, with
// every floating-point value checked on the host before the next equation.
#include <algorithm>
#include <cmath>
#include <limits>
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

std::string operand_text(const Array& value) {
  std::string type = value.aval().to_string();
  if (!checked(value)) return type;
  Census c = census(value);
  std::string range = c.min <= c.max ? fmt::format("in [{:g}, {:g}]", c.min, c.max)
                                     : std::string("with no finite element");
  if (c.clean()) return fmt::format("{} {}", type, range);
  return fmt::format("{} {}, {} NaN, {} infinite", type, range, c.nan, c.inf);
}

// Fills `origin` with the value's counts when it holds a NaN or an infinity.
bool holds_nonfinite(const Array& value, NonFiniteOrigin& origin) {
  if (!checked(value)) return false;
  Census c = census(value);
  if (c.clean()) return false;
  origin.value = value.aval().to_string();
  origin.nan_count = c.nan;
  origin.inf_count = c.inf;
  return true;
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
    case Kind::kConstant:
      return fmt::format("constant {} (a value the function closes over) already: {}", index,
                         counts);
    case Kind::kEquation:
      break;
  }
  std::string text = fmt::format("equation {} of {}, {}", index, equations, primitive);
  if (site.known()) text += fmt::format(" at {}", site.to_string());
  if (!scope.empty()) text += fmt::format(" (scope \"{}\")", scope);
  text += fmt::format(": result {} {}, from finite operands\n", result, counts);
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
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (holds_nonfinite(inputs[i], origin)) {
      origin.kind = NonFiniteOrigin::Kind::kArgument;
      origin.index = static_cast<int64_t>(i);
      return origin;
    }
  }
  for (size_t i = 0; i < program.constant_values.size(); ++i) {
    if (holds_nonfinite(program.constant_values[i], origin)) {
      origin.kind = NonFiniteOrigin::Kind::kConstant;
      origin.index = static_cast<int64_t>(i);
      return origin;
    }
  }

  std::vector<Array> env(program.num_vars());
  for (size_t i = 0; i < inputs.size(); ++i)
    env[static_cast<size_t>(program.inputs[i])] = inputs[i];
  for (size_t i = 0; i < program.constants.size(); ++i) {
    env[static_cast<size_t>(program.constants[i])] = program.constant_values[i];
  }
  std::vector<Array> operands;
  for (size_t e = 0; e < program.equations.size(); ++e) {
    const Equation& equation = program.equations[e];
    operands.clear();
    for (VarId var : equation.inputs) operands.push_back(env[static_cast<size_t>(var)]);
    std::vector<Array> results;
    {
      ScopeOverride scope(equation.scope);
      results = bind(equation.prim, operands, equation.params, equation.site);
    }
    for (size_t r = 0; r < results.size(); ++r) {
      if (!holds_nonfinite(results[r], origin)) continue;
      origin.kind = NonFiniteOrigin::Kind::kEquation;
      origin.index = static_cast<int64_t>(e);
      origin.primitive = std::string(prim_name(equation.prim));
      origin.scope = equation.scope;
      origin.site = equation.site;
      origin.result = static_cast<int64_t>(r);
      for (const Array& operand : operands) origin.operands.push_back(operand_text(operand));
      return origin;
    }
    for (size_t r = 0; r < results.size(); ++r) {
      env[static_cast<size_t>(equation.outputs[r])] = std::move(results[r]);
    }
  }
  return origin;
}

}  // namespace detail
}  // namespace kiln
