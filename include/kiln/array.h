// kiln::Array: an immutable n-dimensional array. Its buffer is shared by reference count,
// so copying an Array is cheap and never copies data. Eager ops return at once and run
// asynchronously on the array's device; reading values (to_host, item) waits for them and
// is counted as a host synchronization.
//
//   kiln::Array x = kiln::from_host<float>({1, 2, 3, 4}, {2, 2});
//   kiln::Array y = kiln::exp(x) * 2.0;      // queued on x's device, returns immediately
//   float total = y.sum().item<float>();     // waits, copies one value to the host
#pragma once

#include <cstddef>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/shape.h"

namespace kiln {

class Device;
class Array;

// What every kind of array value (a device array, a tracer or batched value inside a
// transformation) provides.
class ArrayImpl {
 public:
  explicit ArrayImpl(AbstractValue aval) : aval_(std::move(aval)) {}
  virtual ~ArrayImpl() = default;
  const AbstractValue& aval() const { return aval_; }
  // Whether the value's elements exist and can be read: false for values that exist only
  // inside a transformation (a tracer has a type, not a value).
  virtual bool is_concrete() const { return true; }

 private:
  AbstractValue aval_;
};

// Values copied to the host, in row-major order.
struct HostArray {
  AbstractValue aval;
  std::vector<std::byte> bytes;

  template <typename T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  // Element i converted to T with static_cast semantics (16-bit floats through float).
  template <typename T>
  T element(int64_t i) const {
    return visit_dtype(aval.dtype, [&](auto tag) -> T {
      using S = storage_t<decltype(tag)::value>;
      S value = as<S>()[static_cast<size_t>(i)];
      if constexpr (std::is_same_v<S, f16> || std::is_same_v<S, bf16>) {
        return static_cast<T>(value.to_float());
      } else {
        return static_cast<T>(value);
      }
    });
  }
};

class Array {
 public:
  Array() = default;
  explicit Array(std::shared_ptr<ArrayImpl> impl) : impl_(std::move(impl)) {}

  // An Array() is "absent" (an optional argument, a mask not given): asking it for its type
  // is a kiln::Error saying so, not a null dereference.
  bool defined() const { return impl_ != nullptr; }
  const AbstractValue& aval() const {
    if (impl_ == nullptr) [[unlikely]]
      fail_undefined();
    return impl_->aval();
  }
  const Shape& shape() const { return aval().shape; }
  DType dtype() const { return aval().dtype; }
  bool weak_type() const { return aval().weak_type; }
  int64_t rank() const { return shape().rank(); }
  int64_t size() const { return aval().num_elements(); }
  int64_t size_bytes() const { return aval().size_bytes(); }
  // Size of `axis`; negative axes count from the end.
  int64_t dim(int64_t axis) const;

  // The device holding this array's buffer. Fails for arrays that are not concrete.
  Device& device(CallSite site = {}) const;
  // Waits until the value is computed; rethrows an error raised while computing it, naming
  // the primitive and the call site that queued it.
  const Array& block_until_ready(CallSite site = {}) const;
  // Waits and copies the values to the host (one counted host synchronization).
  HostArray to_host(CallSite site = {}) const;
  // The values as a vector of T; T must be this array's storage type (use astype first).
  template <typename T>
  std::vector<T> to_vector(CallSite site = {}) const {
    check_storage_type(dtype_of<T>(), site);
    HostArray host = to_host(site);
    auto values = host.as<T>();
    return std::vector<T>(values.begin(), values.end());
  }
  // The single value of a one-element array, converted to T.
  template <typename T>
  T item(CallSite site = {}) const {
    return item_host(site).element<T>(0);
  }
  // The values, formatted like numpy (waits for them).
  std::string to_string(CallSite site = {}) const;

  // Conveniences; each is the free function of the same name in kiln/ops.h.
  Array astype(DType dtype, CallSite site = {}) const;
  Array reshape(Shape shape, CallSite site = {}) const;
  Array transpose(CallSite site = {}) const;
  Array sum(CallSite site = {}) const;
  Array sum(Dims axes, bool keepdims = false, CallSite site = {}) const;
  Array mean(CallSite site = {}) const;

  // Functional indexed update, as JAX's x.at[...]: x.at(i).set(v), .add, .mul, .min and
  // .max return a new array. at(i) indexes axis 0 with an integer index array of any rank;
  // at(i, axis) another axis (x.at[:, i] is at(i, 1)); at({i, j}) the leading axes together,
  // the index arrays broadcasting against each other (x.at[i, j]). Every index is checked.
  class IndexedUpdate;
  IndexedUpdate at(const Array& indices, CallSite site = {}) const;
  IndexedUpdate at(const Array& indices, int64_t axis, CallSite site = {}) const;
  IndexedUpdate at(std::vector<Array> indices, CallSite site = {}) const;

  ArrayImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<ArrayImpl>& impl_ptr() const { return impl_; }

 private:
  [[noreturn]] static void fail_undefined();
  void check_storage_type(DType requested, CallSite site) const;
  HostArray item_host(CallSite site) const;

  std::shared_ptr<ArrayImpl> impl_;
};

class Array::IndexedUpdate {
 public:
  IndexedUpdate(Array array, std::vector<Array> indices, int64_t axis, CallSite site)
      : array_(std::move(array)), indices_(std::move(indices)), axis_(axis), site_(site) {}
  // The entries named by the indices replaced by `values` (the last of repeated indices
  // wins), incremented by, multiplied by, or reduced with them by min / max (repeated
  // indices combine). `values` broadcast to the shape of x[indices] and convert to x's
  // dtype.
  Array set(const Array& values) const;
  Array add(const Array& values) const;
  Array mul(const Array& values) const;
  Array min(const Array& values) const;
  Array max(const Array& values) const;
  Array set(double value) const;
  Array add(double value) const;
  Array mul(double value) const;
  Array min(double value) const;
  Array max(double value) const;

 private:
  enum class Kind : uint8_t { kSet, kAdd, kMul, kMin, kMax };
  Array update(Kind kind, const Array& values) const;
  Array update(Kind kind, double value) const;

  Array array_;
  std::vector<Array> indices_;
  int64_t axis_ = 0;  // with one index array
  CallSite site_;
};

// Prints x.to_string() (waits for the value).
std::ostream& operator<<(std::ostream& out, const Array& x);

}  // namespace kiln
