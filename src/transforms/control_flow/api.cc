// The flat front-ends of include/kiln/control_flow.h: they check the user's arguments,
// trace the functions into closed sub-programs and bind the primitives.
#include <fmt/format.h>

#include "kiln/control_flow.h"
#include "prims/bind.h"
#include "prims/ids/control_flow.h"
#include "transforms/control_flow/sub_programs.h"

namespace kiln::detail {
namespace {

using control_flow::ClosedProgram;
using control_flow::strong;
using control_flow::strong_type;
using control_flow::trace_closed;

std::vector<Array> strong_all(std::span<const Array> values, CallSite site) {
  std::vector<Array> out(values.begin(), values.end());
  control_flow::make_strong(out, site);
  return out;
}

// A function whose results lose their weak types, so that a carry of f32 stays f32 when
// the body returns a Python-style number (a weakly typed scalar).
FlatFunction with_strong_results(const FlatFunction& fn, CallSite site) {
  return [&fn, site](std::span<const Array> in) {
    std::vector<Array> out = fn(in);
    control_flow::make_strong(out, site);
    return out;
  };
}

}  // namespace

std::vector<Array> scan_flat(const FlatFunction& body, std::span<const Array> init,
                             std::span<const Array> xs, const ScanOptions& options, CallSite site) {
  if (options.unroll < 1) {
    fail(site, fmt::format("scan: unroll is {}, but it must be at least 1", options.unroll),
         "unroll is how many steps one loop iteration runs");
  }
  int64_t length = -1;
  if (options.length) {
    length = *options.length;
    if (length < 0)
      fail(site, fmt::format("scan: length is {}, but it cannot be negative", length));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    const Array& x = xs[i];
    if (x.rank() == 0) {
      fail(site,
           fmt::format("scan: xs leaf {} is {}, which has no leading axis to scan over", i,
                       x.aval().to_string()),
           "pass scalars that do not change between steps as part of the carry, or capture them");
    }
    if (length < 0) length = x.shape()[0];
    if (x.shape()[0] != length) {
      fail(site,
           fmt::format("scan: xs leaf {} is {}, whose leading axis {} differs from the length {} "
                       "({})",
                       i, x.aval().to_string(), x.shape()[0], length,
                       options.length ? "ScanOptions::length" : "the leading axis of xs leaf 0"),
           "every xs leaf is scanned along its leading axis, so those axes must agree");
    }
  }
  if (length < 0) {
    fail(site, "scan: the length is unknown: xs has no leaves and ScanOptions::length is not set",
         "give the number of steps with kiln::ScanOptions{.length = n}");
  }
  std::vector<Array> carry = strong_all(init, site);
  std::vector<AbstractValue> types = control_flow::types_of(carry);
  for (const Array& x : xs) {
    AbstractValue slice = x.aval();
    slice.shape.dims().erase_at(0);
    types.push_back(slice);
  }
  ClosedProgram closed = trace_closed(with_strong_results(body, site), types, site);
  std::vector<Array> operands = closed.consts;
  operands.insert(operands.end(), carry.begin(), carry.end());
  operands.insert(operands.end(), xs.begin(), xs.end());
  ScanParams params{.body = closed.program,
                    .length = length,
                    .num_consts = static_cast<int64_t>(closed.consts.size()),
                    .num_carry = static_cast<int64_t>(carry.size()),
                    .reverse = options.reverse,
                    .unroll = options.unroll,
                    .recompute = options.recompute};
  return bind(prim::scan, operands, params, site);
}

Array predicate_index(const Array& pred, CallSite site) {
  if (!pred.defined()) fail(site, "cond: the predicate is an empty Array (default-constructed)");
  if (pred.rank() != 0 || !(pred.dtype() == DType::bool_ || is_integer(pred.dtype()))) {
    fail(site,
         fmt::format("cond: the predicate must be a bool or integer scalar, got {}",
                     pred.aval().to_string()),
         pred.rank() != 0 ? "reduce it to one value first (e.g. kiln::max(x) > 0); use "
                            "kiln::where to choose element by element"
                          : "compare the value, e.g. x > 0");
  }
  Array truth = pred.dtype() == DType::bool_ ? pred : not_equal(pred, zeros_like(pred, site), site);
  return astype(truth, DType::i32, site);
}

Array switch_index(const Array& index, CallSite site) {
  if (!index.defined()) fail(site, "switch_: the index is an empty Array (default-constructed)");
  if (index.rank() != 0 || !is_integer(index.dtype())) {
    fail(site,
         fmt::format("switch_: the index must be an integer scalar, got {}",
                     index.aval().to_string()),
         index.rank() != 0 ? "select one branch for the whole call; use kiln::where to choose "
                             "element by element"
                           : "convert it with astype(index, DType::i32)");
  }
  return astype(index, DType::i32, site);
}

std::vector<Array> switch_flat(const Array& index, std::span<const FlatFunction> branches,
                               std::span<const Array> operands, CallSite site) {
  if (branches.empty()) {
    fail(site, "switch_: there are no branches", "give at least one branch function");
  }
  std::vector<AbstractValue> types = control_flow::types_of(operands);
  std::vector<ClosedProgram> closed;
  for (const FlatFunction& branch : branches) {
    closed.push_back(trace_closed(with_strong_results(branch, site), types, site));
  }
  control_flow::JoinedBranches joined = control_flow::join_branches(closed);
  std::vector<Array> in{index};
  in.insert(in.end(), joined.consts.begin(), joined.consts.end());
  in.insert(in.end(), operands.begin(), operands.end());
  return bind(prim::cond, in, CondParams{std::move(joined.branches)}, site);
}

std::vector<Array> while_flat(const FlatFunction& cond, const FlatFunction& body,
                              std::span<const Array> init, CallSite site) {
  std::vector<Array> carry = strong_all(init, site);
  std::vector<AbstractValue> types = control_flow::types_of(carry);
  ClosedProgram cond_program = trace_closed(cond, types, site);
  ClosedProgram body_program = trace_closed(with_strong_results(body, site), types, site);
  std::vector<Array> operands = cond_program.consts;
  operands.insert(operands.end(), body_program.consts.begin(), body_program.consts.end());
  operands.insert(operands.end(), carry.begin(), carry.end());
  WhileParams params{.cond = cond_program.program,
                     .body = body_program.program,
                     .cond_num_consts = static_cast<int64_t>(cond_program.consts.size()),
                     .body_num_consts = static_cast<int64_t>(body_program.consts.size())};
  return bind(prim::while_loop, operands, params, site);
}

}  // namespace kiln::detail
