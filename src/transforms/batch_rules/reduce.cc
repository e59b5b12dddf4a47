// Batching rules of the reduce family: reduce_sum/max/min/prod, argmax/argmin, cumsum.
// Each is the same primitive on the batched operand with its example axes renumbered
// around the batch axis, which stays where it is: no transpose, and the result keeps the
// batch on the axis it lands on once the reduced axes are gone.
#include <algorithm>

#include "prims/bind.h"
#include "prims/ids/reduce.h"
#include "transforms/batch_rules/batch_rules.h"

namespace kiln {
namespace {

// Where the batch axis `dim` ends up once the (batched) axes `removed` are reduced away.
int64_t batch_after_removing(int64_t dim, const Dims& removed) {
  auto before = std::count_if(removed.begin(), removed.end(), [&](int64_t a) { return a < dim; });
  return dim - static_cast<int64_t>(before);
}

template <PrimId kPrim>
BatchResult reduce_rule(const BatchArgs& args) {
  int64_t dim = args.dims[0];
  ReduceParams p = std::get<ReduceParams>(args.params);
  // Sorted example axes stay sorted after the shift, as the primitive requires.
  for (int64_t& axis : p.axes) axis = batch_util::batched_axis(axis, dim);
  Array out = bind1(kPrim, {args.inputs[0]}, p, args.site);
  return BatchResult{{std::move(out)}, {batch_after_removing(dim, p.axes)}};
}

template <PrimId kPrim>
BatchResult arg_reduce_rule(const BatchArgs& args) {
  int64_t dim = args.dims[0];
  ArgReduceParams p = std::get<ArgReduceParams>(args.params);
  p.axis = batch_util::batched_axis(p.axis, dim);
  Array out = bind1(kPrim, {args.inputs[0]}, p, args.site);
  return BatchResult{{std::move(out)}, {batch_after_removing(dim, Dims{p.axis})}};
}

// cumsum keeps every axis, so the batch stays on its axis.
BatchResult cumsum_rule(const BatchArgs& args) {
  int64_t dim = args.dims[0];
  CumsumParams p = std::get<CumsumParams>(args.params);
  p.axis = batch_util::batched_axis(p.axis, dim);
  Array out = bind1(prim::cumsum, {args.inputs[0]}, p, args.site);
  return BatchResult{{std::move(out)}, {dim}};
}

}  // namespace

void register_batch_reduce(PrimTable& table) {
  table[prim::reduce_sum].batch = reduce_rule<prim::reduce_sum>;
  table[prim::reduce_max].batch = reduce_rule<prim::reduce_max>;
  table[prim::reduce_min].batch = reduce_rule<prim::reduce_min>;
  table[prim::reduce_prod].batch = reduce_rule<prim::reduce_prod>;
  table[prim::argmax].batch = arg_reduce_rule<prim::argmax>;
  table[prim::argmin].batch = arg_reduce_rule<prim::argmin>;
  table[prim::cumsum].batch = cumsum_rule;
}

}  // namespace kiln
