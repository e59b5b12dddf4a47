// Shared helpers for the batching rules (src/transforms/batch_rules/<family>.cc). Rules
// run under the interpreter around the vmap, so they are written with ordinary ops and
// binds on the batched values.
#pragma once

#include <vector>

#include "kiln/ops.h"
#include "prims/bind.h"
#include "prims/registry.h"

namespace kiln::batch_util {

// `x` with its batch on axis `to`: moved there, or, when unbatched (dim kNotBatched),
// broadcast along a new axis of size `size` there (free until a kernel reads it).
Array batch_at(const Array& x, int64_t dim, int64_t to, int64_t size, CallSite site);

// `x` with its batch axis moved to the front; an unbatched `x` gets a new leading axis of
// size `size` (a broadcast, which costs nothing until a kernel reads it).
Array batch_first(const Array& x, int64_t dim, int64_t size, CallSite site);
// `x` with its batch axis moved to the front; unbatched values are returned unchanged.
Array move_batch_first(const Array& x, int64_t dim, CallSite site);

// One batched result on axis 0.
inline BatchResult first(Array out) {
  return BatchResult{{std::move(out)}, {0}};
}
// Every result batched on axis 0.
inline BatchResult all_first(std::vector<Array> outs) {
  std::vector<int64_t> dims(outs.size(), 0);
  return BatchResult{std::move(outs), std::move(dims)};
}

// Every operand batched on axis 0 (unbatched ones broadcast), then the primitive bound with
// params from `params_for` applied to the per-example params. For primitives whose
// batched form is the same primitive with the example axes shifted by one.
std::vector<Array> all_batched_first(const BatchArgs& args);

// Axis `axis` of one example, as an axis of the operand that carries the batch on `dim`
// (an operand that is not batched keeps its axes).
inline int64_t batched_axis(int64_t axis, int64_t dim) {
  return dim != kNotBatched && axis >= dim ? axis + 1 : axis;
}

// `x` with axes `axis` and `axis + 1` merged into one (a reshape: no copy of contiguous data).
Array merge_axes(const Array& x, int64_t axis, CallSite site);
// `x` with axis `axis` split into two of sizes `outer` and `inner` (which multiply to its
// size; given both, so that empty axes split unambiguously).
Array split_axis(const Array& x, int64_t axis, int64_t outer, int64_t inner, CallSite site);

// Axes of one example shifted past a new leading batch axis.
Dims shift_axes(const Dims& axes);

// The batched result computed example by example and stacked on axis 0: correct for any
// primitive, but it runs `size` separate kernels. Rules use it only for rare operand
// combinations, and say so.
BatchResult loop_over_examples(PrimId prim, const BatchArgs& args);

}  // namespace kiln::batch_util
