// Batching rules of the window family: reduce_window_max, reduce_window_sum and
// select_and_scatter_add. The batch axis gets a window of its own (size 1, stride 1, no
// padding), so each example is pooled on its own, and it stays where it is: no transpose,
// and the result keeps the batch on the same axis. Where the axis after it has a window of
// its own too (an image's N axis: vmap of a pooling layer over examples), the two merge
// into one, so that a batched NHWC pooling is an NHWC pooling of more images (the shape
// the fast kernels take) rather than a rank-5 one.
#include "prims/ids/window.h"
#include "prims/bind.h"
#include "transforms/batch_rules/batch_rules.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln {
namespace {

// Whether the operand's axis `axis` (before batching) is pooled one element at a time.
bool single_window(const ReduceWindowParams& p, int64_t axis) {
  auto at = static_cast<size_t>(axis);
  return axis < static_cast<int64_t>(p.window_dimensions.size()) && p.window_dimensions[at] == 1 &&
         p.window_strides[at] == 1 && p.padding_low[at] == 0 && p.padding_high[at] == 0;
}

template <PrimId kPrim>
BatchResult window_rule(const BatchArgs& args) {
  int64_t dim = args.dims[0];
  auto at = static_cast<size_t>(dim);
  ReduceWindowParams p = std::get<ReduceWindowParams>(args.params);
  if (args.size > 0 && single_window(p, dim)) {
    const int64_t examples_axis = args.inputs[0].dim(dim + 1);
    Array out =
        bind1(kPrim, {batch_util::merge_axes(args.inputs[0], dim, args.site)}, p, args.site);
    return BatchResult{{batch_util::split_axis(out, dim, args.size, examples_axis, args.site)},
                       {dim}};
  }
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
  Array source = batch_util::batch_at(args.inputs[0], args.dims[0], dim, args.size, args.site);
  Array operand = batch_util::batch_at(args.inputs[1], args.dims[1], dim, args.size, args.site);
  if (args.size > 0 && single_window(p, dim)) {
    Array out = bind1(prim::select_and_scatter_add,
                      {batch_util::merge_axes(source, dim, args.site),
                       batch_util::merge_axes(operand, dim, args.site)},
                      p, args.site);
    return BatchResult{
        {batch_util::split_axis(out, dim, args.size, operand.dim(dim + 1), args.site)}, {dim}};
  }
  p.window_dimensions.insert_at(at, 1);
  p.window_strides.insert_at(at, 1);
  p.padding_low.insert_at(at, 0);
  p.padding_high.insert_at(at, 0);
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
