// Type promotion follows JAX's lattice; the table in docs/arrays.md is kept in step.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kiln/promotion.h"
#include "support/source_tree.h"

namespace kiln {
namespace {

PromotedType strong(DType dtype) {
  return {dtype, false};
}
const PromotedType kIntLiteral{DType::i32, true};
const PromotedType kFloatLiteral{DType::f32, true};

TEST(Promotion, FollowsJaxLattice) {
  // Examples from JAX's type promotion documentation (with x64 types present).
  EXPECT_EQ(promote(strong(DType::u8), strong(DType::i32)), strong(DType::i32));
  EXPECT_EQ(promote(strong(DType::u32), strong(DType::i32)), strong(DType::i64));
  EXPECT_EQ(promote(strong(DType::i64), strong(DType::u32)), strong(DType::i64));
  EXPECT_EQ(promote(strong(DType::bf16), strong(DType::f16)), strong(DType::f32));
  EXPECT_EQ(promote(strong(DType::i32), strong(DType::f16)), strong(DType::f16));
  EXPECT_EQ(promote(strong(DType::bool_), strong(DType::u8)), strong(DType::u8));
  EXPECT_EQ(promote(strong(DType::f32), strong(DType::f64)), strong(DType::f64));
  EXPECT_EQ(promote(strong(DType::i64), strong(DType::bf16)), strong(DType::bf16));
}

TEST(Promotion, WeakLiteralsYieldToArrays) {
  EXPECT_EQ(promote(strong(DType::bf16), kFloatLiteral), strong(DType::bf16));  // x * 2.0
  EXPECT_EQ(promote(strong(DType::u8), kIntLiteral), strong(DType::u8));        // x + 1
  EXPECT_EQ(promote(strong(DType::i32), kFloatLiteral), kFloatLiteral);         // f32, weak
  EXPECT_EQ(promote(strong(DType::bool_), kIntLiteral), kIntLiteral);
  EXPECT_EQ(promote(kIntLiteral, kFloatLiteral), kFloatLiteral);
  EXPECT_EQ(promote(strong(DType::f64), kFloatLiteral), strong(DType::f64));
}

TEST(Promotion, IsSymmetricAndIdempotent) {
  std::vector<PromotedType> types;
  for (DType dtype : kAllDTypes) types.push_back(strong(dtype));
  types.push_back(kIntLiteral);
  types.push_back(kFloatLiteral);
  for (auto a : types) {
    EXPECT_EQ(promote(a, a), a);
    for (auto b : types) EXPECT_EQ(promote(a, b), promote(b, a));
  }
}

TEST(Promotion, DocumentedTableIsCurrent) {
  std::ifstream in(kiln::testing::source_dir() / "docs/arrays.md");
  ASSERT_TRUE(in.good()) << "docs/arrays.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(promotion_table_markdown()), std::string::npos)
      << "docs/arrays.md must contain the promotion table exactly as generated:\n"
      << promotion_table_markdown();
}

}  // namespace
}  // namespace kiln
