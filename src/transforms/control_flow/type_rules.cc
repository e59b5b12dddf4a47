// Shape rules of the control-flow primitives (scan, cond, while_loop), whose params hold
// closed sub-programs (params.h). Each rule checks the operands against the sub-programs'
// input types and the sub-programs against each other (a carry keeps its type, branches
// return the same types), naming the leaf or branch and both types. Results are never
// weakly typed. The impl, VJP and batching rules live in src/transforms/control_flow/.
#include <fmt/format.h>

#include "ir/program.h"
#include "prims/ids/control_flow.h"

namespace kiln {
namespace {

bool same_type(const AbstractValue& a, const AbstractValue& b) {
  return a.shape == b.shape && a.dtype == b.dtype;
}

AbstractValue strong(AbstractValue aval) {
  aval.weak_type = false;
  return aval;
}

const Program& program_of(const ProgramRef& ref, std::string_view what,
                          const RuleContext& context) {
  if (!ref.program) context.fail(fmt::format("the {} program is missing", what));
  return *ref.program;
}

AbstractValue input_type(const Program& program, size_t i) {
  return program.aval(program.inputs[i]);
}
AbstractValue output_type(const Program& program, size_t i) {
  return program.aval(program.outputs[i]);
}

void check_count(int64_t value, std::string_view field, const RuleContext& context) {
  if (value < 0) context.fail(fmt::format("{} is {}, but it cannot be negative", field, value));
}

// ----- scan -----------------------------------------------------------------------------

std::vector<AbstractValue> scan_rule(std::span<const AbstractValue> inputs, const Params& params,
                                     const RuleContext& context) {
  const auto& p = std::get<ScanParams>(params);
  const Program& body = program_of(p.body, "body", context);
  check_count(p.length, "length", context);
  check_count(p.num_consts, "num_consts", context);
  check_count(p.num_carry, "num_carry", context);
  if (p.unroll < 1) {
    context.fail(fmt::format("unroll is {}, but it must be at least 1", p.unroll),
                 "unroll is how many steps one loop iteration runs");
  }
  auto num_consts = static_cast<size_t>(p.num_consts);
  auto num_carry = static_cast<size_t>(p.num_carry);
  if (num_consts + num_carry > inputs.size()) {
    context.fail(fmt::format("num_consts ({}) + num_carry ({}) exceed the {} operand(s)",
                             num_consts, num_carry, inputs.size()));
  }
  size_t num_xs = inputs.size() - num_consts - num_carry;
  if (body.inputs.size() != inputs.size()) {
    context.fail(
        fmt::format("the body takes {} input(s), but scan has {} operand(s) ({} const(s), "
                    "{} carry, {} xs)",
                    body.inputs.size(), inputs.size(), num_consts, num_carry, num_xs));
  }
  if (body.outputs.size() < num_carry) {
    context.fail(fmt::format("the body returns {} value(s), fewer than the {} carry value(s)",
                             body.outputs.size(), num_carry));
  }
  for (size_t i = 0; i < num_consts; ++i) {
    if (!same_type(inputs[i], input_type(body, i))) {
      context.fail(fmt::format("const {} is {}, but the body takes {}", i, inputs[i].to_string(),
                               input_type(body, i).to_string()));
    }
  }
  for (size_t k = 0; k < num_carry; ++k) {
    const AbstractValue& init = inputs[num_consts + k];
    AbstractValue carry = input_type(body, num_consts + k);
    if (!same_type(init, carry)) {
      context.fail(
          fmt::format("the initial carry leaf {} is {}, but the body's carry input {} is {}", k,
                      init.to_string(), k, carry.to_string()));
    }
    AbstractValue returned = output_type(body, k);
    if (!same_type(returned, carry)) {
      context.fail(fmt::format("the body returns carry leaf {} as {}, but the carry is {}", k,
                               returned.to_string(), carry.to_string()),
                   "the carry must keep its shape and dtype from one iteration to the next");
    }
  }
  for (size_t k = 0; k < num_xs; ++k) {
    const AbstractValue& xs = inputs[num_consts + num_carry + k];
    if (xs.shape.rank() == 0 || xs.shape[0] != p.length) {
      context.fail(
          fmt::format("xs leaf {} is {}, but scan's length is {}: every xs leaf needs a leading "
                      "axis of that size",
                      k, xs.to_string(), p.length),
          xs.shape.rank() == 0 ? "a scalar cannot be scanned over; pass it as part of the carry "
                                 "or close over it"
                               : "scan over arrays whose leading axes agree");
    }
    AbstractValue slice = xs;
    slice.shape.dims().erase_at(0);
    AbstractValue takes = input_type(body, num_consts + num_carry + k);
    if (!same_type(slice, takes)) {
      context.fail(fmt::format("a slice of xs leaf {} is {}, but the body takes {}", k,
                               slice.to_string(), takes.to_string()));
    }
  }
  std::vector<AbstractValue> results;
  for (size_t k = 0; k < num_carry; ++k) results.push_back(strong(inputs[num_consts + k]));
  for (size_t j = num_carry; j < body.outputs.size(); ++j) {
    AbstractValue y = strong(output_type(body, j));
    y.shape.dims().insert_at(0, p.length);
    results.push_back(std::move(y));
  }
  return results;
}

// ----- cond -----------------------------------------------------------------------------

std::vector<AbstractValue> cond_rule(std::span<const AbstractValue> inputs, const Params& params,
                                     const RuleContext& context) {
  const auto& p = std::get<CondParams>(params);
  if (p.branches.empty()) context.fail("has no branches", "give at least one branch");
  if (inputs.empty()) context.fail("needs an index operand", "operand 0 is the branch index");
  const AbstractValue& index = inputs[0];
  if (index.shape.rank() != 0 || index.dtype != DType::i32) {
    context.fail(
        fmt::format("the index (operand 0) must be an i32 scalar, got {}", index.to_string()),
        "kiln::cond takes a bool or integer scalar predicate; switch_ an integer index");
  }
  std::span<const AbstractValue> operands = inputs.subspan(1);
  const Program* first = nullptr;
  for (size_t b = 0; b < p.branches.size(); ++b) {
    const Program& branch = program_of(p.branches[b], fmt::format("branch {}", b), context);
    if (branch.inputs.size() != operands.size()) {
      context.fail(fmt::format("branch {} takes {} operand(s), but cond has {} after the index", b,
                               branch.inputs.size(), operands.size()));
    }
    for (size_t i = 0; i < operands.size(); ++i) {
      if (!same_type(operands[i], input_type(branch, i))) {
        context.fail(fmt::format("branch {} takes {} as operand {}, got {}", b,
                                 input_type(branch, i).to_string(), i, operands[i].to_string()));
      }
    }
    if (first == nullptr) {
      first = &branch;
      continue;
    }
    if (branch.outputs.size() != first->outputs.size()) {
      context.fail(fmt::format("branch {} returns {} value(s), but branch 0 returns {}", b,
                               branch.outputs.size(), first->outputs.size()),
                   "every branch must return the same structure and types");
    }
    for (size_t j = 0; j < branch.outputs.size(); ++j) {
      if (!same_type(output_type(branch, j), output_type(*first, j))) {
        context.fail(
            fmt::format("branch {} returns {} as result {}, but branch 0 returns {}", b,
                        output_type(branch, j).to_string(), j, output_type(*first, j).to_string()),
            "every branch must return the same types (cast with astype, or broadcast)");
      }
    }
  }
  std::vector<AbstractValue> results;
  for (size_t j = 0; j < first->outputs.size(); ++j)
    results.push_back(strong(output_type(*first, j)));
  return results;
}

// ----- while_loop -----------------------------------------------------------------------

std::vector<AbstractValue> while_rule(std::span<const AbstractValue> inputs, const Params& params,
                                      const RuleContext& context) {
  const auto& p = std::get<WhileParams>(params);
  const Program& cond = program_of(p.cond, "cond", context);
  const Program& body = program_of(p.body, "body", context);
  check_count(p.cond_num_consts, "cond_num_consts", context);
  check_count(p.body_num_consts, "body_num_consts", context);
  auto cond_consts = static_cast<size_t>(p.cond_num_consts);
  auto body_consts = static_cast<size_t>(p.body_num_consts);
  if (cond_consts + body_consts > inputs.size()) {
    context.fail(fmt::format("cond_num_consts ({}) + body_num_consts ({}) exceed the {} operand(s)",
                             cond_consts, body_consts, inputs.size()));
  }
  std::span<const AbstractValue> carry = inputs.subspan(cond_consts + body_consts);
  auto check_inputs = [&](const Program& program, std::string_view name,
                          std::span<const AbstractValue> consts) {
    if (program.inputs.size() != consts.size() + carry.size()) {
      context.fail(
          fmt::format("the {} program takes {} input(s), but it gets {} const(s) and {} "
                      "carry value(s)",
                      name, program.inputs.size(), consts.size(), carry.size()));
    }
    for (size_t i = 0; i < program.inputs.size(); ++i) {
      const AbstractValue& given = i < consts.size() ? consts[i] : carry[i - consts.size()];
      if (!same_type(given, input_type(program, i))) {
        context.fail(fmt::format("the {} program takes {} as input {}, got {}", name,
                                 input_type(program, i).to_string(), i, given.to_string()));
      }
    }
  };
  check_inputs(cond, "cond", inputs.subspan(0, cond_consts));
  check_inputs(body, "body", inputs.subspan(cond_consts, body_consts));
  if (cond.outputs.size() != 1 || output_type(cond, 0).shape.rank() != 0 ||
      output_type(cond, 0).dtype != DType::bool_) {
    std::string got = cond.outputs.size() == 1 ? output_type(cond, 0).to_string()
                                               : fmt::format("{} values", cond.outputs.size());
    context.fail(
        fmt::format("the condition must return a bool scalar, got {}", got),
        "reduce the condition to one bool, e.g. with kiln::max or a comparison of scalars");
  }
  if (body.outputs.size() != carry.size()) {
    context.fail(fmt::format("the body returns {} value(s), but the carry has {}",
                             body.outputs.size(), carry.size()));
  }
  std::vector<AbstractValue> results;
  for (size_t k = 0; k < carry.size(); ++k) {
    if (!same_type(output_type(body, k), carry[k])) {
      context.fail(fmt::format("the body returns carry leaf {} as {}, but the carry is {}", k,
                               output_type(body, k).to_string(), carry[k].to_string()),
                   "the carry must keep its shape and dtype from one iteration to the next");
    }
    results.push_back(strong(carry[k]));
  }
  return results;
}

}  // namespace

void register_control_flow_rules(PrimTable& table) {
  table[prim::scan].abstract_eval = scan_rule;
  table[prim::cond].abstract_eval = cond_rule;
  table[prim::while_loop].abstract_eval = while_rule;
  // Reverse-mode through while_loop is rejected by its VJP rule with a clear error (as in
  // JAX); the flag keeps the gradient column of the primitive table off it.
}

}  // namespace kiln
