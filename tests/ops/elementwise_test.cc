// The elementwise user ops end to end: operators, weak scalars, promotion, broadcasting,
// where/clip/astype, and the errors for bad dtypes and shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/ops.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::error_of;
using testing::fails_with;

using ::testing::HasSubstr;

TEST(ElementwiseOps, OperatorsComputeAndBroadcast) {
  Array x = from_host<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array row = from_host<float>({10, 20, 30}, {3});
  EXPECT_EQ((x + row).to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((x * 2.0 - 1).to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ((10.0 / x).shape(), (Shape{2, 3}));
  EXPECT_EQ((-x).to_vector<float>()[0], -1.0f);
  Array column = from_host<float>({100, 200}, {2, 1});
  EXPECT_EQ((x + column).to_vector<float>(), (std::vector<float>{101, 102, 103, 204, 205, 206}));
}

TEST(ElementwiseOps, WeakScalarsKeepTheArrayDtype) {
  Array h = astype(from_host<float>({1.5f, 2.5f}, {2}), DType::bf16);
  EXPECT_EQ((h * 2.0).dtype(), DType::bf16);
  EXPECT_EQ((h + 1).dtype(), DType::bf16);
  Array u = from_host<uint8_t>({250, 7}, {2});
  EXPECT_EQ((u + 10).dtype(), DType::u8);
  EXPECT_EQ((u + 10).to_vector<uint8_t>(), (std::vector<uint8_t>{4, 17}));  // wraps
  Array i = from_host<int32_t>({3, 4}, {2});
  Array f = i * 2.5;  // int array with a float literal -> f32 (weak)
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_TRUE(f.weak_type() || f.dtype() == DType::f32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{7.5f, 10.0f}));
  Array d = from_host<double>({1.0}, {1});
  EXPECT_EQ((d * 0.1).to_vector<double>()[0], 0.1);  // the double literal, not 0.1f
}

TEST(ElementwiseOps, StrongTypesPromote) {
  Array a = from_host<uint32_t>({1}, {1});
  Array b = from_host<int32_t>({-2}, {1});
  Array c = a + b;
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_EQ(c.to_vector<int64_t>()[0], -1);
  Array h = astype(from_host<float>({1}, {1}), DType::f16);
  Array g = astype(from_host<float>({1}, {1}), DType::bf16);
  EXPECT_EQ((h + g).dtype(), DType::f32);
}

TEST(ElementwiseOps, ComparisonsAndWhere) {
  Array x = from_host<float>({-1, 0, 2, NAN}, {4});
  Array positive = x > 0.0;
  EXPECT_EQ(positive.dtype(), DType::bool_);
  EXPECT_EQ(positive.to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  Array relu = where(x > 0.0, x, zeros_like(x));
  std::vector<float> values = relu.to_vector<float>();
  EXPECT_EQ(values[0], 0.0f);
  EXPECT_EQ(values[2], 2.0f);
  EXPECT_TRUE(std::isnan(maximum(x, zeros_like(x)).to_vector<float>()[3]));  // NaN propagates
  EXPECT_EQ(clip(x, -0.5, 1.0).to_vector<float>()[2], 1.0f);
  EXPECT_EQ(is_finite(x).to_vector<bool>()[3], false);
}

TEST(ElementwiseOps, AstypeFollowsDocumentedConversions) {
  Array x = from_host<float>({-1.7f, 2.9f, 1e10f, NAN}, {4});
  EXPECT_EQ(astype(x, DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{-1, 2, 2147483647, 0}));
  EXPECT_EQ(astype(x, DType::u8).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 2, 255, 0}));
  EXPECT_EQ(astype(x, DType::bool_).to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(astype(x, DType::bf16).to_vector<bf16>()[1].bits, bf16::from_float(2.9f).bits);
  EXPECT_EQ(x.astype(DType::f32).impl(), x.impl());  // no-op
}

TEST(ElementwiseOps, BadDtypesAreClearErrors) {
  Array f = from_host<float>({1.5f}, {1});
  Array i = from_host<int32_t>({3}, {1});
  std::string text = error_of([&] { (void)(f & f); });
  EXPECT_THAT(text,
              HasSubstr("and: is a bitwise op and needs bool or integer operands, got f32[1]"));
  EXPECT_THAT(text, HasSubstr("elementwise_test.cc"));
  EXPECT_THAT(text, HasSubstr("HINT:"));
  text = error_of([&] { exp(i); });
  EXPECT_THAT(text, HasSubstr("exp: expects a floating-point operand, got i32[1]"));
  EXPECT_THAT(text, HasSubstr("HINT: convert first"));
  Array b = from_host<bool>({true}, {1});
  EXPECT_THAT(error_of([&] { (void)(b + b); }), HasSubstr("add: does not accept bool"));
  EXPECT_THAT(error_of([&] { where(f, f, f); }), HasSubstr("where: the condition must be bool"));
  EXPECT_THAT(error_of([&] { clip(f, 2, 1); }),
              HasSubstr("clip: low (2) is greater than high (1)"));
}

TEST(ElementwiseOps, IncompatibleShapesNameBothTypesAndTheAxis) {
  Array a = zeros({2, 3});
  Array b = zeros({4});
  std::string text = error_of([&] { (void)(a + b); });
  EXPECT_THAT(
      text,
      HasSubstr("add: shapes f32[2,3] and f32[4] cannot be broadcast together (axis -1: 3 vs 4)"));
  EXPECT_THAT(text, HasSubstr("HINT:"));
  EXPECT_THAT(error_of([&] { where(zeros({2}) > 0.0, zeros({3}), zeros({3})); }),
              HasSubstr("where: shapes bool[2] and f32[3] cannot be broadcast"));
}

TEST(ElementwiseOps, ToStringPrintsLikeNumpy) {
  EXPECT_EQ(from_host<float>({1, 2.5f, 3, 4}, {2, 2}).to_string(),
            "f32[2,2]\n[[1, 2.5],\n [3, 4]]");
  EXPECT_EQ(from_host<int32_t>({7}, {}).to_string(), "i32[]\n7");
  EXPECT_EQ(from_host<bool>({true, false}, {2}).to_string(), "bool[2]\n[true, false]");
  std::string big = zeros({2000}).to_string();
  EXPECT_THAT(big, HasSubstr("[0, 0, 0, ..., 0, 0, 0]"));
}

}  // namespace
}  // namespace kiln
