// The batching rule of the elementwise primitives (every primitive flagged kElementwise:
// unary, binary, select, conversions, and threefry2x32, which broadcasts like them). Operands of
// one example have equal rank or rank 0, so the batch goes first and unbatched operands get a
// size-1 leading axis: the primitive's own broadcasting then pairs every example with the shared
// values, and no operand is copied.
#include "prims/ids/all.h"
#include "transforms/batch_rules/batch_rules.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln {
namespace {

using batch_util::move_batch_first;

BatchResult batch_elementwise(PrimId prim, const BatchArgs& args) {
  int64_t example_rank = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    int64_t rank = args.inputs[i].rank() - (args.dims[i] == kNotBatched ? 0 : 1);
    example_rank = std::max(example_rank, rank);
  }
  std::vector<Array> operands;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const Array& x = args.inputs[i];
    if (args.dims[i] == kNotBatched) {
      // Rank 0 broadcasts against anything; otherwise a size-1 batch axis.
      operands.push_back(x.rank() == 0 ? x : expand_dims(x, 0, args.site));
      continue;
    }
    Array first = move_batch_first(x, args.dims[i], args.site);
    if (first.rank() == 1 && example_rank > 0) {
      // A scalar per example next to arrays: [B] -> [B, 1, ..., 1].
      Dims sizes(static_cast<size_t>(example_rank + 1), 1);
      sizes[0] = args.size;
      first = reshape(first, Shape(sizes), args.site);
    }
    operands.push_back(std::move(first));
  }
  std::vector<Array> outs = bind(prim, operands, args.params, args.site);
  return batch_util::all_first(std::move(outs));
}

template <PrimId kPrim>
BatchResult rule(const BatchArgs& args) {
  return batch_elementwise(kPrim, args);
}

// One instantiation per primitive of the list (BatchFn carries no primitive id); only the
// elementwise ones are ever registered.
struct ElementwiseRule {
  PrimId prim;
  BatchFn rule;
};
constexpr ElementwiseRule kRules[] = {
#define KILN_PRIM(id, name, arity, params, flags) {prim::id, rule<prim::id>},
#include "prims/ids/all.def"
#undef KILN_PRIM
};

}  // namespace

// Every primitive flagged kElementwise in prims/ids/all.def (unary, binary, select, the
// conversions, threefry2x32) batches with the rule above unless it registers its own.
void register_batch_elementwise(PrimTable& table) {
  for (const ElementwiseRule& rule : kRules) {
    PrimDef& entry = table[rule.prim];
    if (entry.has_flag(kElementwise) && entry.batch == nullptr) entry.batch = rule.rule;
  }
}

}  // namespace kiln
