// Batching rules of the window family: reduce_window_max and reduce_window_sum. The batch
// axis gets a window of its own (size 1, stride 1, no padding), so each example is pooled
// on its own, and it stays where it is: no transpose, and the result keeps the batch on the
// same axis.
#include "prims/bind.h"
#include "transforms/batch_rules/batch_rules.h"

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

}  // namespace

void register_batch_window(PrimTable& table) {
  table[PrimId::reduce_window_max].batch = window_rule<PrimId::reduce_window_max>;
  table[PrimId::reduce_window_sum].batch = window_rule<PrimId::reduce_window_sum>;
}

}  // namespace kiln
