// The common base of values that exist only inside a transformation (a tracer of a trace,
// a batched value of a vmap). Each knows the interpreter that owns it; the owner clears
// that link when it finishes, so a value that escaped its transformation is recognised and
// reported instead of being mistaken for a value of some other transformation.
#pragma once

#include <memory>

#include "prims/bind.h"

namespace kiln {

class TransformValue : public ArrayImpl {
 public:
  TransformValue(AbstractValue aval, std::shared_ptr<Interpreter*> owner)
      : ArrayImpl(std::move(aval)), owner_(std::move(owner)) {}
  // The interpreter this value belongs to, or null once it has finished.
  Interpreter* owner() const { return *owner_; }
  bool is_concrete() const override { return false; }

 private:
  std::shared_ptr<Interpreter*> owner_;
};

// Raises the error for a value used after its transformation finished.
[[noreturn]] void fail_escaped_value(const AbstractValue& aval, CallSite site);

}  // namespace kiln
