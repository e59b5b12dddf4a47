// Cost rules of the kernel primitives: FLOPs, transcendentals and bytes of one application,
// from the operand and result types alone (see kiln/cost_types.h for what is counted).
// Primitives defined by ops (custom_vjp_call) get theirs by tracing their impl
// (transforms/cost_analysis.cc); control flow adds its own with its rules.
#include <cmath>
#include <initializer_list>

#include "prims/registry.h"

namespace kiln {
namespace {

double elements(const AbstractValue& aval) {
  return static_cast<double>(aval.num_elements());
}
double bytes(const AbstractValue& aval) {
  return static_cast<double>(aval.size_bytes());
}
double total_bytes(std::span<const AbstractValue> avals) {
  double sum = 0;
  for (const AbstractValue& aval : avals) sum += bytes(aval);
  return sum;
}

// Reads every operand whole (a broadcast operand counts its own size, not the result's:
// it is read once and reused) and writes every result.
Cost moves_all(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
               double flops = 0) {
  return Cost{.flops = flops,
              .transcendentals = 0,
              .bytes_read = total_bytes(inputs),
              .bytes_written = total_bytes(outputs)};
}

// Arithmetic, comparisons, logic, select and conversions: one FLOP per result element.
Cost elementwise_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                      const Params&) {
  return moves_all(inputs, outputs, elements(outputs[0]));
}

// exp, log, tanh, sqrt, pow...: one transcendental per result element and no FLOPs, as
// XLA's cost analysis counts them (their real price depends on the math library).
Cost transcendental_cost(std::span<const AbstractValue> inputs,
                         std::span<const AbstractValue> outputs, const Params&) {
  Cost cost = moves_all(inputs, outputs);
  cost.transcendentals = elements(outputs[0]);
  return cost;
}

// Pure data movement: no FLOPs, every operand read and every result written.
Cost movement_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                   const Params&) {
  return moves_all(inputs, outputs);
}

// The result is the operand's buffer (kAliasesOperand) or the primitive only marks a value
// for the transformations: nothing is computed or moved.
Cost free_cost(std::span<const AbstractValue>, std::span<const AbstractValue>, const Params&) {
  return Cost{};
}

// slice and dynamic_slice read only the elements they keep (plus the start indices).
Cost slice_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                const Params&) {
  Cost cost{.bytes_read = bytes(outputs[0]), .bytes_written = bytes(outputs[0])};
  for (size_t i = 1; i < inputs.size(); ++i) cost.bytes_read += bytes(inputs[i]);
  return cost;
}

Cost iota_cost(std::span<const AbstractValue>, std::span<const AbstractValue> outputs,
               const Params&) {
  return Cost{.bytes_written = bytes(outputs[0])};
}

// gather reads the operand rows it picks (as many elements as it writes) and the indices.
Cost gather_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                 const Params&) {
  return Cost{.bytes_read = bytes(outputs[0]) + bytes(inputs[1]),
              .bytes_written = bytes(outputs[0])};
}

// kiln's scatters write a new result: the operand is copied, then the updates land on it
// (scatter_add adds each update: one FLOP per update element).
Cost scatter_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                  const Params&) {
  return moves_all(inputs, outputs);
}
Cost scatter_add_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                      const Params&) {
  return moves_all(inputs, outputs, elements(inputs[2]));
}

// Reductions, arg-reductions and cumsum: one FLOP (an add, a max, a comparison) per
// operand element.
Cost reduce_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                 const Params&) {
  return moves_all(inputs, outputs, elements(inputs[0]));
}

// 2 x (result elements) x (contracted size): 2 x batch x M x N x K for a batched matmul.
Cost dot_general_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                      const Params& params) {
  const auto& p = std::get<DotGeneralParams>(params);
  double contracted = 1;
  for (int64_t axis : p.lhs_contracting) contracted *= static_cast<double>(inputs[0].shape[axis]);
  return moves_all(inputs, outputs, 2 * elements(outputs[0]) * contracted);
}

