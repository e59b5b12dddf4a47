// Batching rules of the index primitives: gather, scatter, scatter_add (take along one
// axis, with leading batch_dims shared by operand and indices; see GatherParams). Every
// combination stays one primitive call:
//   - indices shared, operand batched off the batch_dims: the batch is one more ordinary
//     operand axis (before or after the indexed one) and nothing moves;
//   - indices batched, operand shared: the batch is one more indices axis;
//   - both batched (or a batch inside the batch_dims): the batch becomes one more
//     batch_dims axis, placed on the same axis (<= batch_dims) in both.
// Indices are resolved element by element, so modes clip, fill and error behave as per
// example, and the scatters apply each example's updates in the example's order.
#include <algorithm>

#include "prims/ids/index.h"
#include "transforms/batch_rules/batch_rules.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln {
namespace {

using batch_util::batch_at;

// One example's indexing geometry.
struct Geometry {
  int64_t axis;
  int64_t batch_dims;
  int64_t index_rank;  // of one example's indices
  // Where an operand batched on `d` (>= batch_dims, shared indices) has its batch in
  // gather's output: before the indexed axis it stays put, after it the index axes
  // replace the indexed one.
  int64_t output_dim(int64_t d) const { return d <= axis ? d : d - 1 + index_rank - batch_dims; }
};

// The batch as one more batch_dims axis at `t` (<= batch_dims) of operand and indices.
int64_t joint_batch_axis(int64_t d_operand, int64_t d_indices, int64_t batch_dims) {
  if (d_operand != kNotBatched && d_operand <= batch_dims) return d_operand;
  if (d_indices != kNotBatched) return std::min(d_indices, batch_dims);
  return batch_dims;
}

BatchResult gather_rule(const BatchArgs& args) {
  const auto& p = std::get<GatherParams>(args.params);
  const Array& operand = args.inputs[0];
  const Array& indices = args.inputs[1];
  int64_t d = args.dims[0], e = args.dims[1];
  CallSite site = args.site;
  if (e == kNotBatched && d >= p.batch_dims) {
    Geometry g{p.axis, p.batch_dims, indices.rank()};
    GatherParams batched{p.axis + (d <= p.axis ? 1 : 0), p.batch_dims, p.mode};
    Array out = bind1(prim::gather, {operand, indices}, batched, site);
    return BatchResult{{out}, {g.output_dim(d)}};
  }
  if (d == kNotBatched) {
    // Within the batch_dims the batch would break their pairing with the operand's, so
    // it moves just past them (a transpose of the indices, not of the operand).
    Array moved = batch_at(indices, e, std::max(e, p.batch_dims), args.size, site);
    Array out = bind1(prim::gather, {operand, moved}, p, site);
    return BatchResult{{out}, {p.axis + std::max(e, p.batch_dims) - p.batch_dims}};
  }
  int64_t t = joint_batch_axis(d, e, p.batch_dims);
  GatherParams batched{p.axis + 1, p.batch_dims + 1, p.mode};
  Array out =
      bind1(prim::gather,
            {batch_at(operand, d, t, args.size, site), batch_at(indices, e, t, args.size, site)},
            batched, site);
  return BatchResult{{out}, {t}};
}

// The operand's batch axis for shared indices when only the updates are batched (on
// `du`): the one whose gather-output position is du, so the updates need not move; past
// the batch_dims only, and not among the index axes (which have no operand axis).
int64_t operand_dim_for_updates(const Geometry& g, int64_t du) {
  if (du < g.batch_dims) return du;  // joined to the batch_dims below
  if (du <= g.axis) return du;
  int64_t index_axes = g.index_rank - g.batch_dims;
  if (du >= g.axis + index_axes) return du + 1 - index_axes;
  return g.batch_dims;
}

template <PrimId kPrim>
BatchResult scatter_rule(const BatchArgs& args) {
  const auto& p = std::get<ScatterParams>(args.params);
  const Array& operand = args.inputs[0];
  const Array& indices = args.inputs[1];
  const Array& updates = args.inputs[2];
  int64_t d = args.dims[0], e = args.dims[1], du = args.dims[2];
  CallSite site = args.site;
  if (e == kNotBatched) {
    Geometry g{p.axis, p.batch_dims, indices.rank()};
    // The result holds a copy of a shared operand per example anyway.
    int64_t to = d != kNotBatched ? d : operand_dim_for_updates(g, du);
    if (to >= p.batch_dims) {
      ScatterParams batched{p.axis + (to <= p.axis ? 1 : 0), p.batch_dims, p.mode};
      Array out = bind1(kPrim,
                        {batch_at(operand, d, to, args.size, site), indices,
                         batch_at(updates, du, g.output_dim(to), args.size, site)},
                        batched, site);
      return BatchResult{{out}, {to}};
    }
  }
  int64_t t = joint_batch_axis(d, e, p.batch_dims);
  if (d == kNotBatched && e == kNotBatched) t = std::min(du, p.batch_dims);
  ScatterParams batched{p.axis + 1, p.batch_dims + 1, p.mode};
  Array out =
      bind1(kPrim,
            {batch_at(operand, d, t, args.size, site), batch_at(indices, e, t, args.size, site),
             batch_at(updates, du, t, args.size, site)},
            batched, site);
  return BatchResult{{out}, {t}};
}

}  // namespace

void register_batch_index(PrimTable& table) {
  table[prim::gather].batch = gather_rule;
  table[prim::scatter].batch = scatter_rule<prim::scatter>;
  table[prim::scatter_add].batch = scatter_rule<prim::scatter_add>;
}

}  // namespace kiln
