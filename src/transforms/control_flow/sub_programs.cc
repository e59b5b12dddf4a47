// Closure conversion, running and batching of control-flow sub-programs (see
// sub_programs.h).
#include "transforms/control_flow/sub_programs.h"

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/ops.h"
#include "kiln/vmap.h"
#include "transforms/batch_rules/batch_util.h"
#include "transforms/eval.h"
#include "transforms/trace.h"

namespace kiln::control_flow {
namespace {

// A captured value that can stay in the program as an inline literal: a concrete scalar.
bool is_literal_value(const Array& value) {
  return value.defined() && value.rank() == 0 &&
         dynamic_cast<const TransformValue*>(value.impl()) == nullptr;
}

}  // namespace

ClosedProgram trace_closed(const detail::FlatFunction& fn, std::span<const AbstractValue> arg_types,
                           CallSite site) {
  Program program = *detail::trace_flat(fn, arg_types, site).program;
  ClosedProgram closed;
  std::vector<VarId> lifted, kept;
  std::vector<Array> kept_values;
  for (size_t i = 0; i < program.constants.size(); ++i) {
    Array& value = program.constant_values[i];
    if (is_literal_value(value)) {
      kept.push_back(program.constants[i]);
      kept_values.push_back(std::move(value));
    } else {
      lifted.push_back(program.constants[i]);
      closed.consts.push_back(std::move(value));
    }
  }
  program.constants = std::move(kept);
  program.constant_values = std::move(kept_values);
  program.inputs.insert(program.inputs.begin(), lifted.begin(), lifted.end());
  closed.program.program = std::make_shared<const Program>(std::move(program));
  return closed;
}

std::vector<Array> run(const ProgramRef& program, std::span<const Array> inputs, CallSite site) {
  KILN_CHECK(program.program != nullptr, "control flow: missing sub-program");
  return eval_program(*program.program, inputs, site);
}

Array strong(const Array& value, CallSite site) {
  return value.weak_type() ? astype(value, value.dtype(), site) : value;
}

void make_strong(std::vector<Array>& values, CallSite site) {
  for (Array& value : values) value = strong(value, site);
}

AbstractValue strong_type(AbstractValue aval) {
  aval.weak_type = false;
  return aval;
}

std::vector<AbstractValue> input_types(const Program& program) {
  std::vector<AbstractValue> types;
  for (VarId var : program.inputs) types.push_back(program.aval(var));
  return types;
}

std::vector<AbstractValue> types_of(std::span<const Array> values) {
  std::vector<AbstractValue> types;
  for (const Array& value : values) types.push_back(value.aval());
  return types;
}

JoinedBranches join_branches(const std::vector<ClosedProgram>& closed) {
  JoinedBranches joined;
  for (const ClosedProgram& branch : closed) {
    joined.consts.insert(joined.consts.end(), branch.consts.begin(), branch.consts.end());
  }
  for (size_t b = 0; b < closed.size(); ++b) {
    Program program = *closed[b].program.program;
    size_t own = closed[b].consts.size();
    std::vector<VarId> inputs;
    for (size_t other = 0; other < closed.size(); ++other) {
      if (other == b) {
        inputs.insert(inputs.end(), program.inputs.begin(),
                      program.inputs.begin() + static_cast<std::ptrdiff_t>(own));
        continue;
      }
      // Another branch's captured values: inputs this branch ignores.
      for (const Array& value : closed[other].consts) {
        inputs.push_back(program.add_var(value.aval()));
      }
    }
    inputs.insert(inputs.end(), program.inputs.begin() + static_cast<std::ptrdiff_t>(own),
                  program.inputs.end());
    program.inputs = std::move(inputs);
    joined.branches.push_back(ProgramRef{std::make_shared<const Program>(std::move(program))});
  }
  return joined;
}

std::vector<bool> batched_outputs(const Program& program, const std::vector<bool>& batched) {
  KILN_CHECK(batched.size() == program.inputs.size(), "{} flags for {} inputs", batched.size(),
             program.inputs.size());
  std::vector<bool> var_batched(program.num_vars(), false);
  for (size_t i = 0; i < batched.size(); ++i) {
    var_batched[static_cast<size_t>(program.inputs[i])] = batched[i];
  }
  for (const Equation& equation : program.equations) {
    bool any = false;
    for (VarId var : equation.inputs) any = any || var_batched[static_cast<size_t>(var)];
    for (VarId var : equation.outputs) var_batched[static_cast<size_t>(var)] = any;
  }
  std::vector<bool> out;
  for (VarId var : program.outputs) out.push_back(var_batched[static_cast<size_t>(var)]);
  return out;
}

AbstractValue with_batch(AbstractValue aval, int64_t size) {
  aval.shape.dims().insert_at(0, size);
  return aval;
}

std::vector<Array> run_batched(const Program& program, std::span<const Array> values,
                               const std::vector<bool>& batched, const std::vector<bool>& force,
                               int64_t size, CallSite site) {
  KILN_CHECK(force.size() == program.outputs.size(), "{} flags for {} outputs", force.size(),
             program.outputs.size());
  std::vector<Array> values_out;
  std::vector<int64_t> dims;
  bool any = false;
  for (bool b : batched) any = any || b;
  if (!any) {
    values_out = eval_program(program, values, site);
    dims.assign(values_out.size(), kNotBatched);
  } else {
    std::vector<std::optional<int64_t>> axes;
    std::vector<std::string> names;
    for (size_t i = 0; i < batched.size(); ++i) {
      axes.push_back(batched[i] ? std::optional<int64_t>(0) : std::nullopt);
      names.push_back(fmt::format("sub-program input {}", i));
    }
    detail::FlatFunction fn = [&program, site](std::span<const Array> in) {
      return eval_program(program, in, site);
    };
    detail::BatchedOutputs out = detail::vmap_flat(fn, values, axes, names, site);
    values_out = std::move(out.values);
    dims = std::move(out.dims);
  }
  for (size_t k = 0; k < values_out.size(); ++k) {
    if (force[k]) {
      values_out[k] = batch_util::batch_at(values_out[k], dims[k], 0, size, site);
    } else {
      KILN_CHECK(dims[k] == kNotBatched, "sub-program output {} was predicted unbatched", k);
    }
  }
  return values_out;
}

ClosedProgram batch_program(const Program& program, const std::vector<bool>& batched,
                            const std::vector<bool>& force, int64_t size, CallSite site) {
  std::vector<AbstractValue> types = input_types(program);
  for (size_t i = 0; i < types.size(); ++i) {
    if (batched[i]) types[i] = with_batch(types[i], size);
  }
  detail::FlatFunction fn = [&](std::span<const Array> in) {
    return run_batched(program, in, batched, force, size, site);
  };
  return trace_closed(fn, types, site);
}

}  // namespace kiln::control_flow
