// kiln's Pallas-style kernels against JAX's pallas_call in interpret mode (the pinned
// peers, docs/peers.md), on the same grids and block specs: a kernel whose result shows
// which grid point wrote each block (ragged last block included), a reduction over the
// grid's last axis in the output block, and the kernels kiln ships (tiled matmul with a
// ragged K, softmax, layer norm, flash attention with and without the causal mask and a
// ragged key block). This test writes each case's settings, inputs and kiln's results;
// tests/tools/pallas_crosscheck.py writes the same kernels with jax.experimental.pallas
// and compares.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "support/peer_check.h"

namespace kiln::pallas {
namespace {

using nlohmann::json;

// Distinct values in about [-2, 2].
Array smooth(Shape shape, double phase) {
  std::vector<double> values;
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    values.push_back(2 * std::sin(1.37 * static_cast<double>(i) + 0.71 + phase));
  }
  return astype(from_host(values, shape), DType::f32);
}

json encode(const Array& x) {
  return {{"shape", x.shape().dims()}, {"values", astype(x, DType::f64).to_vector<double>()}};
}

// 2 x + program_id(0) in blocks of `rows` rows: which point wrote each block shows.
Array add_block_number(const Array& x, int64_t rows) {
  auto body = [](const Kernel& k) {
    k.out(0).store(k.in(0).load() * 2.0 + static_cast<double>(k.program_id(0)));
  };
  BlockSpec spec({rows, -1}, [](const Index& g) { return Index{g[0], 0}; });
  return call(body, {x.aval()}, {cdiv(x.dim(0), rows)}, {spec}, {spec}, {x},
              {.name = "add_block_number", .semantics = {GridAxis::kParallel}})[0];
}

// Column sums of x [r, c]: grid (column blocks, row blocks), the rows last and in order,
// accumulated in the output block [1, cols]; the ragged rows load as zeros.
Array column_sums(const Array& x, int64_t rows, int64_t cols) {
  auto body = [](const Kernel& k) {
    if (k.program_id(1) == 0) k.out(0).store(zeros(k.out(0).block_type().shape));
    k.out(0).store(k.out(0).load() + sum(k.in(0).load(), {0}, true));
  };
  return call(body, {AbstractValue(Shape({1, x.dim(1)}), DType::f32)},
              {cdiv(x.dim(1), cols), cdiv(x.dim(0), rows)},
              {BlockSpec({rows, cols},
                         [](const Index& g) {
                           return Index{g[1], g[0]};
                         })},
              {BlockSpec({1, cols},
                         [](const Index& g) {
                           return Index{0, g[0]};
                         })},
              {x}, {.name = "column_sums"})[0];
}

TEST(PallasMatchesJax, KernelsOnTheSameGridsAndBlockSpecs) {
  json cases = json::array();
  auto add = [&](const std::string& kernel, json settings, const std::vector<Array>& inputs,
                 const Array& output) {
    json in = json::array();
    for (const Array& x : inputs) in.push_back(encode(x));
    cases.push_back(
        {{"kernel", kernel}, {"settings", settings}, {"inputs", in}, {"output", encode(output)}});
  };
  Array x = smooth(Shape({7, 3}), 0);
  add("add_block_number", {{"rows", 2}}, {x}, add_block_number(x, 2));
  Array wide = smooth(Shape({7, 5}), 1);
  add("column_sums", {{"rows", 3}, {"cols", 2}}, {wide}, column_sums(wide, 3, 2));
  for (auto [m, n, k, bm, bn, bk] : {std::array<int64_t, 6>{32, 32, 32, 16, 16, 16},
                                     std::array<int64_t, 6>{37, 53, 29, 16, 16, 8}}) {
    Array a = smooth(Shape({m, k}), 2), b = smooth(Shape({k, n}), 3);
    add("matmul", {{"bm", bm}, {"bn", bn}, {"bk", bk}}, {a, b},
        pallas::matmul(a, b, MatmulBlocks{bm, bn, bk}));
  }
  Array logits = smooth(Shape({9, 33}), 4) * 5.0;
  add("softmax", {{"rows", 4}}, {logits}, pallas::softmax(logits, 4));
  Array scale = smooth(Shape({24}), 5), bias = smooth(Shape({24}), 6);
  Array h = smooth(Shape({11, 24}), 7) * 3.0;
  add("layer_norm", {{"rows", 4}, {"eps", 1e-5}}, {h, scale, bias},
      pallas::layer_norm(h, scale, bias, 1e-5, 4));
  Array q = smooth(Shape({2, 21, 8}), 8), k = smooth(Shape({2, 21, 8}), 9);
  Array v = smooth(Shape({2, 21, 8}), 10);
  for (bool causal : {false, true}) {
    add("flash_attention", {{"bq", 8}, {"bk", 4}, {"causal", causal}}, {q, k, v},
        flash_attention(q, k, v, causal, AttentionBlocks{8, 4}));
  }
  testing::PeerReport peer = testing::run_peer_check("pallas_crosscheck.py", {{"cases", cases}});
  EXPECT_EQ(peer.status, 0) << peer.text;
  EXPECT_THAT(peer.text, ::testing::HasSubstr("pallas_crosscheck: 8 cases"));
}

}  // namespace
}  // namespace kiln::pallas
