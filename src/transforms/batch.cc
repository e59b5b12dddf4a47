// BatchTrace (see batch.h) and the flat vmap the public front-end calls.
#include "transforms/batch.h"

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/ops.h"
#include "kiln/vmap.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln {

BatchTrace::BatchTrace(int64_t size)
    : parent_(&current_interpreter()), size_(size), self_(std::make_shared<Interpreter*>(this)) {}

BatchTrace::~BatchTrace() {
  *self_ = nullptr;
}

void BatchTrace::finish() {
  *self_ = nullptr;
}

Array BatchTrace::wrap(Array value, int64_t dim) {
  Shape example = value.shape();
  example.dims().erase_at(static_cast<size_t>(dim));
  AbstractValue aval{example, value.dtype(), value.weak_type()};
  return Array(std::make_shared<BatchTracer>(std::move(aval), self_, std::move(value), dim));
}

std::pair<Array, int64_t> BatchTrace::unwrap(const Array& value, CallSite site) const {
  if (const auto* own = dynamic_cast<const TransformValue*>(value.impl())) {
    if (own->owner() == nullptr) fail_escaped_value(value.aval(), site);
    if (own->owner() == this) {
      const auto* batched = static_cast<const BatchTracer*>(own);
      return {batched->value(), batched->dim()};
    }
  }
  return {value, kNotBatched};
}

std::vector<Array> BatchTrace::apply(const PrimDef& prim, std::span<const Array> inputs,
                                     const Params& params, std::vector<AbstractValue> out_avals,
                                     CallSite site) {
  std::vector<Array> values;
  std::vector<int64_t> dims;
  bool any_batched = false;
  for (const Array& input : inputs) {
    auto [value, dim] = unwrap(input, site);
    any_batched = any_batched || dim != kNotBatched;
    values.push_back(std::move(value));
    dims.push_back(dim);
  }
  // Values that are the same for every example need no batching rule.
  if (!any_batched) return parent_->apply(prim, inputs, params, std::move(out_avals), site);
  KILN_CHECK(prim.batch != nullptr, "{} has no batching rule", prim.name);
  BatchResult result;
  {
    InterpreterScope scope(*parent_);
    result = prim.batch(BatchArgs{values, dims, params, site, size_});
  }
  KILN_CHECK(result.outputs.size() == out_avals.size() && result.dims.size() == out_avals.size(),
             "{}: batching rule returned {} results for {}", prim.name, result.outputs.size(),
             out_avals.size());
  std::vector<Array> outputs;
  for (size_t i = 0; i < out_avals.size(); ++i) {
    Array& out = result.outputs[i];
    int64_t dim = result.dims[i];
    if (dim == kNotBatched) {
      KILN_CHECK(out.shape() == out_avals[i].shape && out.dtype() == out_avals[i].dtype,
                 "{}: batching rule gave {} for unbatched result {}", prim.name,
                 out.aval().to_string(), out_avals[i].to_string());
      outputs.push_back(std::move(out));
      continue;
    }
    KILN_CHECK(dim >= 0 && dim < out.rank() && out.shape()[dim] == size_, "{}: batch axis {} of {}",
               prim.name, dim, out.aval().to_string());
    Shape example = out.shape();
    example.dims().erase_at(static_cast<size_t>(dim));
    KILN_CHECK(example == out_avals[i].shape && out.dtype() == out_avals[i].dtype,
               "{}: batching rule gave {} batched on axis {} for result {}", prim.name,
               out.aval().to_string(), dim, out_avals[i].to_string());
    outputs.push_back(
        Array(std::make_shared<BatchTracer>(std::move(out_avals[i]), self_, std::move(out), dim)));
  }
  return outputs;
}

