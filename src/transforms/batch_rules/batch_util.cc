// Shared helpers for the batching rules (see batch_util.h).
#include "transforms/batch_rules/batch_util.h"

#include "kiln/array_functions.h"

namespace kiln::batch_util {

Array batch_at(const Array& x, int64_t dim, int64_t to, int64_t size, CallSite site) {
  if (dim == kNotBatched) {
    Dims sizes = x.shape().dims();
    sizes.insert_at(static_cast<size_t>(to), size);
    Dims kept;
    for (int64_t d = 0; d < x.rank(); ++d) kept.push_back(d < to ? d : d + 1);
    return broadcast_in_dim(x, Shape(sizes), kept, site);
  }
  if (dim == to) return x;
  return moveaxis(x, dim, to, site);
}

Array move_batch_first(const Array& x, int64_t dim, CallSite site) {
  return dim == kNotBatched ? x : batch_at(x, dim, 0, 0, site);
}

Array batch_first(const Array& x, int64_t dim, int64_t size, CallSite site) {
  return batch_at(x, dim, 0, size, site);
}

std::vector<Array> all_batched_first(const BatchArgs& args) {
  std::vector<Array> out;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    out.push_back(batch_first(args.inputs[i], args.dims[i], args.size, args.site));
  }
  return out;
}

Dims shift_axes(const Dims& axes) {
  Dims shifted;
  for (int64_t axis : axes) shifted.push_back(axis + 1);
  return shifted;
}

BatchResult loop_over_examples(PrimId prim, const BatchArgs& args) {
  std::vector<AbstractValue> example_avals;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    AbstractValue aval = args.inputs[i].aval();
    if (args.dims[i] != kNotBatched) {
      aval.shape.dims().erase_at(static_cast<size_t>(args.dims[i]));
    }
    example_avals.push_back(aval);
  }
  std::vector<AbstractValue> out_avals = abstract_eval(prim, example_avals, args.params, args.site);
  std::vector<std::vector<Array>> per_output(out_avals.size());
  for (int64_t b = 0; b < args.size; ++b) {
    std::vector<Array> example;
    for (size_t i = 0; i < args.inputs.size(); ++i) {
      const Array& x = args.inputs[i];
      int64_t dim = args.dims[i];
      if (dim == kNotBatched) {
        example.push_back(x);
        continue;
      }
      Dims start(static_cast<size_t>(x.rank()), 0);
      Dims limit = x.shape().dims();
      start[static_cast<size_t>(dim)] = b;
      limit[static_cast<size_t>(dim)] = b + 1;
      example.push_back(squeeze(slice(x, start, limit, {}, args.site), {dim}, args.site));
    }
    std::vector<Array> outs = bind(prim, example, args.params, args.site);
    for (size_t k = 0; k < outs.size(); ++k) per_output[k].push_back(std::move(outs[k]));
  }
  std::vector<Array> stacked;
  for (size_t k = 0; k < out_avals.size(); ++k) {
    if (args.size == 0) {
      Dims sizes = out_avals[k].shape.dims();
      sizes.insert_at(0, 0);
      stacked.push_back(zeros(Shape(sizes), out_avals[k].dtype, nullptr, args.site));
    } else {
      stacked.push_back(stack(per_output[k], 0, args.site));
    }
  }
  return all_first(std::move(stacked));
}

Array merge_axes(const Array& x, int64_t axis, CallSite site) {
  Dims sizes = x.shape().dims();
  auto at = static_cast<size_t>(axis);
  sizes[at] *= sizes[at + 1];
  sizes.erase_at(at + 1);
  return reshape(x, Shape(sizes), site);
}

Array split_axis(const Array& x, int64_t axis, int64_t outer, int64_t inner, CallSite site) {
  Dims sizes = x.shape().dims();
  auto at = static_cast<size_t>(axis);
  sizes[at] = outer;
  sizes.insert_at(at + 1, inner);
  return reshape(x, Shape(sizes), site);
}

}  // namespace kiln::batch_util
