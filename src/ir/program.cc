// Program and ProgramBuilder (see program.h).
#include "ir/program.h"

#include "prims/bind.h"

namespace kiln {

VarId Program::add_var(AbstractValue aval) {
  avals_.push_back(std::move(aval));
  return static_cast<VarId>(avals_.size() - 1);
}

VarId ProgramBuilder::add_input(AbstractValue aval) {
  VarId var = program_.add_var(std::move(aval));
  program_.inputs.push_back(var);
  return var;
}

VarId ProgramBuilder::add_constant(Array value) {
  VarId var = program_.add_var(value.aval());
  program_.constants.push_back(var);
  program_.constant_values.push_back(std::move(value));
  return var;
}

std::vector<AbstractValue> ProgramBuilder::result_types(PrimId prim,
                                                        const std::vector<VarId>& inputs,
                                                        const Params& params, CallSite site) const {
  std::vector<AbstractValue> in_avals;
  in_avals.reserve(inputs.size());
  for (VarId var : inputs) in_avals.push_back(program_.aval(var));
  return abstract_eval(prim, in_avals, params, site);
}

std::vector<VarId> ProgramBuilder::add_equation(PrimId prim, std::vector<VarId> inputs,
                                                Params params, CallSite site, std::string scope) {
  std::vector<AbstractValue> out_avals = result_types(prim, inputs, params, site);
  Equation equation{prim, std::move(inputs), {}, std::move(params), site, std::move(scope)};
  for (AbstractValue& aval : out_avals)
    equation.outputs.push_back(program_.add_var(std::move(aval)));
  program_.equations.push_back(std::move(equation));
  return program_.equations.back().outputs;
}

void ProgramBuilder::set_outputs(std::vector<VarId> outputs) {
  program_.outputs = std::move(outputs);
}

}  // namespace kiln
