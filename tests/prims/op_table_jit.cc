// The op_table's jit column: for every primitive and case, the compiled executable gives
// the eager result bit for bit. Two programs per case: the primitive alone (one kernel
// step), and the primitive followed by neg on each float result, which puts elementwise
// primitives into a fused loop with their consumer (fusion must not change a bit).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>

#include "kiln/jit.h"
#include "kiln/ops.h"
#include "prims/bind.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

// Identical bits (NaN payloads included), as the host sees them.
std::string bit_difference(const Array& got, const Array& want) {
  if (got.aval() != want.aval()) {
    return fmt::format("type {} instead of {}", got.aval().to_string(), want.aval().to_string());
  }
  HostArray a = got.to_host();
  HostArray b = want.to_host();
  if (a.bytes.size() != b.bytes.size() ||
      (!a.bytes.empty() && std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) != 0)) {
    return "different bits";
  }
  return "";
}

bool within_jit_size(const OpCase& c) {
  int64_t elements = 0;
  for (const TestArray& input : c.inputs) elements += input.aval.num_elements();
  return elements <= (1 << 17);  // large enough for several tiles and chunks
}

class Jit : public ::testing::TestWithParam<OpRow> {};

TEST_P(Jit, CompiledResultEqualsEagerBitForBit) {
  const OpRow& row = GetParam();
  int checked = 0;
  for (const OpCase& c : row.cases()) {
    if (!within_jit_size(c)) continue;
    std::vector<Array> operands;
    for (const TestArray& input : c.inputs) operands.push_back(to_array(input));
    for (bool then_neg : {false, true}) {
      auto program = [&](const std::vector<Array>& in) {
        std::vector<Array> out = bind(row.prim, in, c.params, CallSite());
        if (then_neg) {
          for (Array& value : out) {
            if (is_floating(value.dtype())) value = neg(value);
          }
        }
        return out;
      };
      std::string where =
          fmt::format("{} [{}]{}", prim_name(row.prim), c.label, then_neg ? " then neg" : "");
      std::vector<Array> want, got;
      try {
        want = program(operands);
        got = jit(program)(operands);
        for (const Array& value : got) value.block_until_ready();
      } catch (const Error& error) {
        ADD_FAILURE() << where << ": " << error.what();
        continue;
      }
      ASSERT_EQ(got.size(), want.size()) << where;
      for (size_t k = 0; k < want.size(); ++k) {
        std::string diff = bit_difference(got[k], want[k]);
        EXPECT_TRUE(diff.empty()) << where << ", result " << k << ": " << diff;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "no case was compiled";
}

INSTANTIATE_TEST_SUITE_P(AllPrimitives, Jit, ::testing::ValuesIn(all_rows()), row_name);

}  // namespace
}  // namespace kiln::testing
