// VJP rules of the index family. gather and scatter_add are each other's transpose (same
// axis, batch_dims and mode, so clipped indices land where they were read and dropped
// ones stay dropped). scatter's rule must know which update won each written position
// when indices repeat (the last one): it scatters the updates' ids and reads them back.
// Index operands are integers and get no cotangent.
#include <cstdint>

#include "prims/bind.h"
#include "prims/ids/index.h"
#include "transforms/vjp_rules/vjp_rules.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

Array gather_with(const Array& x, const Array& indices, const ScatterParams& p, CallSite site) {
  return bind1(prim::gather, {x, indices}, GatherParams{p.axis, p.batch_dims, p.mode}, site);
}

std::vector<Array> gather_vjp(const VjpArgs& args) {
  const auto& p = std::get<GatherParams>(args.params);
  std::vector<Array> cts = vjp_util::none(args);
  if (args.wanted[0]) {
    cts[0] = bind1(prim::scatter_add,
                   {zeros_like(args.inputs[0], args.site), args.inputs[1],
                    vjp_util::cotangent_or_zeros(args, 0)},
                   ScatterParams{p.axis, p.batch_dims, p.mode}, args.site);
  }
  return cts;
}

std::vector<Array> scatter_add_vjp(const VjpArgs& args) {
  const auto& p = std::get<ScatterParams>(args.params);
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  std::vector<Array> cts = vjp_util::none(args);
  if (args.wanted[0]) cts[0] = g;
  if (args.wanted[2]) cts[2] = gather_with(g, args.inputs[1], p, args.site);
  return cts;
}

// Each update gets an id (1, 2, ...; 0 means "not written"). Scattering the ids with the
// same params leaves, at every written position, the id of the update that won it. The
// operand's cotangent is zero at written positions; an update's is the cotangent at its
// position if it won, else zero (a dropped update in mode fill reads back 0, never its id).
std::vector<Array> scatter_vjp(const VjpArgs& args) {
  const auto& p = std::get<ScatterParams>(args.params);
  const Array& operand = args.inputs[0];
  const Array& indices = args.inputs[1];
  const Array& updates = args.inputs[2];
  CallSite site = args.site;
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  Device* device = device_of(updates);
  // i32 ids where they fit: the id array is as large as the operand.
  DType id_dtype = updates.size() < INT32_MAX ? DType::i32 : DType::i64;
  Array ids = add(iota(Shape{updates.size()}, id_dtype, 0, device, site),
                  scalar(1, id_dtype, device, site), site);
  ids = reshape(ids, updates.shape(), site);
  Array winners =
      bind1(prim::scatter, {zeros(operand.shape(), id_dtype, device, site), indices, ids}, p, site);
  std::vector<Array> cts = vjp_util::none(args);
  if (args.wanted[0]) {
    Array written = not_equal(winners, scalar(0, id_dtype, device, site), site);
    cts[0] = where(written, zeros_like(g, site), g, site);
  }
  if (args.wanted[2]) {
    Array won = equal(gather_with(winners, indices, p, site), ids, site);
    Array picked = gather_with(g, indices, p, site);
    cts[2] = where(won, picked, zeros_like(picked, site), site);
  }
  return cts;
}

}  // namespace

void register_vjp_index(PrimTable& table) {
  table[prim::gather].vjp = gather_vjp;
  table[prim::scatter].vjp = scatter_vjp;
  table[prim::scatter_add].vjp = scatter_add_vjp;
}

}  // namespace kiln
