// The collectives' tree and ring algorithms against the reference (through the group's
// first device), bit for bit: every collective, group sizes 1 to 4, shapes empty, of one
// element, not divisible into the ring's segments, and of several dimensions; f32, f64,
// bf16 and i32; NaN and infinities. Then the bytes each device sends and receives against
// the algorithms' formulas. 4 logical devices (KILN_CPU_DEVICES=4).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "base/trace_events.h"
#include "sharding/spmd_cases.h"

namespace kiln::testing {
namespace {

struct AlgorithmScope {
  explicit AlgorithmScope(CollectiveAlgorithm algorithm) { set_collective_algorithm(algorithm); }
  ~AlgorithmScope() { set_collective_algorithm(CollectiveAlgorithm::kAuto); }
};

// Distinct values per element, with NaN and infinities among the floats.
Array values_for(const Shape& shape, DType dtype) {
  std::vector<double> values(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(static_cast<double>(i) * 1.7 + 0.3) * 1e3 / static_cast<double>(i + 1);
  }
  if (is_floating(dtype) && values.size() > 6) {
    values[3] = std::numeric_limits<double>::infinity();
    values[5] = std::numeric_limits<double>::quiet_NaN();
    values[6] = -std::numeric_limits<double>::infinity();
  }
  return from_host<double>(values, shape).astype(dtype);
}

std::vector<std::byte> bits_of(const Array& x) {
  return x.to_host().bytes;
}

struct Collective {
  std::string name;
  std::function<Array(const Array&)> body;
  // The argument's shape on a group of n, and the out spec (the result's varying axis).
  std::function<Shape(int64_t n)> shape;
  bool result_replicated;
};

std::vector<Collective> collectives() {
  auto flat = [](int64_t per) { return [per](int64_t n) { return Shape{n * per}; }; };
  return {
      {"psum", [](const Array& b) { return psum(b, "data"); }, flat(5), true},
      {"psum_empty", [](const Array& b) { return psum(b, "data"); }, flat(0), true},
      {"psum_one", [](const Array& b) { return psum(b, "data"); }, flat(1), true},
      {"psum_rows", [](const Array& b) { return psum(b, "data"); },
       [](int64_t n) {
         return Shape{n * 3, 7};
       },
       true},
      {"psum_large", [](const Array& b) { return psum(b, "data"); }, flat(20000), true},
      {"pmax", [](const Array& b) { return pmax(b, "data"); }, flat(9), true},
      {"pmean", [](const Array& b) { return pmean(b.astype(DType::f64), "data"); }, flat(6), true},
      {"all_gather", [](const Array& b) { return all_gather(b, "data"); }, flat(3), true},
      {"all_gather_tiled", [](const Array& b) { return all_gather(b, "data", 1, true); },
       [](int64_t n) {
         return Shape{n * 2, 3};
       },
       true},
      {"psum_scatter", [](const Array& b) { return psum_scatter(b, "data", 0, true); },
       [](int64_t n) { return Shape{n * n * 2}; }, false},
      {"psum_scatter_untiled", [](const Array& b) { return psum_scatter(b, "data", 1); },
       [](int64_t n) {
         return Shape{n * 2, n};
       },
       false},
      {"all_to_all", [](const Array& b) { return all_to_all(b, "data", 1, 0); },
       [](int64_t n) {
         return Shape{n * 2, n * 3};
       },
       false},
      {"ppermute",
       [](const Array& b) {
         return ppermute(b, "data", {{0, 0}});
       },
       flat(4), false},
  };
}

TEST(CollectiveAlgorithms, TreeAndRingGiveTheReferenceBits) {
  int checked = 0;
  for (int64_t n = 1; n <= 4; ++n) {
    Mesh mesh({{"data", n}});
    for (const Collective& c : collectives()) {
      for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32}) {
        if (c.name == "pmean" && dtype == DType::i32) continue;  // pmean takes floats
        Array x = values_for(c.shape(n), dtype);
        PartitionSpec in{{"data"}};
        PartitionSpec out = c.result_replicated ? PartitionSpec{} : PartitionSpec{{"data"}};
        std::vector<std::byte> reference;
        {
          AlgorithmScope scope(CollectiveAlgorithm::kReference);
          reference = bits_of(run1(unary(c.body), mesh, in, out, x));
        }
        for (CollectiveAlgorithm algorithm :
             {CollectiveAlgorithm::kTree, CollectiveAlgorithm::kRing, CollectiveAlgorithm::kAuto}) {
          AlgorithmScope scope(algorithm);
          std::vector<std::byte> bits = bits_of(run1(unary(c.body), mesh, in, out, x));
          EXPECT_TRUE(bits == reference) << c.name << " " << dtype_name(dtype) << " on " << n
                                         << " devices, algorithm " << static_cast<int>(algorithm);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 400);
}

TEST(CollectiveAlgorithms, GroupsOfTheGridAgreeToo) {
  Array x = values_for(Shape{4, 6}, DType::f32);
  for (AxisNames axes : {AxisNames("model"), AxisNames("data"), AxisNames{"model", "data"}}) {
    auto body = [axes](const Array& b) {
      return psum(b, axes) + all_gather(b, axes, 0, true).sum();
    };
    std::vector<std::byte> reference;
    {
      AlgorithmScope scope(CollectiveAlgorithm::kReference);
      reference =
          bits_of(run1(unary(body), grid(), {{"data"}, {"model"}}, {{"data"}, {"model"}}, x));
    }
    for (CollectiveAlgorithm algorithm : {CollectiveAlgorithm::kTree, CollectiveAlgorithm::kRing}) {
      AlgorithmScope scope(algorithm);
      EXPECT_TRUE(bits_of(run1(unary(body), grid(), {{"data"}, {"model"}}, {{"data"}, {"model"}},
                               x)) == reference)
          << axes.names[0] << ", algorithm " << static_cast<int>(algorithm);
    }
  }
}

// The bytes each of the 4 devices sent and received for one collective.
std::vector<DeviceTraffic> traffic_of(CollectiveAlgorithm algorithm,
                                      const std::function<Array(const Array&)>& body,
                                      const Array& x, PartitionSpec in, PartitionSpec out) {
  AlgorithmScope scope(algorithm);
  Array arg = device_put(x, NamedSharding(line(), in));
  arg.block_until_ready();
  reset_collective_traffic();
  run1(unary(body), line(), in, out, arg).block_until_ready();
  std::vector<DeviceTraffic> traffic = collective_traffic();
  traffic.resize(4);
  return traffic;
}

TEST(CollectiveTraffic, MatchesEachAlgorithmsFormula) {
  // psum of 4 KiB per device: the ring sends and receives 2 (n - 1) / n of it on every device.
  const int64_t kBytes = 4096;
  Array x = zeros(Shape{4 * kBytes / 4});  // f32: 1024 elements per device
  auto all_reduce = [](const Array& b) { return psum(b, "data"); };
  for (const DeviceTraffic& device :
       traffic_of(CollectiveAlgorithm::kRing, all_reduce, x, {{"data"}}, {})) {
    EXPECT_EQ(device.bytes_sent, 2 * 3 * kBytes / 4) << "device " << device.device;
    EXPECT_EQ(device.bytes_received, 2 * 3 * kBytes / 4) << "device " << device.device;
    EXPECT_EQ(device.sends, 6);
  }
  // The tree: devices 1 and 3 send once up and receive once down; device 2 relays; the root
  // (device 0) receives from 1 and 2 and sends back to both.
  std::vector<DeviceTraffic> tree =
      traffic_of(CollectiveAlgorithm::kTree, all_reduce, x, {{"data"}}, {});
  EXPECT_EQ(tree[0].bytes_received, 2 * kBytes);
  EXPECT_EQ(tree[0].bytes_sent, 2 * kBytes);
  EXPECT_EQ(tree[1].bytes_sent, kBytes);
  EXPECT_EQ(tree[2].bytes_sent, 2 * kBytes);  // up to 0, down to 3
  EXPECT_EQ(tree[3].bytes_received, kBytes);
  // The reference gathers on device 0 and sends the result back: 3 copies in, 3 out there.
  std::vector<DeviceTraffic> reference =
      traffic_of(CollectiveAlgorithm::kReference, all_reduce, x, {{"data"}}, {});
  EXPECT_EQ(reference[0].bytes_received, 3 * kBytes);
  EXPECT_EQ(reference[0].bytes_sent, 3 * kBytes);
  // A ring all-gather of one block per device: n - 1 blocks each way.
  for (const DeviceTraffic& device :
       traffic_of(CollectiveAlgorithm::kRing, [](const Array& b) { return all_gather(b, "data"); },
                  x, {{"data"}}, {})) {
    EXPECT_EQ(device.bytes_sent, 3 * kBytes);
    EXPECT_EQ(device.bytes_received, 3 * kBytes);
  }
  // Reduce-scatter of a 4 KiB value held whole: (n - 1) / n of it each way.
  Array whole = zeros(Shape{kBytes / 4});
  for (const DeviceTraffic& device :
       traffic_of(CollectiveAlgorithm::kRing,
                  [](const Array& b) { return psum_scatter(b, "data", 0, true); }, whole, {},
                  {{"data"}})) {
    EXPECT_EQ(device.bytes_sent, 3 * kBytes / 4);
    EXPECT_EQ(device.bytes_received, 3 * kBytes / 4);
  }
  // all_to_all: every device keeps one of its 4 blocks and sends the other 3.
  for (const DeviceTraffic& device : traffic_of(
           CollectiveAlgorithm::kRing, [](const Array& b) { return all_to_all(b, "data", 0, 0); },
           x, {{"data"}}, {{"data"}})) {
    EXPECT_EQ(device.bytes_sent, 3 * kBytes / 4);
  }
  // A shift: one block out and one in per device.
  for (const DeviceTraffic& device :
       traffic_of(CollectiveAlgorithm::kAuto,
                  [](const Array& b) {
                    return ppermute(b, "data", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
                  },
                  x, {{"data"}}, {{"data"}})) {
    EXPECT_EQ(device.bytes_sent, kBytes);
    EXPECT_EQ(device.bytes_received, kBytes);
  }
}

TEST(CollectiveTraffic, TracesShowEachCollectiveWithItsBytes) {
  AlgorithmScope scope(CollectiveAlgorithm::kRing);
  Array x = device_put(zeros(Shape{4096}), NamedSharding(line(), {{"data"}}));
  x.block_until_ready();
  trace::begin_recording();
  run1(unary([](const Array& b) { return psum(b, "data"); }), line(), {{"data"}}, {}, x)
      .block_until_ready();
  trace::Recording recording = trace::end_recording();
  int found = 0;
  for (const trace::Event& event : recording.events) {
    if (event.category != "collective") continue;
    ++found;
    EXPECT_EQ(event.name, "psum");
    ASSERT_EQ(event.args.size(), 2u);
    EXPECT_EQ(event.args[0].first, "bytes");
    EXPECT_EQ(event.args[0].second, 4 * 2 * 3 * 1024.0);  // 4 devices, 2 (n-1)/n of 4 KiB each
    EXPECT_EQ(event.args[1], (std::pair<std::string, double>{"group_size", 4.0}));
  }
  EXPECT_EQ(found, 1);
}

}  // namespace
}  // namespace kiln::testing
