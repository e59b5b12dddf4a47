// The sharding rules: how each primitive runs on blocks of its operands when jit partitions
// a program over a mesh (JitOptions::in_shardings, src/sharding/spmd_partitioner.cc). A
// rule keeps what splits cheaply (elementwise ops, the free and batch dimensions of a
// contraction, the dimensions a reduction keeps, transposes, reshapes of leading
// dimensions) and asks for whole operands where splitting would change the meaning (an
// index, a window, a sort, control flow); the partitioner gathers what a rule wants whole.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "prims/ids/contract.h"
#include "prims/ids/custom.h"
#include "prims/ids/reduce.h"
#include "prims/ids/shape.h"
#include "prims/ids/sort.h"
#include "prims/registry.h"

namespace kiln {
namespace {

using AxisList = std::vector<std::string>;

ShardingSpec whole(int64_t rank) {
  return ShardingSpec(std::vector<AxisList>(static_cast<size_t>(rank)));
}

size_t rank_of(const Shape& shape) {
  return static_cast<size_t>(shape.rank());
}

// The spec of `aval` with one entry per dimension (a spec may leave trailing ones out).
ShardingSpec full_spec(const AbstractValue& aval) {
  return spmd::full_rank(aval.sharding, aval.shape.rank());
}

size_t split_count(const ShardingSpec& spec) {
  size_t count = 0;
  for (const AxisList& axes : spec.dims) count += axes.size();
  return count;
}

// Every operand and result whole: the primitive runs on every device as it would on one.
ShardingDecision whole_decision(const ShardingArgs& args) {
  ShardingDecision decision;
  for (const AbstractValue& input : args.inputs)
    decision.operands.push_back(whole(input.shape.rank()));
  for (const AbstractValue& output : args.outputs)
    decision.results.push_back(whole(output.shape.rank()));
  return decision;
}

// A one-operand layout rule's answer: the split its operand must have, its result's split,
// and (where the params name shapes) the params its blocks run with.
ShardingDecision one_operand_decision(ShardingSpec operand, ShardingSpec result,
                                      std::optional<Params> block_params = std::nullopt) {
  ShardingDecision decision;
  decision.operands = {std::move(operand)};
  decision.results = {std::move(result)};
  decision.block_params = std::move(block_params);
  return decision;
}

// Result i is operand i (stop_gradient, the remat markers, optimization_barrier).
ShardingDecision identity_decision(const ShardingArgs& args) {
  ShardingDecision decision;
  for (const AbstractValue& input : args.inputs) decision.operands.push_back(full_spec(input));
  decision.results = decision.operands;
  return decision;
}

// Operands broadcast (rank 0, or size 1 along a dimension); the result takes the split of
// the most-split operand of the result's rank, and every operand follows it where its size
// is the result's.
ShardingDecision elementwise_decision(const ShardingArgs& args) {
  const Shape& out = args.outputs[0].shape;
  ShardingSpec chosen = whole(out.rank());
  size_t most = 0;
  for (const AbstractValue& input : args.inputs) {
    if (input.shape.rank() != out.rank()) continue;
    ShardingSpec spec = full_spec(input);
    for (size_t d = 0; d < rank_of(out); ++d) {
      if (input.shape[d] != out[d]) spec.dims[d].clear();
    }
    if (split_count(spec) > most) {
      most = split_count(spec);
      chosen = spec;
    }
  }
  ShardingDecision decision;
  for (const AbstractValue& input : args.inputs) {
    ShardingSpec spec = whole(input.shape.rank());
    if (input.shape.rank() == out.rank()) {
      for (size_t d = 0; d < rank_of(out); ++d) {
        if (input.shape[d] == out[d]) spec.dims[d] = chosen.dims[d];
      }
    }
    decision.operands.push_back(spec);
  }
  decision.results.assign(args.outputs.size(), chosen);
  return decision;
}

bool reduced(const Dims& axes, size_t d) {
  return std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
}

ShardingSpec without_dims(const ShardingSpec& spec, const Dims& axes) {
  ShardingSpec kept = whole(0);
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    if (!reduced(axes, d)) kept.dims.push_back(spec.dims[d]);
  }
  return kept;
}

// reduce_sum: a split reduced dimension needs no exchange here: each device sums its block,
// and the result is a partial sum over that dimension's axes (the partitioner adds the terms
// where a consumer needs the value, or lets a linear consumer work on the terms).
ShardingDecision reduce_sum_decision(const ShardingArgs& args) {
  const Dims& axes = std::get<ReduceParams>(args.params).axes;
  ShardingSpec spec = full_spec(args.inputs[0]);
  ShardingDecision decision;
  decision.operands.push_back(spec);
  decision.results.push_back(without_dims(spec, axes));
  for (int64_t axis : axes) {
    for (const std::string& name : spec.dims[static_cast<size_t>(axis)]) {
      decision.partial_sum_axes.push_back(name);
    }
  }
  return decision;
}

// The other reductions are not sums of terms: the reduced dimensions are made whole.
ShardingDecision whole_axes_decision(const ShardingArgs& args, const Dims& axes, bool keeps_rank) {
  ShardingSpec spec = full_spec(args.inputs[0]);
  for (int64_t axis : axes) spec.dims[static_cast<size_t>(axis)].clear();
  ShardingDecision decision;
  decision.operands.push_back(spec);
  decision.results.assign(args.outputs.size(), keeps_rank ? spec : without_dims(spec, axes));
  return decision;
}

ShardingDecision reduce_whole_decision(const ShardingArgs& args) {
  return whole_axes_decision(args, std::get<ReduceParams>(args.params).axes, false);
}

ShardingDecision arg_reduce_decision(const ShardingArgs& args) {
  return whole_axes_decision(args, {std::get<ArgReduceParams>(args.params).axis}, false);
}

ShardingDecision cumsum_decision(const ShardingArgs& args) {
  return whole_axes_decision(args, {std::get<CumsumParams>(args.params).axis}, true);
}

// A sort moves elements along its dimension only: that one is made whole in every operand
// (they sort together), the others keep the first operand's split.
ShardingDecision sort_decision(const ShardingArgs& args) {
  int64_t dimension = std::get<SortParams>(args.params).dimension;
  if (dimension < 0) dimension += args.inputs[0].shape.rank();
  ShardingSpec spec = full_spec(args.inputs[0]);
  spec.dims[static_cast<size_t>(dimension)].clear();
  ShardingDecision decision;
  decision.operands.assign(args.inputs.size(), spec);
  decision.results.assign(args.outputs.size(), spec);
  return decision;
}

// Mesh axes taken so far by one contraction, so that none splits two dimensions of an
// operand or of the result.
class AxisClaims {
 public:
  bool free(const AxisList& axes) const {
    return std::none_of(axes.begin(), axes.end(),
                        [&](const std::string& axis) { return taken_.contains(axis); });
  }
  void take(const AxisList& axes) { taken_.insert(axes.begin(), axes.end()); }

