// Cost analysis of programs (kiln/cost.h, transforms/cost_analysis.h): each equation's cost
// from its primitive's rule, summed; and the cost rule of custom_vjp_call, which is the
// cost of the forward function it runs (traced on the operand types).
#include "transforms/cost_analysis.h"

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/cost.h"
#include "prims/bind.h"
#include "prims/ids/custom.h"
#include "transforms/trace.h"

namespace kiln {

Cost equation_cost(const Program& program, const Equation& equation) {
  const PrimDef& prim = prim_def(equation.prim);
  KILN_CHECK(prim.cost != nullptr, "{} has no cost rule", prim.name);
  std::vector<AbstractValue> inputs, outputs;
  inputs.reserve(equation.inputs.size());
  outputs.reserve(equation.outputs.size());
  for (VarId var : equation.inputs) inputs.push_back(program.aval(var));
  for (VarId var : equation.outputs) outputs.push_back(program.aval(var));
  return prim.cost(inputs, outputs, equation.params);
}

Cost program_cost(const Program& program) {
  Cost total;
  for (const Equation& equation : program.equations) total += equation_cost(program, equation);
  return total;
}

namespace {

// A primitive defined by ops costs what its impl rule binds: traced on tracers of the
// operand types, the impl records those binds as a program.
Cost impl_cost(PrimId id, std::span<const AbstractValue> inputs, const Params& params) {
  const PrimDef& prim = prim_def(id);
  KILN_CHECK(prim.impl != nullptr, "{} has no impl rule to cost", prim.name);
  TraceContext trace;
  std::vector<Array> tracers;
  tracers.reserve(inputs.size());
  for (const AbstractValue& aval : inputs) tracers.push_back(trace.new_input(aval));
  std::vector<Array> outputs;
  {
    InterpreterScope scope(trace);
    outputs = prim.impl(tracers, params, kUnknownSite);
  }
  return program_cost(trace.finish(outputs, kUnknownSite));
}

Cost custom_vjp_call_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue>,
                          const Params& params) {
  return impl_cost(prim::custom_vjp_call, inputs, params);
}

// 3 significant digits with an SI suffix: 1.05G, 524k, 12.
std::string si(double value) {
  static constexpr const char* kSuffixes[] = {"", "k", "M", "G", "T", "P"};
  size_t suffix = 0;
  while (value >= 999.5 && suffix + 1 < std::size(kSuffixes)) {
    value /= 1000;
    ++suffix;
  }
  if (suffix == 0) return fmt::format("{:.0f}", value);
  int decimals = value >= 99.95 ? 0 : value >= 9.995 ? 1 : 2;
  return fmt::format("{:.{}f}{}", value, decimals, kSuffixes[suffix]);
}

std::string row(std::string_view index, std::string_view primitive, const Cost& cost,
                std::string_view where) {
  return fmt::format("{:>5}  {:<22} {:>8} {:>8} {:>8} {:>8} {:>8.2f}  {}\n", index, primitive,
                     si(cost.flops), si(cost.transcendentals), si(cost.bytes_read),
                     si(cost.bytes_written), cost.arithmetic_intensity(), where);
}

}  // namespace

void register_traced_cost_rules(PrimTable& table) {
  table[prim::custom_vjp_call].cost = custom_vjp_call_cost;
}

std::string CostReport::to_string() const {
  std::string text =
      fmt::format("{:>5}  {:<22} {:>8} {:>8} {:>8} {:>8} {:>8}  {}\n", "#", "primitive", "flops",
                  "transc", "read", "written", "flop/B", "scope @ site");
  for (const EquationCost& equation : equations) {
    std::string where = equation.scope;
    if (!equation.site.empty()) where += (where.empty() ? "@ " : " @ ") + equation.site;
    text += row(std::to_string(equation.index), equation.primitive, equation.cost, where);
  }
  text += row("", "total", total, fmt::format("{} equations", equations.size()));
  return text;
}

CostReport cost_analysis(const TracedProgram& traced) {
  if (traced.program == nullptr) {
    fail(kUnknownSite, "cost_analysis: the TracedProgram holds no program",
         "make one with kiln::make_program(f, args...), or call cost_analysis(f, args...)");
  }
  const Program& program = *traced.program;
  CostReport report;
  report.equations.reserve(program.equations.size());
  for (size_t i = 0; i < program.equations.size(); ++i) {
    const Equation& equation = program.equations[i];
    EquationCost entry{.index = i,
                       .primitive = std::string(prim_name(equation.prim)),
                       .scope = equation.scope,
                       .site = equation.site.known() ? equation.site.to_string() : std::string(),
                       .cost = equation_cost(program, equation)};
    report.total += entry.cost;
    report.equations.push_back(std::move(entry));
  }
  return report;
}

}  // namespace kiln
