// Cost rules: hand-computed FLOPs and bytes for one primitive of each kind (dot_general,
// convolution, elementwise, transcendental, reduction, aliasing reshape, sort, random,
// custom_vjp_call), and a column over every op_table case: costs are finite and
// non-negative, and each primitive writes exactly its results (nothing when it aliases).
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/bind.h"
#include "prims/ids/binary.h"
#include "prims/ids/contract.h"
#include "prims/ids/custom.h"
#include "prims/ids/random.h"
#include "prims/ids/reduce.h"
#include "prims/ids/shape.h"
#include "prims/ids/sort.h"
#include "prims/ids/unary.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

Cost cost_of(PrimId id, std::vector<AbstractValue> inputs, const Params& params) {
  std::vector<AbstractValue> outputs = abstract_eval(id, inputs, params, CallSite());
  return prim_def(id).cost(inputs, outputs, params);
}

AbstractValue f32(Shape shape) {
  return AbstractValue(std::move(shape), DType::f32);
}

TEST(CostRules, DotGeneralIsTwiceBatchTimesMNK) {
  // A batch of 4 products [8,16] x [16,32].
  Cost cost = cost_of(prim::dot_general, {f32({4, 8, 16}), f32({4, 16, 32})},
                      DotGeneralParams{{2}, {1}, {0}, {0}, std::nullopt});
  EXPECT_EQ(cost.flops, 2.0 * 4 * 8 * 32 * 16);
  EXPECT_EQ(cost.transcendentals, 0);
  EXPECT_EQ(cost.bytes_read, (4 * 8 * 16 + 4 * 16 * 32) * 4.0);
  EXPECT_EQ(cost.bytes_written, 4 * 8 * 32 * 4.0);
  EXPECT_DOUBLE_EQ(cost.arithmetic_intensity(), cost.flops / (10240.0 + 4096.0));
}

TEST(CostRules, DotGeneralOfF16CountsTwoBytesPerElement) {
  AbstractValue a({3, 5}, DType::f16), b({5, 2}, DType::f16);
  Cost cost = cost_of(prim::dot_general, {a, b}, DotGeneralParams{{1}, {0}, {}, {}, {}});
  EXPECT_EQ(cost.flops, 2.0 * 3 * 2 * 5);
  EXPECT_EQ(cost.bytes_read, (15 + 10) * 2.0);
  EXPECT_EQ(cost.bytes_written, 6 * 2.0);
}

