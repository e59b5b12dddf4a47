// Batching rule of sort: its operands share one shape, so they all get the batch on one
// axis (the first batched operand's, so that one is not moved) and the sort dimension
// shifts past it. Each line along the dimension belongs to one example, so the batched
// sort orders exactly the lines each example would.
#include "prims/ids/sort.h"
#include "base/check.h"
#include "transforms/batch_rules/batch_rules.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln {
namespace {

using batch_util::batch_at;

// Unbatched operands are broadcast: each example's copy is reordered by that example's
// keys. (With every key shared, one shared permutation and a take of the batched values
// would avoid sorting a copy of the keys per example; kiln's one-axis gather cannot take
// along a middle axis without transposes, so the copy keeps this rule one primitive.)
BatchResult sort_rule(const BatchArgs& args) {
  const auto& p = std::get<SortParams>(args.params);
  int64_t d = kNotBatched;
  size_t from = 0;
  for (size_t i = 0; i < args.dims.size() && d == kNotBatched; ++i) {
    d = args.dims[i];
    from = i;
  }
  KILN_CHECK(d != kNotBatched, "sort: a batching rule ran without a batched operand");
  // The primitive accepts a negative dimension (counted from the end of one example).
  int64_t example_rank = args.inputs[from].rank() - 1;
  int64_t dimension = p.dimension < 0 ? p.dimension + example_rank : p.dimension;
  std::vector<Array> operands;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    operands.push_back(batch_at(args.inputs[i], args.dims[i], d, args.size, args.site));
  }
  SortParams batched{dimension < d ? dimension : dimension + 1, p.num_keys};
  std::vector<Array> outs = bind(prim::sort, operands, batched, args.site);
  std::vector<int64_t> dims(outs.size(), d);
  return BatchResult{std::move(outs), std::move(dims)};
}

}  // namespace

void register_batch_sort(PrimTable& table) {
  table[prim::sort].batch = sort_rule;
}

}  // namespace kiln
