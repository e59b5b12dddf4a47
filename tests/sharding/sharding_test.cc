// Meshes and named shardings: device layout, the block each device holds (split, replicated,
// two axes on one dimension), the text view, and an error for each misuse. Runs with
// KILN_CPU_DEVICES=4 (tests/CMakeLists.txt).
#include "kiln/sharding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/ops.h"
#include "sharding/spmd_cases.h"
#include "support/errors.h"

namespace kiln {
namespace {

using kiln::testing::fails_with;
using kiln::testing::numbered;

TEST(Mesh, LaysOutTheFirstDevicesRowMajor) {
  ASSERT_GE(devices().size(), 4u) << "run with KILN_CPU_DEVICES=4";
  Mesh mesh({{"data", 2}, {"model", 2}});
  EXPECT_EQ(mesh.size(), 4);
  EXPECT_EQ(mesh.to_string(), "Mesh{data: 2, model: 2}");
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(mesh.devices()[static_cast<size_t>(i)], &device(static_cast<int>(i)));
  EXPECT_EQ(mesh.coordinates(0), (Dims{0, 0}));
  EXPECT_EQ(mesh.coordinates(1), (Dims{0, 1}));  // the last axis varies fastest
  EXPECT_EQ(mesh.coordinates(2), (Dims{1, 0}));
  EXPECT_EQ(mesh.coordinates(3), (Dims{1, 1}));
  EXPECT_EQ(mesh.axis_size("model"), 2);
  EXPECT_FALSE(mesh.find_axis("pipe").has_value());
}

TEST(Mesh, TakesTheDevicesItIsGiven) {
  Mesh mesh({{"data", 2}}, {&device(3), &device(1)});
  EXPECT_EQ(mesh.devices()[0], &device(3));
  NamedSharding rows(mesh, {{"data"}});
  EXPECT_EQ(rows.block(Shape{6}, 0), (ShardBlock{{0}, {3}}));  // device 3 holds the first half
}

TEST(Mesh, RefusesWhatCannotBeAMesh) {
  EXPECT_TRUE(fails_with(
      [] {
        Mesh({{"data", 8}});
      },
      {"a mesh {data: 8} needs 8 devices, but this process has 4", "KILN_CPU_DEVICES=8"}));
  EXPECT_TRUE(fails_with([] { Mesh({}); }, {"a mesh needs at least one axis"}));
  EXPECT_TRUE(fails_with(
      [] {
        Mesh({{"data", 2}, {"data", 2}});
      },
      {"mesh axis 'data' appears twice"}));
  EXPECT_TRUE(fails_with([] { Mesh({{"data", 0}}); }, {"mesh axis 'data' has size 0"}));
  EXPECT_TRUE(fails_with([] { Mesh({{"_", 1}}); }, {"mesh axis name '_' is not a name"}));
  EXPECT_TRUE(fails_with(
      [] {
        Mesh({{"data", 3}}, {&device(0), &device(1)});
      },
      {"Mesh{data: 3} has 3 positions, but 2 device(s) were given"}));
  EXPECT_TRUE(fails_with(
      [] {
        Mesh({{"data", 2}}, {&device(1), &device(1)});
      },
      {"device cpu:1 appears twice in Mesh{data: 2}"}));
  Mesh mesh({{"data", 2}});
  EXPECT_TRUE(fails_with([&] { mesh.axis_size("model"); },
                         {"Mesh{data: 2} has no axis 'model'", "its axes are data"}));
}

TEST(NamedSharding, SplitsRowsAndReplicatesOverTheUnusedAxis) {
  Mesh mesh({{"data", 2}, {"model", 2}});
  NamedSharding rows(mesh, {{"data"}, {}});
  Shape shape{128, 512};
  EXPECT_EQ(rows.shard_shape(shape), (Shape{64, 512}));
  EXPECT_EQ(rows.replicas(), 2);
  // Devices 0 and 1 (data = 0) hold the first half, 2 and 3 the second.
  EXPECT_EQ(rows.block(shape, 0), (ShardBlock{{0, 0}, {64, 512}}));
  EXPECT_EQ(rows.block(shape, 1), (ShardBlock{{0, 0}, {64, 512}}));
  EXPECT_EQ(rows.block(shape, 2), (ShardBlock{{64, 0}, {128, 512}}));
  EXPECT_EQ(rows.block(shape, 3), (ShardBlock{{64, 0}, {128, 512}}));
  EXPECT_EQ(rows.spec_for(shape).to_string(), "{data,_}");
  EXPECT_EQ(rows.to_string(), "NamedSharding(Mesh{data: 2, model: 2}, {data,_})");
}

TEST(NamedSharding, TwoAxesOnOneDimensionNumberItsPartsMajorToMinor) {
  Mesh mesh({{"data", 2}, {"model", 2}});
  NamedSharding both(mesh, {{"model", "data"}});  // model is the major digit here
  Shape shape{8, 3};
  EXPECT_EQ(both.parts(0), 4);
  EXPECT_EQ(both.replicas(), 1);
  // Device i has (data, model) = (i / 2, i % 2); its part is model * 2 + data.
  EXPECT_EQ(both.block(shape, 0).start, (Dims{0, 0}));
  EXPECT_EQ(both.block(shape, 1).start, (Dims{4, 0}));
  EXPECT_EQ(both.block(shape, 2).start, (Dims{2, 0}));
  EXPECT_EQ(both.block(shape, 3).start, (Dims{6, 0}));
  EXPECT_EQ(both.spec_for(shape).to_string(), "{(model,data),_}");
}

TEST(NamedSharding, EveryElementIsHeldByExactlyReplicasDevices) {
  Mesh mesh({{"a", 2}, {"b", 2}});
  Shape shape{4, 8};
  for (const PartitionSpec& spec : {PartitionSpec{}, PartitionSpec{{"a"}}, PartitionSpec{{}, {"b"}},
                                    PartitionSpec{{"b"}, {"a"}}, PartitionSpec{{"a", "b"}, {}},
                                    PartitionSpec{{}, {"b", "a"}}}) {
    NamedSharding sharding(mesh, spec);
    std::vector<int> holders(32, 0);
    for (int64_t d = 0; d < mesh.size(); ++d) {
      ShardBlock block = sharding.block(shape, d);
      for (int64_t r = block.start[0]; r < block.limit[0]; ++r) {
        for (int64_t c = block.start[1]; c < block.limit[1]; ++c) ++holders[r * 8 + c];
      }
    }
    for (int count : holders) ASSERT_EQ(count, sharding.replicas()) << spec.to_string();
  }
}

TEST(NamedSharding, ScalarsEmptyAndOneDeviceMeshes) {
  Mesh one({{"data", 1}}, {&device(0)});
  NamedSharding whole(one, {{"data"}});
  EXPECT_EQ(whole.block(Shape{5}, 0), (ShardBlock{{0}, {5}}));
  NamedSharding replicated(Mesh({{"data", 4}}), {});
  EXPECT_EQ(replicated.block(Shape{}, 3), (ShardBlock{{}, {}}));
  EXPECT_EQ(replicated.replicas(), 4);
  NamedSharding rows(Mesh({{"data", 4}}), {{"data"}});
  EXPECT_EQ(rows.block(Shape{0, 3}, 2), (ShardBlock{{0, 0}, {0, 3}}));  // 0 divides evenly
}

TEST(NamedSharding, RefusesSpecsAndShapesThatDoNotFit) {
  Mesh mesh({{"data", 2}, {"model", 2}});
  EXPECT_TRUE(fails_with([&] { NamedSharding(mesh, {{"pipe"}}); },
                         {"the spec {pipe} splits dimension 0 over mesh axis 'pipe', which "
                          "Mesh{data: 2, model: 2} does not have",
                          "the mesh's axes are data, model"}));
  EXPECT_TRUE(fails_with(
      [&] {
        NamedSharding(mesh, {{"data"}, {"data"}});
      },
      {"the spec {data,data} uses mesh axis 'data' twice"}));
  NamedSharding rows(mesh, {{"data", "model"}, {}});
  EXPECT_TRUE(fails_with(
      [&] {
        rows.check_shape(Shape{6, 4}, "params/dense/kernel");
      },
      {"dimension 0 of params/dense/kernel (shape [6,4], size 6) is split over "
       "mesh axis data (size 2) x model (size 2) into 4 parts, which do not "
       "divide 6"}));
  EXPECT_TRUE(fails_with([&] { rows.shard_shape(Shape{8}); },
                         {"the array of shape [8] has 1 dimension(s), but the spec "
                          "{(data,model),_} names 2"}));
  EXPECT_TRUE(fails_with(
      [&] {
        rows.block(Shape{8, 4}, 4);
      },
      {"mesh device 4 does not exist: Mesh{data: 2, model: 2} has 4"}));
}

TEST(VisualizeSharding, DrawsTheGridOfBlocks) {
  Mesh mesh({{"data", 2}, {"model", 2}});
  EXPECT_EQ(visualize_sharding(Shape{128, 512}, NamedSharding(mesh, {{"data"}, {"model"}})),
            "[128,512] over Mesh{data: 2, model: 2} as {data,model}: blocks of [64,256], each on "
            "1 device(s)\n"
            "+-------+-------+\n"
            "| cpu:0 | cpu:1 |\n"
            "+-------+-------+\n"
            "| cpu:2 | cpu:3 |\n"
            "+-------+-------+\n");
  EXPECT_EQ(visualize_sharding(Shape{8}, NamedSharding(mesh, {{"model"}})),
            "[8] over Mesh{data: 2, model: 2} as {model}: blocks of [4], each on 2 device(s)\n"
            "+-------------+-------------+\n"
            "| cpu:0 cpu:2 | cpu:1 cpu:3 |\n"
            "+-------------+-------------+\n");
}

TEST(VisualizeSharding, ListsBlocksWhenThereIsNoGrid) {
  Mesh mesh({{"data", 4}});
  EXPECT_EQ(visualize_sharding(Shape{4, 2, 8}, NamedSharding(mesh, {{}, {}, {"data"}})),
            "[4,2,8] over Mesh{data: 4} as {_,_,data}: blocks of [4,2,2], each on 1 device(s)\n"
            "  cpu:0    [0:4, 0:2, 0:2]\n"
            "  cpu:1    [0:4, 0:2, 2:4]\n"
            "  cpu:2    [0:4, 0:2, 4:6]\n"
            "  cpu:3    [0:4, 0:2, 6:8]\n");
  // Columns alone: one row of four blocks.
  Mesh wide({{"data", 4}}, {&device(0), &device(1), &device(2), &device(3)});
  std::string text = visualize_sharding(Shape{4, 4}, NamedSharding(wide, {{}, {"data"}}));
  EXPECT_THAT(text, ::testing::HasSubstr("| cpu:0 | cpu:1 | cpu:2 | cpu:3 |"));
}

TEST(ShardedArray, EachDeviceHoldsItsBlockAndTheWholeReadsBack) {
  Mesh mesh({{"data", 2}, {"model", 2}});
  Array x = numbered(Shape{4, 6});
  Array y = device_put(x, NamedSharding(mesh, {{"data"}, {}}));
  EXPECT_EQ(y.aval().to_string(), "f32[4,6]{data,_}");
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  std::vector<Array> blocks = shards(y);
  ASSERT_EQ(blocks.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(&blocks[i].device(), &device(static_cast<int>(i)));
    EXPECT_EQ(blocks[i].shape(), (Shape{2, 6}));
  }
  EXPECT_EQ(blocks[0].to_vector<float>(), slice(x, {0, 0}, {2, 6}).to_vector<float>());
  EXPECT_EQ(blocks[1].to_vector<float>(), blocks[0].to_vector<float>());  // a replica
  EXPECT_EQ(blocks[2].to_vector<float>(), slice(x, {2, 0}, {4, 6}).to_vector<float>());
  Placement where = placement(y);
  ASSERT_EQ(where.pieces.size(), 4u);
  EXPECT_EQ(where.pieces[3].device, &device(3));
  EXPECT_EQ(where.pieces[3].start, (Dims{2, 0}));
  EXPECT_EQ(where.pieces[3].bytes, 2 * 6 * 4);
  ASSERT_TRUE(sharding_of(y).has_value());
  EXPECT_EQ(sharding_of(y)->spec(), (PartitionSpec{{"data"}, {}}));
  EXPECT_FALSE(sharding_of(x).has_value());
}

TEST(ShardedArray, GridBlocksAssembleInOrder) {
  Mesh mesh({{"data", 2}, {"model", 2}});
  for (const PartitionSpec& spec :
       {PartitionSpec{{"data"}, {"model"}}, PartitionSpec{{"model"}, {"data"}},
        PartitionSpec{{}, {"data", "model"}}, PartitionSpec{}}) {
    Array x = numbered(Shape{4, 8});
    Array y = device_put(x, NamedSharding(mesh, spec));
    EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>()) << spec.to_string();
    EXPECT_EQ(device_put(y, device(2)).to_vector<float>(), x.to_vector<float>());
    EXPECT_EQ(&device_put(y, device(2)).device(), &device(2));
  }
  // Rank 3, a scalar, an empty array, and a sharded array placed again by another sharding.
  Array cube = numbered(Shape{2, 3, 4});
  EXPECT_EQ(device_put(cube, NamedSharding(mesh, {{}, {}, {"model"}})).to_vector<float>(),
            cube.to_vector<float>());
  Array scalar = from_host<float>({2.5f}, Shape{});
  EXPECT_EQ(device_put(scalar, NamedSharding(mesh, {})).to_vector<float>(),
            std::vector<float>{2.5f});
  Array empty = numbered(Shape{0, 4});
  EXPECT_EQ(device_put(empty, NamedSharding(mesh, {{"data"}})).to_vector<float>().size(), 0u);
  Array rows = device_put(cube.reshape({6, 4}), NamedSharding(mesh, {{"data"}}));
  Array columns = device_put(rows, NamedSharding(mesh, {{}, {"data", "model"}}));
  EXPECT_EQ(columns.to_vector<float>(), cube.to_vector<float>());
  EXPECT_EQ(shards(columns)[3].shape(), (Shape{6, 1}));
}

TEST(ShardedArray, EagerOpsRunOnTheGatheredArray) {
  Mesh mesh({{"data", 4}});
  Array x = numbered(Shape{8});
  Array y = device_put(x, NamedSharding(mesh, {{"data"}}));
  Array sum = y + 1.0f;
  EXPECT_FALSE(sharding_of(sum).has_value());
  EXPECT_EQ(sum.aval().to_string(), "f32[8]");
  EXPECT_EQ(sum.to_vector<float>(), (x + 1.0f).to_vector<float>());
  // The gathered array is not committed: it follows a committed operand's device.
  Array on_two = device_put(from_host<float>({1.0f}, Shape{1}), device(2));
  EXPECT_EQ(device_of(y * on_two), &device(2));
  // A replicated array's first copy is used as it is.
  Array whole = device_put(x, NamedSharding(mesh, {}));
  EXPECT_EQ((whole - x).to_vector<float>(), std::vector<float>(8, 0.0f));
  EXPECT_THAT(y.to_string(), ::testing::HasSubstr("f32[8]{data}"));
  EXPECT_THAT(visualize_sharding(y), ::testing::HasSubstr("| cpu:0 | cpu:1 | cpu:2 | cpu:3 |"));
  EXPECT_TRUE(fails_with([&] { device_put(numbered(Shape{6}), NamedSharding(mesh, {{"data"}})); },
                         {"dimension 0 of device_put's array (shape [6], size 6) is split over "
                          "mesh axis data (size 4) into 4 parts, which do not divide 6"}));
}

}  // namespace
}  // namespace kiln