TEST(CostRules, ConvolutionIsTwiceOutputsTimesWindowTimesChannelsPerGroup) {
  // NHWC [2,10,10,6] with HWIO [3,3,3,8] in 2 groups (3 input channels each), padded to
  // keep 10x10: 2 x (2*10*10*8 outputs) x (3*3 window) x 3 channels.
  ConvParams params{{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2};
  Cost cost = cost_of(prim::conv_general_dilated, {f32({2, 10, 10, 6}), f32({3, 3, 3, 8})}, params);
  EXPECT_EQ(cost.flops, 2.0 * (2 * 10 * 10 * 8) * 9 * 3);
  EXPECT_EQ(cost.bytes_read, (2 * 10 * 10 * 6 + 3 * 3 * 3 * 8) * 4.0);
  EXPECT_EQ(cost.bytes_written, 2 * 10 * 10 * 8 * 4.0);
}

TEST(CostRules, ElementwiseIsOneFlopPerResultAndABroadcastOperandCountsItsOwnSize) {
  Cost cost = cost_of(prim::add, {f32({3, 4}), f32({1, 4})}, NoParams{});
  EXPECT_EQ(cost.flops, 12);
  EXPECT_EQ(cost.transcendentals, 0);
  EXPECT_EQ(cost.bytes_read, (12 + 4) * 4.0);
  EXPECT_EQ(cost.bytes_written, 12 * 4.0);
  Cost compare = cost_of(prim::lt, {f32({5}), f32({5})}, NoParams{});
  EXPECT_EQ(compare.flops, 5);
  EXPECT_EQ(compare.bytes_written, 5.0);  // bool results: one byte each
}

TEST(CostRules, TranscendentalsAreCountedApartFromFlops) {
  for (PrimId id : {prim::exp, prim::tanh, prim::log, prim::sqrt}) {
    Cost cost = cost_of(id, {f32({10})}, NoParams{});
    EXPECT_EQ(cost.flops, 0) << prim_name(id);
    EXPECT_EQ(cost.transcendentals, 10) << prim_name(id);
    EXPECT_EQ(cost.bytes_read, 40) << prim_name(id);
    EXPECT_EQ(cost.bytes_written, 40) << prim_name(id);
  }
  EXPECT_EQ(cost_of(prim::pow, {f32({4}), f32({})}, NoParams{}).transcendentals, 4);
}

TEST(CostRules, ReductionIsOneFlopPerOperandElement) {
  Cost cost = cost_of(prim::reduce_sum, {f32({5, 6})}, ReduceParams{{1}});
  EXPECT_EQ(cost.flops, 30);
  EXPECT_EQ(cost.bytes_read, 120);
  EXPECT_EQ(cost.bytes_written, 20);
  EXPECT_EQ(cost_of(prim::argmax, {f32({5, 6})}, ArgReduceParams{0, DType::i32}).flops, 30);
}

TEST(CostRules, AliasingAndMarkingPrimitivesCostNothing) {
  EXPECT_EQ(cost_of(prim::reshape, {f32({6, 4})}, ReshapeParams{Shape{24}}), Cost{});
  EXPECT_EQ(cost_of(prim::stop_gradient, {f32({6, 4})}, NoParams{}), Cost{});
  EXPECT_EQ(cost_of(prim::optimization_barrier, {f32({6, 4}), f32({2})}, NoParams{}), Cost{});
  EXPECT_EQ(cost_of(prim::checkpoint_name, {f32({6})}, CheckpointNameParams{"h"}), Cost{});
}

TEST(CostRules, LayoutMovesBytesWithoutFlops) {
  Cost transpose = cost_of(prim::transpose, {f32({6, 4})}, TransposeParams{{1, 0}});
  EXPECT_EQ(transpose, (Cost{.bytes_read = 96, .bytes_written = 96}));
  // A slice reads only what it keeps.
  Cost slice = cost_of(prim::slice, {f32({10, 4})}, SliceParams{{2, 0}, {5, 4}, {}});
  EXPECT_EQ(slice, (Cost{.bytes_read = 48, .bytes_written = 48}));
  Cost broadcast =
      cost_of(prim::broadcast_in_dim, {f32({4})}, BroadcastInDimParams{Shape{3, 4}, {1}});
  EXPECT_EQ(broadcast, (Cost{.bytes_read = 16, .bytes_written = 48}));
}

TEST(CostRules, SortIsNLog2NComparisonsPerLine) {
  Cost cost = cost_of(prim::sort, {f32({3, 8})}, SortParams{-1, 1});
  EXPECT_EQ(cost.flops, 3 * 8 * 3.0);
  EXPECT_EQ(cost_of(prim::sort, {f32({3, 1})}, SortParams{-1, 1}).flops, 0);
}

TEST(CostRules, ThreefryCountsItsIntegerOpsPerElement) {
  AbstractValue key({}, DType::u32), counts({10}, DType::u32);
  Cost cost = cost_of(prim::threefry2x32, {key, key, key, counts}, NoParams{});
  EXPECT_EQ(cost.flops, 117.0 * 10);  // 20 rounds x 5 + 5 key injections x 3 + 2
  EXPECT_EQ(cost.bytes_read, (3 + 10) * 4.0);
  EXPECT_EQ(cost.bytes_written, 2 * 10 * 4.0);
}

TEST(CostRules, CustomVjpCallCostsItsForwardFunction) {
  static const int64_t id = detail::register_custom_function(
      "cost_mul_sin",
      [](std::span<const Array> in) {
        return detail::CustomResult{{in[0] * in[1] + sin(in[0])}, {in[0]}};
      },
      [](std::span<const Array> saved, std::span<const Array> cts) {
        return std::vector<Array>{cts[0] * cos(saved[0]), cts[0]};
      });
  Cost cost =
      cost_of(prim::custom_vjp_call, {f32({7}), f32({7})}, CustomVjpParams{"cost_mul_sin", id});
  EXPECT_EQ(cost.flops, 14);           // mul and add
  EXPECT_EQ(cost.transcendentals, 7);  // sin
  EXPECT_EQ(cost.bytes_read, (7 + 7 + 7 + 7 + 7) * 4.0);
  EXPECT_EQ(cost.bytes_written, 3 * 7 * 4.0);
}

// Every case of every op_table row: finite, non-negative costs, and the bytes written are
// the results' (none for an aliasing primitive; a custom function's are its body's).
TEST(CostRules, EveryOpTableCaseHasASaneCost) {
  int checked = 0;
  for (const OpRow& row : all_rows()) {
    const PrimDef& prim = prim_def(row.prim);
    ASSERT_NE(prim.cost, nullptr) << prim.name << " has no cost rule";
    for (const OpCase& c : row.cases()) {
      std::vector<AbstractValue> inputs;
      for (const TestArray& input : c.inputs) inputs.push_back(input.aval);
      std::vector<AbstractValue> outputs = out_avals_of(row, c);
      Cost cost = prim.cost(inputs, outputs, c.params);
      std::string where = fmt::format("{} [{}]", prim.name, c.label);
      for (double value : {cost.flops, cost.transcendentals, cost.bytes_read, cost.bytes_written}) {
        EXPECT_TRUE(std::isfinite(value) && value >= 0) << where << ": " << value;
      }
      double result_bytes = 0;
      for (const AbstractValue& out : outputs)
        result_bytes += static_cast<double>(out.size_bytes());
      if (prim.has_flag(kAliasesOperand)) {
        EXPECT_EQ(cost.bytes_written, 0) << where;
      } else if (prim.impl == nullptr) {
        EXPECT_EQ(cost.bytes_written, result_bytes) << where;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace kiln::testing
