// shard_map over Trees (kiln/sharding.h, SpecTree) on 4 logical devices: a spec covers a
// whole subtree or follows the tree's dicts and lists; the result is the flat shard_map's,
// bit for bit, with the result's structure; gradients and jit go through it; specs that do
// not match the tree are errors naming the path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/sharding.h"
#include "sharding/spmd_cases.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT: the shared cases
using kiln::testing::fails_with;

const PartitionSpec kRows({{"data"}, {}});
const PartitionSpec kWhole;

// A model's step in miniature: params every device holds whole, a batch split by rows;
// each device's share of the loss's gradient, summed over the devices.
Tree step_body(const Tree& in) {
  const Array& w = in["params"]["w"].leaf();
  const Array& b = in["params"]["b"].leaf();
  const Array& x = in["batch"][0].leaf();
  Array loss = psum(((matmul(x, w) + b) * (matmul(x, w) + b)).sum(), "data");
  return Tree::dict({{"loss", loss}, {"scaled", Tree::list({x * 2.0f})}});
}

Tree step_args() {
  return Tree::dict({{"params", Tree::dict({{"w", numbered(Shape{3, 2}) * 0.1f},
                                            {"b", numbered(Shape{2}) * 0.01f}})},
                     {"batch", Tree::list({numbered(Shape{8, 3}) * 0.05f})}});
}

SpecTree step_in_specs() {
  return SpecTree::dict({{"params", kWhole}, {"batch", SpecTree::list({kRows})}});
}

SpecTree step_out_specs() {
  return SpecTree::dict({{"loss", kWhole}, {"scaled", kRows}});
}

TEST(ShardMapTree, EqualsTheFlatShardMapBitForBitWithTheResultsStructure) {
  Tree args = step_args();
  Tree out = shard_map(step_body, line(), step_in_specs(), step_out_specs())(args);
  ASSERT_EQ(out.structure().to_string(), "{loss: *, scaled: [*]}");
  // The same body over the flat leaves, in the tree's order (dict keys sorted): (x, b, w)
  // in, (loss, scaled) out.
  SpmdFunction flat = [](const std::vector<Array>& in) {
    Tree t = Tree::dict(
        {{"batch", Tree::list({in[0]})}, {"params", Tree::dict({{"b", in[1]}, {"w", in[2]}})}});
    return step_body(t).leaves();
  };
  std::vector<Array> expected =
      shard_map(flat, line(), {kRows, kWhole, kWhole}, {kWhole, kRows})(args.leaves());
  EXPECT_TRUE(same_bits(out["loss"].leaf(), expected[0]));
  EXPECT_TRUE(same_bits(out["scaled"][0].leaf(), expected[1]));
  EXPECT_EQ(out["scaled"][0].leaf().aval().sharding, kRows);
}

TEST(ShardMapTree, OneSpecCoversAWholeSubtreeAndOfLeavesFollowsALayout) {
  Tree args = step_args();
  EXPECT_EQ(step_in_specs().leaf_specs(args, "in"),
            (std::vector<PartitionSpec>{kRows, kWhole, kWhole}));
  SpecTree layout = SpecTree::of_leaves(args, std::vector<PartitionSpec>{kRows, kWhole, kRows});
  EXPECT_EQ(layout.leaf_specs(args, "in"), (std::vector<PartitionSpec>{kRows, kWhole, kRows}));
  EXPECT_EQ(SpecTree(kWhole).leaf_specs(Tree(), "in"), std::vector<PartitionSpec>{});
  EXPECT_TRUE(fails_with([&] { SpecTree::of_leaves(args, std::vector<PartitionSpec>{kRows}); },
                         {"1 spec(s) for a tree of 3 leaves"}));
}

TEST(ShardMapTree, GradientsAndJitGoThroughIt) {
  auto loss = [](const Array& w) {
    Tree args = step_args().with("params", Tree::dict({{"w", w}, {"b", zeros({2})}}));
    return shard_map(step_body, line(), step_in_specs(), step_out_specs())(args)["loss"].leaf();
  };
  auto unsharded = [](const Array& w) {
    const Array x = numbered(Shape{8, 3}) * 0.05f;
    return (matmul(x, w) * matmul(x, w)).sum();
  };
  Array w = numbered(Shape{3, 2}) * 0.1f;
  std::vector<double> expected = values_of(grad(unsharded)(w));
  std::vector<double> actual = values_of(grad(loss)(w));
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-5) << i;
  EXPECT_TRUE(same_bits(jit(loss)(w), loss(w)));
}

TEST(ShardMapTree, SpecsThatDoNotMatchTheTreeNameThePath) {
  Tree args = step_args();
  SpecTree wrong_keys = SpecTree::dict({{"params", kWhole}, {"data", kRows}});
  EXPECT_TRUE(fails_with([&] { shard_map(step_body, line(), wrong_keys, step_out_specs())(args); },
                         {"shard_map's in_specs", "at the root", "a dict with keys {data, params}",
                          "a dict with keys {batch, params}"}));
  SpecTree wrong_length = SpecTree::dict({{"params", kWhole}, {"batch", SpecTree::list({})}});
  EXPECT_TRUE(
      fails_with([&] { shard_map(step_body, line(), wrong_length, step_out_specs())(args); },
                 {"at 'batch'", "a list of 0", "a list of 1"}));
  SpecTree too_deep = SpecTree::dict({{"loss", SpecTree::list({kWhole})}, {"scaled", kRows}});
  EXPECT_TRUE(fails_with([&] { shard_map(step_body, line(), step_in_specs(), too_deep)(args); },
                         {"shard_map's out_specs", "at 'loss'", "a leaf f32[]"}));
}

}  // namespace
}  // namespace kiln
