// ProgramRewrite (see program_rewrite.h).
#include "transforms/passes/program_rewrite.h"

#include "base/check.h"
#include "prims/bind.h"
#include "transforms/transform_value.h"

namespace kiln {

bool is_concrete(const Array& value) {
  // The runtime's arrays are the only values that are not TransformValues; this layer may
  // not name the runtime's class, so it recognises them by exclusion.
  return value.defined() && dynamic_cast<const TransformValue*>(value.impl()) == nullptr;
}

ProgramRewrite::ProgramRewrite(const Program& source)
    : source_(source), mapping_(source.num_vars(), -1) {
  for (VarId var : source.inputs) {
    VarId copy = new_var(source.aval(var), -1, -1);
    draft_.inputs.push_back(copy);
    map(var, copy);
  }
}

VarId ProgramRewrite::new_var(AbstractValue aval, int64_t producer, int64_t constant) {
  VarId var = draft_.add_var(std::move(aval));
  producers_.push_back(producer);
  constant_.push_back(constant);
  return var;
}

VarId ProgramRewrite::operator[](VarId var) const {
  VarId mapped = mapping_.at(static_cast<size_t>(var));
  KILN_CHECK(mapped >= 0, "source variable {} is used before the rewrite defined it", var);
  return mapped;
}

bool ProgramRewrite::is_mapped(VarId var) const {
  return mapping_.at(static_cast<size_t>(var)) >= 0;
}

void ProgramRewrite::map(VarId var, VarId replacement) {
  KILN_CHECK(source_.aval(var) == draft_.aval(replacement),
             "a pass replaced a value of type {} by one of type {}", source_.aval(var).to_string(),
             draft_.aval(replacement).to_string());
  mapping_.at(static_cast<size_t>(var)) = replacement;
}

VarId ProgramRewrite::keep_constant(size_t index) {
  VarId source_var = source_.constants.at(index);
  Array value = index < source_.constant_values.size() ? source_.constant_values[index] : Array();
  VarId copy = new_var(source_.aval(source_var), -1, static_cast<int64_t>(draft_.constants.size()));
  draft_.constants.push_back(copy);
  draft_.constant_values.push_back(std::move(value));
  map(source_var, copy);
  return copy;
}

VarId ProgramRewrite::add_constant(Array value) {
  VarId var = new_var(value.aval(), -1, static_cast<int64_t>(draft_.constants.size()));
  draft_.constants.push_back(var);
  draft_.constant_values.push_back(std::move(value));
  return var;
}

const Array& ProgramRewrite::constant_value(VarId new_var) const {
  static const Array kNone;
  int64_t index = constant_.at(static_cast<size_t>(new_var));
  return index < 0 ? kNone : draft_.constant_values[static_cast<size_t>(index)];
}

size_t ProgramRewrite::copy_equation(const Equation& equation) {
  size_t index = draft_.equations.size();
  Equation copy{equation.prim, {}, {}, equation.params, equation.site, equation.scope};
  copy.inputs.reserve(equation.inputs.size());
  for (VarId var : equation.inputs) copy.inputs.push_back((*this)[var]);
  for (VarId var : equation.outputs) {
    copy.outputs.push_back(new_var(source_.aval(var), static_cast<int64_t>(index), -1));
    mapping_.at(static_cast<size_t>(var)) = copy.outputs.back();
  }
  draft_.equations.push_back(std::move(copy));
  return index;
}

std::vector<VarId> ProgramRewrite::add_equation(PrimId prim, std::vector<VarId> inputs,
                                                Params params, CallSite site, std::string scope) {
  std::vector<AbstractValue> in_avals;
  in_avals.reserve(inputs.size());
  for (VarId var : inputs) in_avals.push_back(draft_.aval(var));
  std::vector<AbstractValue> out_avals = abstract_eval(prim, in_avals, params, site);
  size_t index = draft_.equations.size();
  Equation equation{prim, std::move(inputs), {}, std::move(params), site, std::move(scope)};
  for (AbstractValue& aval : out_avals) {
    equation.outputs.push_back(new_var(std::move(aval), static_cast<int64_t>(index), -1));
  }
  draft_.equations.push_back(std::move(equation));
  return draft_.equations.back().outputs;
}

int64_t ProgramRewrite::producer(VarId new_var) const {
  return producers_.at(static_cast<size_t>(new_var));
}

Program ProgramRewrite::finish() {
  draft_.outputs.clear();
  for (VarId var : source_.outputs) draft_.outputs.push_back((*this)[var]);
  return std::move(draft_);
}

}  // namespace kiln
