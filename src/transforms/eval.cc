// Running a Program (see eval.h).
#include "transforms/eval.h"

#include <fmt/format.h>

#include "base/check.h"
#include "prims/bind.h"
#include "transforms/trace.h"

namespace kiln {

void check_program_inputs(const Program& program, std::span<const Array> inputs, CallSite site) {
  if (inputs.size() != program.inputs.size()) {
    fail(site, fmt::format("the program takes {} input(s), got {}", program.inputs.size(),
                           inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const AbstractValue& expected = program.aval(program.inputs[i]);
    const AbstractValue& got = inputs[i].aval();
    if (got.shape != expected.shape || got.dtype != expected.dtype) {
      fail(site, fmt::format("input {} of the program is {}, got {}", i, expected.to_string(),
                             got.to_string()));
    }
  }
}

std::vector<Array> eval_program_env(const Program& program, std::span<const Array> inputs,
                                    CallSite site) {
  check_program_inputs(program, inputs, site);
  KILN_CHECK(program.constant_values.size() == program.constants.size(),
             "the program has no values for its constants (was it parsed from text?)");
  std::vector<Array> env(program.num_vars());
  for (size_t i = 0; i < inputs.size(); ++i)
    env[static_cast<size_t>(program.inputs[i])] = inputs[i];
  for (size_t i = 0; i < program.constants.size(); ++i) {
    // A program read from text has values only for its literals.
    if (!program.constant_values[i].defined()) {
      fail(site,
           fmt::format("constant {} ({}) of the program has no value", i,
                       program.aval(program.constants[i]).to_string()),
           "a program parsed from text carries the values of its literals only; constants "
           "declared before ';' need values before it can run");
    }
    env[static_cast<size_t>(program.constants[i])] = program.constant_values[i];
  }
  std::vector<Array> operands;
  for (const Equation& equation : program.equations) {
    operands.clear();
    for (VarId var : equation.inputs) operands.push_back(env[static_cast<size_t>(var)]);
    ScopeOverride scope(equation.scope);
    std::vector<Array> results = bind(equation.prim, operands, equation.params, equation.site);
    for (size_t i = 0; i < results.size(); ++i) {
      env[static_cast<size_t>(equation.outputs[i])] = std::move(results[i]);
    }
  }
  return env;
}

std::vector<Array> eval_program(const Program& program, std::span<const Array> inputs,
                                CallSite site) {
  std::vector<Array> env = eval_program_env(program, inputs, site);
  std::vector<Array> outputs;
  for (VarId var : program.outputs) outputs.push_back(env[static_cast<size_t>(var)]);
  return outputs;
}

}  // namespace kiln