namespace detail {

void fail_axes_count(std::string_view which, size_t given, size_t expected, std::string_view what,
                     CallSite site) {
  fail(site,
       fmt::format("vmap: {} has {} entries, but the function has {} {}", which, given, expected,
                   what),
       fmt::format("give one {} entry per {} (kiln::kNotMapped for those not mapped), or none "
                   "to map axis 0 of all",
                   which, what == "arguments" ? "argument" : "result"));
}

void fail_static_mapped(size_t argnum, CallSite site) {
  fail(site,
       fmt::format("vmap: in_axes maps argument {}, which is static (not an Array or a pytree of "
                   "them)",
                   argnum),
       "static arguments are the same for every example: give them kiln::kNotMapped");
}

BatchedOutputs vmap_flat(const FlatFunction& fn, std::span<const Array> inputs,
                         std::span<const std::optional<int64_t>> in_axes,
                         std::span<const std::string> input_names, CallSite site) {
  KILN_CHECK(in_axes.size() == inputs.size() && input_names.size() == inputs.size(),
             "vmap_flat: {} inputs, {} axes, {} names", inputs.size(), in_axes.size(),
             input_names.size());
  // The batch size: every mapped input must agree.
  int64_t size = -1;
  size_t size_from = 0;
  std::vector<int64_t> axes(inputs.size(), kNotBatched);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!in_axes[i]) continue;
    const Array& input = inputs[i];
    int64_t axis = *in_axes[i];
    if (axis < -input.rank() || axis >= input.rank()) {
      fail(site,
           fmt::format("vmap: in_axes maps axis {} of {}, which is {} (rank {})", axis,
                       input_names[i], input.aval().to_string(), input.rank()),
           input.rank() == 0 ? "a scalar has no axis to map over: give it in_axes kNotMapped"
                             : "in_axes counts axes from 0, or from -1 at the end");
    }
    axes[i] = axis < 0 ? axis + input.rank() : axis;
    int64_t n = input.shape()[axes[i]];
    if (size < 0) {
      size = n;
      size_from = i;
    } else if (n != size) {
      fail(site,
           fmt::format("vmap: mapped axes have different sizes: {} has {} on axis {}, but {} has "
                       "{} on axis {}",
                       input_names[size_from], size, axes[size_from], input_names[i], n, axes[i]),
           "every mapped input must have the same size along its mapped axis");
    }
  }
  if (size < 0) {
    fail(site, "vmap: no input is mapped, so the batch size is unknown",
         "map at least one input (in_axes entries other than kNotMapped)");
  }
  BatchTrace trace(size);
  std::vector<Array> wrapped;
  for (size_t i = 0; i < inputs.size(); ++i) {
    wrapped.push_back(axes[i] == kNotBatched ? inputs[i] : trace.wrap(inputs[i], axes[i]));
  }
  std::vector<Array> outputs;
  {
    InterpreterScope scope(trace);
    outputs = fn(wrapped);
  }
  BatchedOutputs result;
  result.size = size;
  for (const Array& output : outputs) {
    auto [value, dim] = trace.unwrap(output, site);
    result.values.push_back(std::move(value));
    result.dims.push_back(dim);
  }
  trace.finish();
  return result;
}

Array place_batch_axis(const Array& value, int64_t dim, std::optional<int64_t> out_axis,
                       int64_t size, const std::string& name, CallSite site) {
  if (!out_axis) {
    if (dim != kNotBatched) {
      fail(site,
           fmt::format("vmap: out_axes says {} is not mapped, but it differs between examples",
                       name),
           "only results that do not depend on a mapped input can be kNotMapped");
    }
    return value;
  }
  int64_t rank = value.rank() + (dim == kNotBatched ? 1 : 0);
  int64_t axis = *out_axis;
  if (axis < -rank || axis >= rank) {
    fail(site,
         fmt::format("vmap: out_axes puts the batch on axis {} of {}, which has rank {} with the "
                     "batch",
                     axis, name, rank));
  }
  if (axis < 0) axis += rank;
  return batch_util::batch_at(value, dim, axis, size, site);
}

}  // namespace detail
}  // namespace kiln
