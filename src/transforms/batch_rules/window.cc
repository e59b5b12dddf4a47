// Batching rules of the window family: reduce_window_max, reduce_window_sum and
// select_and_scatter_add. The batch axis gets a window of its own (size 1, stride 1, no
// padding), so each example is pooled on its own, and it stays where it is: no transpose,
// and the result keeps the batch on the same axis.
#include "prims/ids/window.h"
#include "prims/bind.h"
#include "transforms/batch_rules/batch_rules.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln {
namespace {

template <PrimId kPrim>
BatchResult window_rule(const BatchArgs& args) {
  int64_t dim = args.dims[0];
  auto at = static_cast<size_t>(dim);
  ReduceWindowParams p = std::get<ReduceWindowParams>(args.params);
  p.window_dimensions.insert_at(at, 1);
  p.window_strides.insert_at(at, 1);
  p.padding_low.insert_at(at, 0);
  p.padding_high.insert_at(at, 0);
  Array out = bind1(kPrim, {args.inputs[0]}, p, args.site);
  return BatchResult{{std::move(out)}, {dim}};
}

// select_and_scatter_add(source, operand): both operands get their batch on one axis (the
// operand's, else the source's; an unbatched one is broadcast), which becomes a window-1
// axis as above.
BatchResult select_and_scatter_add_rule(const BatchArgs& args) {
  int64_t dim = args.dims[1] != kNotBatched ? args.dims[1] : args.dims[0];
  auto at = static_cast<size_t>(dim);
  ReduceWindowParams p = std::get<ReduceWindowParams>(args.params);
  p.window_dimensions.insert_at(at, 1);
  p.window_strides.insert_at(at, 1);
  p.padding_low.insert_at(at, 0);
  p.padding_high.insert_at(at, 0);
  Array source = batch_util::batch_at(args.inputs[0], args.dims[0], dim, args.size, args.site);
  Array operand = batch_util::batch_at(args.inputs[1], args.dims[1], dim, args.size, args.site);
  Array out = bind1(prim::select_and_scatter_add, {source, operand}, p, args.site);
  return BatchResult{{std::move(out)}, {dim}};
}

}  // namespace

void register_batch_window(PrimTable& table) {
  table[prim::reduce_window_max].batch = window_rule<prim::reduce_window_max>;
  table[prim::reduce_window_sum].batch = window_rule<prim::reduce_window_sum>;
  table[prim::select_and_scatter_add].batch = select_and_scatter_add_rule;
}

}  // namespace kiln
