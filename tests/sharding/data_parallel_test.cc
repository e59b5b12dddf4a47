// Data-parallel training by shard_map, bit-identical on 1, 2 and 4 logical devices: the
// batch is split into a fixed number of chunks (4), each device adds its chunks' gradients
// in the pairwise tree over the chunk index, and psum continues the same tree across the
// devices (docs/sharding.md, *Canonical order*). A small MLP, SGD, a few steps.
#include <gtest/gtest.h>

#include "kiln/grad.h"
#include "sharding/spmd_cases.h"
#include "support/arrays.h"

namespace kiln::testing {
namespace {

constexpr int64_t kChunks = 4;
constexpr int64_t kChunkRows = 3;
constexpr int64_t kBatch = kChunks * kChunkRows;

using Params = std::vector<Array>;  // w1 [5, 8], b1 [8], w2 [8, 2], b2 [2]

Array chunk_loss(const Params& p, const Array& x, const Array& y) {
  Array hidden = tanh(matmul(x, p[0]) + p[1]);
  Array error = matmul(hidden, p[2]) + p[3] - y;
  return (error * error).sum();  // summed: the mean divides once, after every chunk is in
}

// parts[lo, hi) added as the collectives add (the left part the largest power of two).
Params tree_sum(const std::vector<Params>& parts, size_t lo, size_t hi) {
  if (hi - lo == 1) return parts[lo];
  size_t left = 1;
  while (left * 2 < hi - lo) left *= 2;
  Params a = tree_sum(parts, lo, lo + left), b = tree_sum(parts, lo + left, hi);
  for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] + b[i];
  return a;
}

// One SGD step's gradient on `devices` devices: each device's rows are kChunks / devices
// chunks of the batch.
Params gradient(const Params& params, const Array& x, const Array& y, int64_t devices) {
  Mesh mesh({{"data", devices}});
  SpmdFunction body = [devices](const std::vector<Array>& in) {
    Params p(in.begin(), in.begin() + 4);
    const Array& rows = in[4];
    const Array& targets = in[5];
    std::vector<Params> per_chunk;
    for (int64_t c = 0; c < kChunks / devices; ++c) {
      Array xc = slice(rows, {c * kChunkRows, 0}, {(c + 1) * kChunkRows, rows.dim(1)});
      Array yc = slice(targets, {c * kChunkRows, 0}, {(c + 1) * kChunkRows, targets.dim(1)});
      per_chunk.push_back(grad([&](const Params& q) { return chunk_loss(q, xc, yc); })(p));
    }
    Params local = tree_sum(per_chunk, 0, per_chunk.size());
    std::vector<Array> out;
    for (const Array& g : local) out.push_back(psum(g, "data") / static_cast<double>(kBatch));
    return out;
  };
  PartitionSpec whole{};
  PartitionSpec rows{{"data"}, {}};
  std::vector<Array> args = params;
  args.push_back(x);
  args.push_back(y);
  return shard_map(body, mesh, {whole, whole, whole, whole, rows, rows},
                   {whole, whole, whole, whole})(args);
}

Params train(int64_t devices, int steps) {
  Params p = {numbered(Shape{5, 8}) * 0.01f - 0.2f, zeros(Shape{8}),
              numbered(Shape{8, 2}) * 0.03f - 0.25f, zeros(Shape{2})};
  for (int step = 0; step < steps; ++step) {
    Array x = sin(numbered(Shape{kBatch, 5}) * 0.37f + static_cast<float>(step));
    Array y = cos(numbered(Shape{kBatch, 2}) * 0.11f - static_cast<float>(step));
    Params g = gradient(p, x, y, devices);
    for (size_t i = 0; i < p.size(); ++i) p[i] = p[i] - g[i] * 0.5f;
  }
  return p;
}

TEST(DataParallel, SameBitsOnOneTwoAndFourDevices) {
  Params one = train(1, 6);
  for (int64_t devices : {2, 4}) {
    Params many = train(devices, 6);
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(same_bits(many[i], one[i])) << "parameter " << i << " on " << devices;
    }
  }
  // ...and near, not equal, to the gradient of the mean taken in one reduction: the
  // chunked order is a different rounding of the same sum.
  Params p = {numbered(Shape{5, 8}) * 0.01f - 0.2f, zeros(Shape{8}),
              numbered(Shape{8, 2}) * 0.03f - 0.25f, zeros(Shape{2})};
  Array x = sin(numbered(Shape{kBatch, 5}) * 0.37f);
  Array y = cos(numbered(Shape{kBatch, 2}) * 0.11f);
  Params direct =
      grad([&](const Params& q) { return chunk_loss(q, x, y) / static_cast<double>(kBatch); })(p);
  Params chunked = gradient(p, x, y, 4);
  for (size_t i = 0; i < p.size(); ++i) {
    std::vector<double> a = values_of(direct[i]), b = values_of(chunked[i]);
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-6) << i << "," << k;
  }
}

}  // namespace
}  // namespace kiln::testing
