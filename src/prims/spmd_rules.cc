// Shape and cost rules of the collectives (shard_map's are in src/sharding/, beside its
// sub-program). A collective's result type is a function of its operand and params alone:
// the group size is a param (axis_size), filled in from the mesh when the op is traced.
#include <algorithm>

#include <fmt/format.h>

#include "prims/cost_util.h"
#include "prims/ids/spmd.h"
#include "prims/registry.h"
#include "prims/spmd_text.h"

namespace kiln {
namespace {

const CollectiveParams& collective(const Params& params, const RuleContext& context) {
  const auto& p = std::get<CollectiveParams>(params);
  if (p.axes.empty()) context.fail("names no mesh axis", "pass the mesh axes it runs over");
  if (p.axis_size < 1) context.fail(fmt::format("axis_size is {}", p.axis_size));
  return p;
}

std::vector<AbstractValue> same_type_rule(std::span<const AbstractValue> inputs,
                                          const Params& params, const RuleContext& context) {
  collective(params, context);
  return {inputs[0]};
}

std::vector<AbstractValue> pmean_rule(std::span<const AbstractValue> inputs, const Params& params,
                                      const RuleContext& context) {
  collective(params, context);
  if (!is_floating(inputs[0].dtype)) {
    context.fail(fmt::format("takes a floating-point array, not {}", inputs[0].to_string()),
                 "psum it, or convert it to a float type first");
  }
  return {inputs[0]};
}

std::vector<AbstractValue> all_gather_rule(std::span<const AbstractValue> inputs,
                                           const Params& params, const RuleContext& context) {
  const CollectiveParams& p = collective(params, context);
  AbstractValue out = inputs[0];
  int64_t rank = out.shape.rank();
  if (p.tiled) {
    int64_t dim = normalize_axis(p.dimension, rank, context, "dimension");
    out.shape.dims()[dim] *= p.axis_size;
  } else {
    if (p.dimension < 0 || p.dimension > rank) {
      context.fail(fmt::format("dimension {} is outside [0, {}] for {}", p.dimension, rank,
                               inputs[0].to_string()),
                   "the gathered axis is inserted before dimension `dimension`");
    }
    out.shape.dims().insert_at(p.dimension, p.axis_size);
  }
  return {out};
}

std::vector<AbstractValue> psum_scatter_rule(std::span<const AbstractValue> inputs,
                                             const Params& params, const RuleContext& context) {
  const CollectiveParams& p = collective(params, context);
  AbstractValue out = inputs[0];
  int64_t dim = normalize_axis(p.dimension, out.shape.rank(), context, "dimension");
  int64_t size = out.shape[dim];
  if (p.tiled) {
    if (size % p.axis_size != 0) {
      context.fail(fmt::format("dimension {} of {} (size {}) does not split into {} equal parts",
                               dim, inputs[0].to_string(), size, p.axis_size),
                   "pad that dimension to a multiple of the axes' size");
    }
    out.shape.dims()[dim] = size / p.axis_size;
  } else {
    if (size != p.axis_size) {
      context.fail(fmt::format("dimension {} of {} has size {}, not the axes' size {}", dim,
                               inputs[0].to_string(), size, p.axis_size),
                   "without tiled, the scattered dimension holds one entry per device");
    }
    out.shape.dims().erase_at(dim);
  }
  return {out};
}

std::vector<AbstractValue> all_to_all_rule(std::span<const AbstractValue> inputs,
                                           const Params& params, const RuleContext& context) {
  const CollectiveParams& p = collective(params, context);
  if (!p.tiled) {
    context.fail("supports tiled=true only",
                 "split_dimension is cut into axis_size blocks, block i goes to device i, and "
                 "the received blocks are concatenated along dimension");
  }
  AbstractValue out = inputs[0];
  int64_t rank = out.shape.rank();
  int64_t split = normalize_axis(p.split_dimension, rank, context, "split_dimension");
  int64_t concat = normalize_axis(p.dimension, rank, context, "dimension");
  if (out.shape[split] % p.axis_size != 0) {
    context.fail(fmt::format("split_dimension {} of {} (size {}) does not split into {} parts",
                             split, inputs[0].to_string(), out.shape[split], p.axis_size));
  }
  out.shape.dims()[split] /= p.axis_size;
  out.shape.dims()[concat] *= p.axis_size;
  return {out};
}

std::vector<AbstractValue> ppermute_rule(std::span<const AbstractValue> inputs,
                                         const Params& params, const RuleContext& context) {
  const CollectiveParams& p = collective(params, context);
  if (p.permutation.size() % 2 != 0) {
    context.fail("permutation holds (source, destination) pairs, but its length is odd");
  }
  std::vector<bool> source(static_cast<size_t>(p.axis_size)), target(source.size());
  for (size_t i = 0; i < p.permutation.size(); i += 2) {
    int64_t from = p.permutation[i];
    int64_t to = p.permutation[i + 1];
    if (from < 0 || from >= p.axis_size || to < 0 || to >= p.axis_size) {
      context.fail(
          fmt::format("pair ({}, {}) names a device outside [0, {})", from, to, p.axis_size));
    }
    if (source[static_cast<size_t>(from)] || target[static_cast<size_t>(to)]) {
      context.fail(fmt::format("pair ({}, {}) repeats a source or a destination", from, to),
                   "each device sends at most once and receives at most once");
    }
    source[static_cast<size_t>(from)] = target[static_cast<size_t>(to)] = true;
  }
  return {inputs[0]};
}

std::vector<AbstractValue> axis_index_rule(std::span<const AbstractValue>, const Params& params,
                                           const RuleContext& context) {
  collective(params, context);
  return {AbstractValue(Shape{}, DType::i32)};
}

// A reduction combines axis_size values per element; every collective moves its operand
// and result once (the bytes that cross between devices are counted as they move, by
// the sharding layer: kiln::collective_traffic).
Cost reducing_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                   const Params& params) {
  Cost result = cost::moves_all(inputs, outputs);
  const auto& p = std::get<CollectiveParams>(params);
  result.flops =
      static_cast<double>(inputs[0].num_elements()) * static_cast<double>(p.axis_size - 1);
  return result;
}

Cost moving_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                 const Params&) {
  return cost::moves_all(inputs, outputs);
}

}  // namespace

void register_spmd_rules(PrimTable& table) {
  for (PrimId id : {prim::psum, prim::pmean, prim::pmax}) {
    table[id].abstract_eval = same_type_rule;
    table[id].cost = reducing_cost;
  }
  table[prim::pmean].abstract_eval = pmean_rule;
  table[prim::psum_scatter].abstract_eval = psum_scatter_rule;
  table[prim::psum_scatter].cost = reducing_cost;
  table[prim::all_gather].abstract_eval = all_gather_rule;
  table[prim::all_to_all].abstract_eval = all_to_all_rule;
  table[prim::ppermute].abstract_eval = ppermute_rule;
  table[prim::axis_index].abstract_eval = axis_index_rule;
  for (PrimId id : {prim::all_gather, prim::all_to_all, prim::ppermute, prim::axis_index}) {
    table[id].cost = moving_cost;
  }
}

}  // namespace kiln
