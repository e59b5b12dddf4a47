// Program: the typed SSA form that tracing records and transformations rewrite. Inputs,
// closed-over constants, equations (primitive, operands, results, typed params, the user's
// call site and name scope) and outputs. Every variable is defined exactly once.
//
//   { lambda ; a:f32[128,784] b:f32[784,512]. let
//       c:f32[128,512] = dot_general[lhs_contracting=(1) ...] a b
//     in (c) }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "prims/registry.h"

namespace kiln {

using VarId = int32_t;

struct Equation {
  PrimId prim{};
  std::vector<VarId> inputs;
  std::vector<VarId> outputs;
  Params params;
  CallSite site = kUnknownSite;
  std::string scope;  // name stack from kiln::named_scope, e.g. "mlp/dense1"
};

class Program {
 public:
  VarId add_var(AbstractValue aval);
  const AbstractValue& aval(VarId var) const { return avals_.at(static_cast<size_t>(var)); }
  size_t num_vars() const { return avals_.size(); }

  std::vector<VarId> inputs;
  // Values closed over by the traced function (concrete arrays, or values of an enclosing
  // trace). `constant_values` is parallel to `constants`; a parsed program has none.
  std::vector<VarId> constants;
  std::vector<Array> constant_values;
  std::vector<Equation> equations;
  std::vector<VarId> outputs;

 private:
  std::vector<AbstractValue> avals_;
};

// Builds a Program one equation at a time, checking each with its primitive's abstract
// evaluation (so a built program is always well typed).
class ProgramBuilder {
 public:
  VarId add_input(AbstractValue aval);
  VarId add_constant(Array value);
  // Appends `prim` applied to `inputs` and returns its result variables.
  std::vector<VarId> add_equation(PrimId prim, std::vector<VarId> inputs, Params params,
                                  CallSite site = kUnknownSite, std::string scope = {});
  // The types of the results `add_equation` would produce, without adding anything.
  std::vector<AbstractValue> result_types(PrimId prim, const std::vector<VarId>& inputs,
                                          const Params& params, CallSite site) const;
  void set_outputs(std::vector<VarId> outputs);
  const Program& program() const { return program_; }
  Program take() { return std::move(program_); }
  const AbstractValue& aval(VarId var) const { return program_.aval(var); }

 private:
  Program program_;
};

}  // namespace kiln
