// vmap's interpreter. While a BatchTrace is current, values of the vmapped function are
// BatchTracers: a per-example type wrapped around a value that has one more axis, the
// batch axis. Each primitive applied to them runs through its batching rule (PrimDef::
// batch) under the enclosing interpreter, so vmap composes with tracing, grad and vmap.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "prims/bind.h"
#include "transforms/transform_value.h"

namespace kiln {

class BatchTracer final : public TransformValue {
 public:
  // `value` carries the batch on axis `dim`; `aval` is one example's type.
  BatchTracer(AbstractValue aval, std::shared_ptr<Interpreter*> trace, Array value, int64_t dim)
      : TransformValue(std::move(aval), std::move(trace)), value_(std::move(value)), dim_(dim) {}
  const Array& value() const { return value_; }
  int64_t dim() const { return dim_; }

 private:
  Array value_;
  int64_t dim_;
};

class BatchTrace final : public Interpreter {
 public:
  // A batch of `size` examples, run under the interpreter current at construction.
  explicit BatchTrace(int64_t size);
  ~BatchTrace() override;
  BatchTrace(const BatchTrace&) = delete;
  BatchTrace& operator=(const BatchTrace&) = delete;

  int64_t size() const { return size_; }
  // A value of the vmapped function for `value` batched on axis `dim`.
  Array wrap(Array value, int64_t dim);
  // The batched value behind `value` and its batch axis (kNotBatched for values that are
  // not this trace's: the same for every example).
  std::pair<Array, int64_t> unwrap(const Array& value, CallSite site) const;
  // Ends the batch: its values can no longer be used.
  void finish();

  std::vector<Array> apply(const PrimDef& prim, std::span<const Array> inputs, const Params& params,
                           std::vector<AbstractValue> out_avals, CallSite site) override;

 private:
  Interpreter* parent_;
  int64_t size_;
  std::shared_ptr<Interpreter*> self_;
};

}  // namespace kiln
