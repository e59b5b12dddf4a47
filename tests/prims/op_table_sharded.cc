// The op_table's sharding column: every primitive run under shard_map on 2 and 4 logical
// devices must give, bit for bit, what it gives on one device. Each device gets a different
// example (the case's values rotated by the device's position, as in the batching column):
// the operands are the examples stacked on a new axis split over the mesh, and the body
// applies the primitive to its device's example. Runs as its own test with
// KILN_CPU_DEVICES=4 (tests/CMakeLists.txt, prims_sharded); the collectives, which only run
// inside shard_map, have their columns in tests/sharding/shard_map_test.cc.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/sharding.h"
#include "prims/bind.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

Array stacked(const TestArray& input, int64_t count) {
  TestArray out = input;
  out.aval.shape.dims().insert_at(0, count);
  out.values.clear();
  for (int64_t b = 0; b < count; ++b) {
    TestArray one = rotated_example(input, b);
    out.values.insert(out.values.end(), one.values.begin(), one.values.end());
  }
  return to_array(out);
}

// Example `b` of a result stacked on axis 0.
TestArray example_of(const TestArray& stacked_result, int64_t b, const AbstractValue& one) {
  TestArray out;
  out.aval = one;
  int64_t per = one.num_elements();
  out.values.assign(stacked_result.values.begin() + b * per,
                    stacked_result.values.begin() + (b + 1) * per);
  return out;
}

class ShardedColumn : public ::testing::TestWithParam<OpRow> {};

TEST_P(ShardedColumn, ShardMapOnTwoAndFourDevicesMatchesOneDevice) {
  ASSERT_GE(devices().size(), 4u) << "run with KILN_CPU_DEVICES=4 (ctest prims_sharded)";
  const OpRow& row = GetParam();
  int checked = 0;
  for (const OpCase& c : row.cases()) {
    if (c.inputs.empty() || !small_enough(c)) continue;
    for (int64_t count : {2, 4}) {
      std::string where = fmt::format("{} [{}] on {} devices", prim_name(row.prim), c.label, count);
      Mesh mesh({{"data", count}});
      std::vector<Array> operands;
      std::vector<PartitionSpec> in_specs;
      for (const TestArray& input : c.inputs) {
        operands.push_back(stacked(input, count));
        in_specs.push_back(PartitionSpec(std::vector<std::vector<std::string>>{{"data"}}));
      }
      std::vector<std::vector<Array>> expected;
      for (int64_t b = 0; b < count; ++b) {
        std::vector<Array> one;
        for (const TestArray& input : c.inputs) one.push_back(to_array(rotated_example(input, b)));
        expected.push_back(bind(row.prim, one, c.params, CallSite()));
      }
      std::vector<PartitionSpec> out_specs(
          expected[0].size(), PartitionSpec(std::vector<std::vector<std::string>>{{"data"}}));
      SpmdFunction body = [&](const std::vector<Array>& blocks) {
        std::vector<Array> one;
        for (size_t i = 0; i < blocks.size(); ++i)
          one.push_back(blocks[i].reshape(c.inputs[i].aval.shape));
        std::vector<Array> results = bind(row.prim, one, c.params, CallSite());
        for (Array& result : results) {
          Dims dims = result.shape().dims();
          dims.insert_at(0, 1);
          result = result.reshape(Shape(dims));
        }
        return results;
      };
      std::vector<Array> results;
      try {
        results = shard_map(body, mesh, in_specs, out_specs)(operands);
      } catch (const Error& error) {
        ADD_FAILURE() << where << ": " << error.what();
        continue;
      }
      ASSERT_EQ(results.size(), expected[0].size()) << where;
      for (size_t k = 0; k < results.size(); ++k) {
        TestArray all = to_test_array(results[k]);
        for (int64_t b = 0; b < count; ++b) {
          TestArray want = to_test_array(expected[static_cast<size_t>(b)][k]);
          TestArray got = example_of(all, b, want.aval);
          EXPECT_TRUE(same_bits(got, want))
              << where << ", device " << b << ", result " << k << compare(got, want, {});
        }
      }
      ++checked;
    }
  }
  if (prim_def(row.prim).arity != 0) {
    EXPECT_GT(checked, 0) << "no case small enough to shard";
  }
}

INSTANTIATE_TEST_SUITE_P(AllPrimitives, ShardedColumn, ::testing::ValuesIn(all_rows()), row_name);

}  // namespace
}  // namespace kiln::testing
