// Shapes and abstract values: what kiln knows about an array without its data.
//
//   kiln::Shape s{128, 784};
//   s.rank();          // 2
//   s.num_elements();  // 100352
//   s.to_string();     // "[128,784]"
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/small_vector.h"

namespace kiln {

// A list of axis numbers or sizes (permutations, reduced axes, strides...).
using Dims = SmallVector<int64_t, 6>;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::span<const int64_t> dims) : dims_(dims) {}
  explicit Shape(const Dims& dims) : dims_(dims) {}

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t operator[](int64_t axis) const { return dims_[static_cast<size_t>(axis)]; }
  int64_t& operator[](int64_t axis) { return dims_[static_cast<size_t>(axis)]; }
  const Dims& dims() const { return dims_; }
  Dims& dims() { return dims_; }
  int64_t num_elements() const;
  // Row-major strides in elements.
  Dims strides() const;
  std::string to_string() const;

  friend bool operator==(const Shape&, const Shape&) = default;
  friend auto operator<=>(const Shape&, const Shape&) = default;

 private:
  Dims dims_;
};

std::string dims_to_string(std::span<const int64_t> dims);

// Whether every row-major stride of `dims` fits in an int64, that is the product of the
// sizes with each 0 counted as 1. An empty array still has strides, so a file reader that
// only checked the element count would let [0, 2^40, 2^40] through to overflow later.
bool strides_fit_int64(std::span<const int64_t> dims);

// How an array's dimensions are split over the named axes of a device mesh (a
// PartitionSpec in JAX, kiln/sharding.h): per dimension, the mesh axes that split it,
// major to minor, none when every device holds the whole dimension. A default-constructed
// spec is not a sharding at all: the array lives whole on one device. Printed after the
// shape of a type, "f32[128,512]{data,_}" ("f32[]{}": a scalar on every device of a mesh),
// and parsed back.
//
//   kiln::ShardingSpec rows{{"data"}, {}};             // "{data,_}"
//   kiln::ShardingSpec both{{"data", "model"}, {}};    // "{(data,model),_}"
struct ShardingSpec {
  ShardingSpec() = default;
  ShardingSpec(std::initializer_list<std::vector<std::string>> dims_)
      : dims(dims_), sharded(true) {}
  explicit ShardingSpec(std::vector<std::vector<std::string>> dims_)
      : dims(std::move(dims_)), sharded(true) {}

  std::vector<std::vector<std::string>> dims;
  bool sharded = false;  // false: on one device (and `dims` is empty)

  bool empty() const { return !sharded; }
  // "{data,_}"; "" when not sharded.
  std::string to_string() const;

  friend bool operator==(const ShardingSpec&, const ShardingSpec&) = default;
  friend auto operator<=>(const ShardingSpec&, const ShardingSpec&) = default;
};

// The type of an array: shape, dtype, weak-type flag and sharding. Weak types come from
// C++ scalar literals and yield to the other operand in promotion (`x * 2.0` keeps x's
// dtype), as in JAX.
struct AbstractValue {
  AbstractValue() = default;
  AbstractValue(Shape shape_, DType dtype_, bool weak_type_ = false)
      : shape(std::move(shape_)), dtype(dtype_), weak_type(weak_type_) {}

  Shape shape;
  DType dtype = DType::f32;
  bool weak_type = false;
  ShardingSpec sharding;

  int64_t num_elements() const { return shape.num_elements(); }
  int64_t size_bytes() const { return num_elements() * dtype_size(dtype); }
  // "f32[128,784]"; weak types print with a trailing "~" ("f32~[]"), a sharded type with
  // its spec after the shape ("f32[128,784]{data,_}").
  std::string to_string() const;

  friend bool operator==(const AbstractValue&, const AbstractValue&) = default;
};

}  // namespace kiln
