// The op_table's batching column: for every primitive, vmap over a batch of examples must
// equal the primitive applied to each example in a loop. Examples differ (example b holds
// the case's values rotated by b places), so a rule that mixed up examples would fail.
// Each case runs with several mappings: every operand batched on axis 0, only the first
// operand batched on its last axis, and only the last operand batched.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/vmap.h"
#include "prims/bind.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

constexpr int64_t kBatch = 3;

// The examples stacked on axis `dim`.
Array batched(const TestArray& input, int64_t dim) {
  TestArray stacked = input;
  stacked.aval.shape.dims().insert_at(0, kBatch);
  stacked.values.clear();
  for (int64_t b = 0; b < kBatch; ++b) {
    TestArray one = rotated_example(input, b);
    stacked.values.insert(stacked.values.end(), one.values.begin(), one.values.end());
  }
  Array first = to_array(stacked);
  if (dim == 0) return first;
  Dims perm;
  for (int64_t d = 1; d <= dim; ++d) perm.push_back(d);
  perm.push_back(0);
  for (int64_t d = dim + 1; d < first.rank(); ++d) perm.push_back(d);
  return transpose(first, perm);
}

struct Mapping {
  std::string label;
  std::vector<std::optional<int64_t>> axes;  // per operand
};

std::vector<Mapping> mappings_for(const OpCase& c) {
  size_t n = c.inputs.size();
  std::vector<Mapping> mappings;
  mappings.push_back({"all on axis 0", std::vector<std::optional<int64_t>>(n, 0)});
  if (n > 1) {
    std::vector<std::optional<int64_t>> first_last(n);
    first_last[0] = c.inputs[0].aval.shape.rank();
    mappings.push_back({"operand 0 on its last axis", first_last});
    std::vector<std::optional<int64_t>> last_only(n);
    last_only[n - 1] = 0;
    mappings.push_back({"last operand only", last_only});
  } else if (c.inputs[0].aval.shape.rank() > 0) {
    mappings.push_back({"on the last axis", {c.inputs[0].aval.shape.rank()}});
  }
  return mappings;
}

class Batching : public ::testing::TestWithParam<OpRow> {};

TEST_P(Batching, VmapMatchesALoopOverExamples) {
  const OpRow& row = GetParam();
  int checked = 0;
  for (const OpCase& c : row.cases()) {
    if (c.inputs.empty() || !small_enough(c)) continue;
    for (const Mapping& mapping : mappings_for(c)) {
      std::string where = fmt::format("{} [{}], {}", prim_name(row.prim), c.label, mapping.label);
      std::vector<Array> operands;
      std::vector<std::string> names;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        operands.push_back(mapping.axes[i] ? batched(c.inputs[i], *mapping.axes[i])
                                           : to_array(c.inputs[i]));
        names.push_back(fmt::format("operand {}", i));
      }
      detail::FlatFunction fn = [&](std::span<const Array> in) {
        return bind(row.prim, in, c.params, CallSite());
      };
      std::vector<TestArray> results;
      try {
        detail::BatchedOutputs out =
            detail::vmap_flat(fn, operands, mapping.axes, names, CallSite());
        for (size_t k = 0; k < out.values.size(); ++k) {
          results.push_back(to_test_array(detail::place_batch_axis(
              out.values[k], out.dims[k], 0, out.size, "result", CallSite())));
        }
      } catch (const Error& error) {
        ADD_FAILURE() << where << ": " << error.what();
        continue;
      }
      for (int64_t b = 0; b < kBatch; ++b) {
        std::vector<Array> one;
        for (size_t i = 0; i < c.inputs.size(); ++i) {
          one.push_back(to_array(mapping.axes[i] ? rotated_example(c.inputs[i], b) : c.inputs[i]));
        }
        std::vector<Array> expected = bind(row.prim, one, c.params, CallSite());
        ASSERT_EQ(expected.size(), results.size()) << where;
        for (size_t k = 0; k < expected.size(); ++k) {
          TestArray want = to_test_array(expected[k]);
          TestArray got = results[k];
          int64_t per = want.aval.num_elements();
          got.aval = want.aval;
          got.values.assign(results[k].values.begin() + b * per,
                            results[k].values.begin() + (b + 1) * per);
          Tolerance tolerance = row.fast_tolerance ? row.fast_tolerance(c, want.aval.dtype)
                                                   : ulp_tolerance(want.aval.dtype);
          std::string diff = compare(got, want, tolerance);
          EXPECT_TRUE(diff.empty()) << where << ", example " << b << ", result " << k << diff;
        }
      }
      ++checked;
    }
  }
  if (prim_def(row.prim).arity != 0) {
    EXPECT_GT(checked, 0) << "no case small enough to batch";
  }
}

INSTANTIATE_TEST_SUITE_P(AllPrimitives, Batching, ::testing::ValuesIn(all_rows()), row_name);

}  // namespace
}  // namespace kiln::testing
