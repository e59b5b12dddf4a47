// The order in which einsum contracts three or more operands: the cheapest by multiply-adds
// (as jnp.einsum's opt_einsum search), seen in the traced program. Values against
// jnp.einsum: JnpCrosscheck.
#include <gtest/gtest.h>

#include <string>

#include "kiln/array_functions.h"
#include "kiln/ops.h"
#include "kiln/tracing.h"
#include "support/arrays.h"

namespace kiln {
namespace {
using ::kiln::testing::values;

int count_of(const std::string& text, const std::string& piece) {
  int count = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) {
    ++count;
  }
  return count;
}

TEST(EinsumOrder, AMatrixChainTimesAVectorStartsFromTheVector) {
  // Left to right would make the 64 x 64 product A B first (262,144 multiply-adds); the
  // cheapest order is A (B v): two matrix-vector products (8,192).
  auto chain = [](const Array& a, const Array& b, const Array& v) {
    return einsum("ij,jk,k->i", {a, b, v});
  };
  Array a = ones({64, 64}), b = ones({64, 64}), v = ones({64});
  std::string text = make_program(chain, a, b, v).to_string();
  EXPECT_EQ(count_of(text, "dot_general"), 2) << text;
  EXPECT_EQ(count_of(text, "f32[64,64] = dot_general"), 0) << text;
  EXPECT_EQ(values(chain(a, b, v)), std::vector<double>(64, 64.0 * 64.0));
}

TEST(EinsumOrder, SixOperandsTakeTheCheapestPairEachStep) {
  // A chain of six square matrices ending in a vector: the greedy choice contracts from the
  // vector end as well, so no 16 x 16 product appears.
  auto chain = [](const std::vector<Array>& m) { return einsum("ab,bc,cd,de,ef,f->a", m); };
  std::vector<Array> m(5, ones({16, 16}));
  m.push_back(ones({16}));
  std::string text = make_program(chain, m).to_string();
  EXPECT_EQ(count_of(text, "f32[16,16] = dot_general"), 0) << text;
  EXPECT_EQ(values(chain(m))[0], 16.0 * 16 * 16 * 16 * 16);
}

}  // namespace
}  // namespace kiln