 private:
  std::set<std::string> taken_;
};

// dot_general, as GSPMD would: a batch pair takes the split of whichever side is split (the
// left where both are) and both sides get it; then the free dimensions keep their split
// (the data-parallel batch, a column-split kernel); then a contracting pair takes a split
// whose axes are still free, and the result is a partial sum over them (a row-split
// kernel). A contracting split whose axes a free dimension took is gathered instead (an
// FSDP kernel, split along its input features, meeting a batch split the same way).
ShardingDecision dot_general_decision(const ShardingArgs& args) {
  const auto& p = std::get<DotGeneralParams>(args.params);
  ShardingSpec lhs = full_spec(args.inputs[0]), rhs = full_spec(args.inputs[1]);
  ShardingSpec lhs_want = whole(args.inputs[0].shape.rank());
  ShardingSpec rhs_want = whole(args.inputs[1].shape.rank());
  AxisClaims claims;
  ShardingDecision decision;
  auto agree = [&](const Dims& lhs_dims, const Dims& rhs_dims, bool contracting) {
    for (size_t i = 0; i < lhs_dims.size(); ++i) {
      auto l = static_cast<size_t>(lhs_dims[i]), r = static_cast<size_t>(rhs_dims[i]);
      const AxisList& axes = !lhs.dims[l].empty() ? lhs.dims[l] : rhs.dims[r];
      if (axes.empty() || !claims.free(axes)) continue;
      claims.take(axes);
      lhs_want.dims[l] = rhs_want.dims[r] = axes;
      if (contracting) {
        decision.partial_sum_axes.insert(decision.partial_sum_axes.end(), axes.begin(), axes.end());
      }
    }
  };
  auto keep_free = [&](const ShardingSpec& have, ShardingSpec& want, const Dims& batch,
                       const Dims& contracting) {
    for (size_t d = 0; d < have.dims.size(); ++d) {
      if (reduced(batch, d) || reduced(contracting, d)) continue;
      if (!have.dims[d].empty() && claims.free(have.dims[d])) {
        claims.take(have.dims[d]);
        want.dims[d] = have.dims[d];
      }
    }
  };
  agree(p.lhs_batch, p.rhs_batch, false);
  keep_free(lhs, lhs_want, p.lhs_batch, p.lhs_contracting);
  keep_free(rhs, rhs_want, p.rhs_batch, p.rhs_contracting);
  agree(p.lhs_contracting, p.rhs_contracting, true);
  ShardingSpec result = whole(0);
  for (int64_t d : p.lhs_batch) result.dims.push_back(lhs_want.dims[static_cast<size_t>(d)]);
  auto free_dims = [&](const ShardingSpec& want, const Dims& batch, const Dims& contracting) {
    for (size_t d = 0; d < want.dims.size(); ++d) {
      if (!reduced(batch, d) && !reduced(contracting, d)) result.dims.push_back(want.dims[d]);
    }
  };
  free_dims(lhs_want, p.lhs_batch, p.lhs_contracting);
  free_dims(rhs_want, p.rhs_batch, p.rhs_contracting);
  decision.operands = {lhs_want, rhs_want};
  decision.results = {result};
  return decision;
}

ShardingDecision transpose_decision(const ShardingArgs& args) {
  const Dims& permutation = std::get<TransposeParams>(args.params).permutation;
  ShardingSpec spec = full_spec(args.inputs[0]);
  ShardingSpec result = whole(0);
  for (int64_t d : permutation) result.dims.push_back(spec.dims[static_cast<size_t>(d)]);
  return one_operand_decision(spec, result);
}

// Operand dimension i becomes result dimension broadcast_dimensions[i] and keeps its split
// where it keeps its size; the new dimensions are whole. The blocks broadcast to the
// result's block shape.
ShardingDecision broadcast_decision(const ShardingArgs& args) {
  auto params = std::get<BroadcastInDimParams>(args.params);
  const AbstractValue& in = args.inputs[0];
  const Shape& out = args.outputs[0].shape;
  ShardingSpec spec = full_spec(in), result = whole(out.rank());
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    auto d = static_cast<size_t>(params.broadcast_dimensions[i]);
    if (in.shape[i] != out[d]) spec.dims[i].clear();
    result.dims[d] = spec.dims[i];
  }
  params.shape = spmd::block_shape(args.mesh, out, result);
  return one_operand_decision(spec, result, params);
}

