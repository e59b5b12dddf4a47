// ProgramRewrite: what every pass uses to build its result from its input program. The new
// program starts with the input's inputs (all of them, in order: they are the signature);
// the pass then keeps, adds or replaces constants and equations in program order, mapping
// each source variable to the new variable that stands for it. Variables are numbered
// densely in order of definition, and outputs are mapped at the end.
#pragma once

#include <string>
#include <vector>

#include "ir/program.h"

namespace kiln {

// True for a concrete array (a value the eager runtime can read or compute with); false for
// an empty Array or a value of a transformation (a constant of a trace nested in another
// is a tracer of the enclosing one).
bool is_concrete(const Array& value);

class ProgramRewrite {
 public:
  explicit ProgramRewrite(const Program& source);

  const Program& source() const { return source_; }
  // The new program as built so far (its equations, constants and types).
  const Program& draft() const { return draft_; }
  const AbstractValue& aval(VarId new_var) const { return draft_.aval(new_var); }

  // The new variable standing for source variable `var`, which must be mapped already.
  VarId operator[](VarId var) const;
  bool is_mapped(VarId var) const;
  // Source variable `var` stands for `replacement` (a new variable of the identical type:
  // replacing a value by one of another dtype, shape or weak type would change the program).
  void map(VarId var, VarId replacement);

  // Keeps source constant `index` (its type and value) and maps its variable.
  VarId keep_constant(size_t index);
  // A new constant holding `value`.
  VarId add_constant(Array value);
  // The value of new variable `var` if it is a constant with a value, else an empty Array.
  const Array& constant_value(VarId new_var) const;

  // Copies `equation` (site, scope, params, recorded result types) with its operands mapped,
  // and maps its results to the copy's. Returns the copy's index in draft().equations.
  size_t copy_equation(const Equation& equation);
  // Appends a new equation over new variables, typed by its primitive's shape rule.
  std::vector<VarId> add_equation(PrimId prim, std::vector<VarId> inputs, Params params,
                                  CallSite site, std::string scope);
  // The index in draft().equations of the equation defining new variable `var`, or -1 for
  // an input or constant.
  int64_t producer(VarId new_var) const;

  // The finished program; every output of the source must be mapped.
  Program finish();

 private:
  VarId new_var(AbstractValue aval, int64_t producer, int64_t constant);

  const Program& source_;
  Program draft_;
  std::vector<VarId> mapping_;      // per source variable: its new variable, or -1
  std::vector<int64_t> producers_;  // per new variable: its equation's index, or -1
  std::vector<int64_t> constant_;   // per new variable: its index in constants, or -1
};

}  // namespace kiln