// 2 x (result elements) x (kernel window) x (input channels per group); rhs is HWIO. Taps
// that fall on padding or on the holes of lhs_dilation are counted too: the count is the
// multiply-adds of the convolution as written, not of a particular algorithm.
Cost conv_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
               const Params&) {
  const Shape& rhs = inputs[1].shape;
  double taps =
      static_cast<double>(rhs[0]) * static_cast<double>(rhs[1]) * static_cast<double>(rhs[2]);
  return moves_all(inputs, outputs, 2 * elements(outputs[0]) * taps);
}

// One max or add per window element per result element.
Cost reduce_window_cost(std::span<const AbstractValue> inputs,
                        std::span<const AbstractValue> outputs, const Params& params) {
  const auto& p = std::get<ReduceWindowParams>(params);
  double window = 1;
  for (int64_t size : p.window_dimensions) window *= static_cast<double>(size);
  return moves_all(inputs, outputs, elements(outputs[0]) * window);
}

// One comparison per window element per source element, then one add per source element.
Cost select_and_scatter_add_cost(std::span<const AbstractValue> inputs,
                                 std::span<const AbstractValue> outputs, const Params& params) {
  const auto& p = std::get<ReduceWindowParams>(params);
  double window = 1;
  for (int64_t size : p.window_dimensions) window *= static_cast<double>(size);
  return moves_all(inputs, outputs, elements(inputs[0]) * (window + 1));
}

// Integer operations of one Threefry-2x32 block (one element of each result): 20 rounds of
// (add, rotate = shift + shift + or, xor) = 100, five key injections of three adds = 15,
// and two xors for the third key word. Counted as FLOPs, as XLA counts integer ops.
constexpr double kThreefryOpsPerElement = 20 * 5 + 5 * 3 + 2;

Cost threefry_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                   const Params&) {
  return moves_all(inputs, outputs, kThreefryOpsPerElement * elements(outputs[0]));
}

// n log2 n comparisons per line of n elements along the sorted dimension.
Cost sort_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
               const Params& params) {
  const auto& p = std::get<SortParams>(params);
  const Shape& shape = inputs[0].shape;
  Cost cost = moves_all(inputs, outputs);
  if (shape.rank() == 0) return cost;
  int64_t dimension = p.dimension < 0 ? p.dimension + shape.rank() : p.dimension;
  if (dimension < 0 || dimension >= shape.rank()) return cost;
  double n = static_cast<double>(shape[dimension]);
  if (n < 2) return cost;
  double lines = elements(inputs[0]) / n;
  cost.flops = lines * n * std::log2(n);
  return cost;
}

void set(PrimTable& table, std::initializer_list<PrimId> ids, CostFn rule) {
  for (PrimId id : ids) table[id].cost = rule;
}

}  // namespace

void register_cost_rules(PrimTable& table) {
  using enum PrimId;
  set(table,
      {neg,
       abs,
       sign,
       floor,
       ceil,
       round,
       is_finite,
       not_,
       add,
       sub,
       mul,
       div,
       rem,
       max,
       min,
       and_,
       or_,
       xor_,
       eq,
       ne,
       lt,
       le,
       gt,
       ge,
       shift_left,
       shift_right_logical,
       shift_right_arithmetic,
       select,
       convert_element_type},
      elementwise_cost);
  set(table, {exp, expm1, log, log1p, sqrt, rsqrt, tanh, logistic, sin, cos, erf, erf_inv, pow},
      transcendental_cost);
  set(table, {broadcast_in_dim, transpose, dynamic_update_slice, concatenate, pad}, movement_cost);
  set(table, {reshape, stop_gradient, bitcast_convert_type, optimization_barrier, checkpoint_name},
      free_cost);
  set(table, {slice, dynamic_slice}, slice_cost);
  table[iota].cost = iota_cost;
  table[gather].cost = gather_cost;
  table[scatter].cost = scatter_cost;
  table[scatter_add].cost = scatter_add_cost;
  set(table, {reduce_sum, reduce_max, reduce_min, reduce_prod, argmax, argmin, cumsum},
      reduce_cost);
  table[dot_general].cost = dot_general_cost;
  table[conv_general_dilated].cost = conv_cost;
  set(table, {reduce_window_max, reduce_window_sum}, reduce_window_cost);
  table[select_and_scatter_add].cost = select_and_scatter_add_cost;
  table[threefry2x32].cost = threefry_cost;
  table[sort].cost = sort_cost;
}

}  // namespace kiln