// The leading dimensions a reshape leaves as they are keep their split; the dimensions it
// merges or splits are made whole (their elements move between blocks otherwise).
ShardingDecision reshape_decision(const ShardingArgs& args) {
  auto params = std::get<ReshapeParams>(args.params);
  const Shape& in = args.inputs[0].shape;
  const Shape& out = args.outputs[0].shape;
  size_t same = 0;
  while (same < rank_of(in) && same < rank_of(out) &&
         in[static_cast<int64_t>(same)] == out[static_cast<int64_t>(same)]) {
    ++same;
  }
  ShardingSpec spec = full_spec(args.inputs[0]), result = whole(out.rank());
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    if (d < same) {
      result.dims[d] = spec.dims[d];
    } else {
      spec.dims[d].clear();
    }
  }
  params.new_sizes = spmd::block_shape(args.mesh, out, result);
  return one_operand_decision(spec, result, params);
}

ShardingDecision refuse_collective(const ShardingArgs& args) {
  ShardingDecision decision = whole_decision(args);
  decision.refusal =
      "is a collective or a shard_map, which jit's in_shardings do not partition (they "
      "insert their own collectives)";
  return decision;
}

ShardingFn rule_for(const PrimDef& prim) {
  if (prim.family == Family::kSpmd) return refuse_collective;
  switch (prim.id) {
    case prim::stop_gradient:
    case prim::optimization_barrier:
    case prim::checkpoint_name:
      return identity_decision;
    case prim::broadcast_in_dim:
      return broadcast_decision;
    case prim::reshape:
      return reshape_decision;
    case prim::transpose:
      return transpose_decision;
    case prim::dot_general:
      return dot_general_decision;
    case prim::reduce_sum:
      return reduce_sum_decision;
    case prim::reduce_max:
    case prim::reduce_min:
    case prim::reduce_prod:
      return reduce_whole_decision;
    case prim::argmax:
    case prim::argmin:
      return arg_reduce_decision;
    case prim::cumsum:
      return cumsum_decision;
    case prim::sort:
      return sort_decision;
    default:
      break;
  }
  // Elementwise primitives that keep the rank (a bitcast between widths does not).
  if (prim.has_flag(kElementwise)) {
    return [](const ShardingArgs& args) {
      for (const AbstractValue& input : args.inputs) {
        if (input.shape.rank() != 0 && input.shape.rank() != args.outputs[0].shape.rank()) {
          return whole_decision(args);
        }
      }
      return elementwise_decision(args);
    };
  }
  // Indexing, windows, convolutions, slices and pads, custom_vjp and control flow.
  return whole_decision;
}

}  // namespace

void register_sharding_rules(PrimTable& table) {
  for (const PrimDef& def : table.all()) table[def.id].sharding = rule_for(def);
}

}  // namespace kiln
