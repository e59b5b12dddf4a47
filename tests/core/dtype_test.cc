// DType names, sizes, classes and Shape helpers.
#include <gtest/gtest.h>

#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln {
namespace {

TEST(DType, NamesRoundTripAndSizesMatchStorage) {
  for (DType dtype : kAllDTypes) {
    EXPECT_EQ(dtype_from_name(dtype_name(dtype)), dtype);
    int storage = visit_dtype(
        dtype, [](auto tag) { return static_cast<int>(sizeof(storage_t<decltype(tag)::value>)); });
    EXPECT_EQ(dtype_size(dtype), storage) << dtype_name(dtype);
  }
  EXPECT_FALSE(dtype_from_name("float32").has_value());
}

TEST(DType, Classes) {
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_TRUE(is_integer(DType::u8));
  EXPECT_FALSE(is_integer(DType::bool_));
  EXPECT_TRUE(is_unsigned(DType::u32));
  EXPECT_TRUE(is_signed_integer(DType::i64));
}

TEST(Shape, ElementsStridesAndText) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s.strides(), (Dims{12, 4, 1}));
  EXPECT_EQ(s.to_string(), "[2,3,4]");
  EXPECT_EQ(Shape{}.num_elements(), 1);
  EXPECT_EQ((Shape{5, 0}).num_elements(), 0);
  EXPECT_EQ(AbstractValue(Shape{128, 784}, DType::f32).to_string(), "f32[128,784]");
  EXPECT_EQ(AbstractValue(Shape{}, DType::f32, true).to_string(), "f32~[]");
}

TEST(SmallVector, SpillsToHeapAndKeepsOrder) {
  Dims dims;
  for (int64_t i = 0; i < 20; ++i) dims.push_back(i);
  EXPECT_EQ(dims.size(), 20u);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(dims[static_cast<size_t>(i)], i);
  dims.insert_at(0, -1);
  EXPECT_EQ(dims[0], -1);
  EXPECT_EQ(dims[20], 19);
  dims.erase_at(0);
  while (dims.size() > 3) dims.pop_back();
  EXPECT_EQ(dims, (Dims{0, 1, 2}));
  Dims copy = dims;
  EXPECT_EQ(copy, dims);
  EXPECT_LT((Dims{0, 1}), (Dims{0, 2}));
}

TEST(SmallVector, ShrinkingBackToInlineKeepsTheHeapsValues) {
  // One past the inline size, then back: erase_at rotates on the heap, so the values that
  // return inline are the heap's (a vmap of a rank-7 broadcast found the inline copy stale).
  Dims dims{10, 11, 12, 13, 14, 15, 16};
  dims.erase_at(0);
  EXPECT_EQ(dims, (Dims{11, 12, 13, 14, 15, 16}));
  Dims changed{0, 1, 2, 3, 4, 5, 6};
  changed[2] = 42;
  changed.pop_back();
  EXPECT_EQ(changed, (Dims{0, 1, 42, 3, 4, 5}));
  Shape example{2, 1, 2, 1, 3, 2, 1};
  example.dims().erase_at(0);
  EXPECT_EQ(example, (Shape{1, 2, 1, 3, 2, 1}));
}

}  // namespace
}  // namespace kiln
