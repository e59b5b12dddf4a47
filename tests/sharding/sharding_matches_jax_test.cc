// Named shardings against jax.sharding (the pinned peers, docs/peers.md): for a table of
// meshes, specs and shapes, the block each mesh position holds and the shard shape are the
// ones JAX's NamedSharding gives (tests/tools/jax_sharding_check.py).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/sharding.h"
#include "support/peer_check.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

struct Case {
  std::vector<MeshAxis> mesh;
  PartitionSpec spec;
  Shape shape;
};

TEST(ShardingMatchesJax, BlocksAreJaxsDeviceIndices) {
  const std::vector<Case> cases = {
      {{{"data", 4}}, {{"data"}}, Shape{8}},
      {{{"data", 4}}, {}, Shape{8, 3}},
      {{{"data", 4}}, {{}, {"data"}}, Shape{3, 8}},
      {{{"data", 2}, {"model", 2}}, {{"data"}, {}}, Shape{128, 512}},
      {{{"data", 2}, {"model", 2}}, {{"data"}, {"model"}}, Shape{128, 512}},
      {{{"data", 2}, {"model", 2}}, {{"model"}, {"data"}}, Shape{4, 6}},
      {{{"data", 2}, {"model", 2}}, {{"data", "model"}, {}}, Shape{8, 2}},
      {{{"data", 2}, {"model", 2}}, {{"model", "data"}}, Shape{8}},
      {{{"data", 2}, {"model", 2}}, {{}, {}, {"model"}}, Shape{2, 3, 4}},
      {{{"a", 1}, {"b", 4}}, {{"a"}, {"b"}}, Shape{5, 4}},
      {{{"data", 2}, {"model", 2}}, {{"data"}}, Shape{0, 3}},
  };
  json record = {{"cases", json::array()}};
  for (const Case& c : cases) {
    NamedSharding sharding(Mesh(c.mesh), c.spec);
    json mesh = json::array();
    for (const MeshAxis& axis : c.mesh) mesh.push_back({{"name", axis.name}, {"size", axis.size}});
    json blocks = json::array();
    for (int64_t i = 0; i < sharding.mesh().size(); ++i) {
      ShardBlock block = sharding.block(c.shape, i);
      blocks.push_back({{"start", std::vector<int64_t>(block.start.begin(), block.start.end())},
                        {"limit", std::vector<int64_t>(block.limit.begin(), block.limit.end())}});
    }
    Shape shard = sharding.shard_shape(c.shape);
    record["cases"].push_back(
        {{"mesh", mesh},
         {"spec", c.spec.dims},
         {"shape", std::vector<int64_t>(c.shape.dims().begin(), c.shape.dims().end())},
         {"shard_shape", std::vector<int64_t>(shard.dims().begin(), shard.dims().end())},
         {"blocks", blocks}});
  }
  PeerReport report = run_peer_check("jax_sharding_check.py", record);
  EXPECT_EQ(report.status, 0) << report.text;
  EXPECT_NE(report.text.find(fmt::format("{} cases, 0 differences", cases.size())),
            std::string::npos)
      << report.text;
}

}  // namespace
}  // namespace kiln::testing
