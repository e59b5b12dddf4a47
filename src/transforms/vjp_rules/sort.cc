// The VJP rule of sort: each sorted operand is its input permuted along the sorted
// dimension, so its cotangent goes back through the inverse permutation. The permutation
// is recomputed by sorting the same keys together with each element's position (the sort
// is stable, so ties land as they did), and inverted by sorting it with the positions once
// more. Key operands get the same cotangent as any other: a sort is piecewise a
// permutation, as jax.lax.sort's rule has it.
#include <vector>

#include "kiln/device.h"
#include "prims/bind.h"
#include "prims/ids/sort.h"
#include "transforms/vjp_rules/vjp_rules.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

std::vector<Array> sort_vjp(const VjpArgs& args) {
  const auto& p = std::get<SortParams>(args.params);
  const Array& first = args.inputs[0];
  int64_t axis = p.dimension < 0 ? p.dimension + first.rank() : p.dimension;
  CallSite site = args.site;
  Array position = iota(first.shape(), DType::i32, axis, device_of(first), site);
  std::vector<Array> keyed(args.inputs.begin(), args.inputs.begin() + p.num_keys);
  keyed.push_back(position);
  Array permutation = bind(prim::sort, keyed, SortParams{axis, p.num_keys}, site).back();
  std::vector<Array> inverting = {permutation, position};
  Array inverse = bind(prim::sort, inverting, SortParams{axis, 1}, site).back();
  std::vector<Array> cts = vjp_util::none(args);
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (args.wanted[i]) {
      cts[i] = take_along_axis(vjp_util::cotangent_or_zeros(args, i), inverse, axis, site);
    }
  }
  return cts;
}

}  // namespace

void register_vjp_sort(PrimTable& table) {
  table[prim::sort].vjp = sort_vjp;
}

}  // namespace kiln
