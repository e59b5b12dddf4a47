// kiln/array_functions.h against the real jax.numpy (the pinned peers, docs/peers.md): each
// case runs one function on fixed inputs in f32 and f64, and, where the result is a float,
// takes the gradient of sum(result * weights) with respect to the first input and the
// results' tangents along a fixed direction of the first input (forward mode). This test
// writes the cases, inputs and kiln's results to one JSON file;
// tests/tools/jnp_crosscheck.py runs the same functions with jax.numpy and compares.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/array_functions.h"
#include "kiln/gather_scatter.h"
#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/jvp.h"
#include "kiln/nn/activations.h"
#include "kiln/nn/functional.h"
#include "kiln/ops.h"
#include "kiln/vmap.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "support/peer_check.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
using Inputs = std::vector<Array>;
using Function = std::function<std::vector<Array>(const Inputs&)>;

// Distinct values in about [-2, 2], so that no max, min or clip has a tie.
Array smooth(Shape shape, DType dtype, double phase = 0) {
  std::vector<double> values;
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    values.push_back(2 * std::sin(1.37 * static_cast<double>(i) + 0.71 + phase));
  }
  return astype(from_host(values, shape), dtype);
}

Array listed(std::vector<double> values, Shape shape, DType dtype) {
  return astype(from_host(values, shape), dtype);
}

// A number JSON can hold: non-finite values as the strings numpy prints.
json number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

json encode(const Array& x) {
  HostArray host = x.to_host();
  json values = json::array();
  for (int64_t i = 0; i < x.size(); ++i) values.push_back(number(host.element<double>(i)));
  return {{"dtype", dtype_name(x.dtype())}, {"shape", x.shape().dims()}, {"values", values}};
}

struct Case {
  std::string name;  // the jax.numpy function (tests/tools/jnp_crosscheck.py knows each)
  json kwargs;
  std::function<Inputs(DType)> inputs;
  Function fn;
};

Inputs one(Shape shape, DType dtype) {
  return {smooth(shape, dtype)};
}

std::vector<Array> single(Array x) {
  return {std::move(x)};
}

using AddCase = std::function<void(std::string, json, std::function<Inputs(DType)>, Function)>;

// einsum, and jax.nn's functions with the Flax modules they stand for (the name tells
// jnp_crosscheck.py where to look: "nn.*" is jax.nn, "flax.*" a flax.linen module applied
// to the inputs after the first as its parameters). "array_kwargs" passes inputs as
// keyword arguments (a mask); "f64_tolerance" loosens the f64 comparison where JAX itself
// computes in f32.
void add_contraction_and_nn_cases(const AddCase& add) {
  auto operands = [](std::vector<Shape> shapes) {
    return [shapes](DType dtype) {
      Inputs inputs;
      for (size_t i = 0; i < shapes.size(); ++i) {
        inputs.push_back(smooth(shapes[i], dtype, 0.37 * static_cast<double>(i)));
      }
      return inputs;
    };
  };
  auto einsum_case = [&](std::string subscripts, std::vector<Shape> shapes) {
    add("einsum", {{"subscripts", subscripts}}, operands(shapes),
        [subscripts](const Inputs& in) { return single(einsum(subscripts, in)); });
  };
  einsum_case("ij,jk->ik", {{3, 4}, {4, 5}});
  einsum_case("ij,jk", {{3, 4}, {4, 5}});
  einsum_case("bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}});
  einsum_case("bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}});
  einsum_case("...ij,...jk->...ik", {{2, 3, 4}, {4, 5}});
  einsum_case("...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 2}});
  einsum_case("ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}});
  einsum_case("ii->i", {{3, 3}});
  einsum_case("ii", {{3, 3}});
  einsum_case("iji->ij", {{3, 2, 3}});
  einsum_case("ij->ji", {{3, 4}});
  einsum_case("ijk->ki", {{2, 3, 4}});
  einsum_case("ij->", {{3, 4}});
  einsum_case("i,i->", {{5}, {5}});
  einsum_case("i,j->ij", {{3}, {4}});
  einsum_case("ij,->ij", {{2, 3}, {}});
  einsum_case("ij,jk->ik", {{0, 3}, {3, 2}});
  einsum_case("ij,jk->ik", {{2, 0}, {0, 3}});

  auto masked = [](DType dtype) {
    // The last row masked entirely: softmax gives zeros there, and a gradient of 0.
    std::vector<double> mask = {1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0};
    return Inputs{smooth({3, 4}, dtype), astype(from_host(mask, Shape{3, 4}), DType::bool_)};
  };
  add("nn.softmax", {{"axis", -1}, {"array_kwargs", {{"where", 1}}}}, masked,
      [](const Inputs& in) { return single(nn::softmax(in[0], -1, in[1])); });
  auto partly_masked = [](DType dtype) {
    std::vector<double> mask = {1, 0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0};
    return Inputs{smooth({3, 4}, dtype), astype(from_host(mask, Shape{3, 4}), DType::bool_)};
  };
  add("nn.log_softmax", {{"axis", -1}, {"array_kwargs", {{"where", 1}}}}, partly_masked,
      [](const Inputs& in) { return single(nn::log_softmax(in[0], -1, in[1])); });
  add("nn.softmax", {{"axis", 0}, {"array_kwargs", {{"where", 1}}}}, partly_masked,
      [](const Inputs& in) { return single(nn::softmax(in[0], 0, in[1])); });
  add("nn.standardize", {}, operands({{3, 4}}),
      [](const Inputs& in) { return single(nn::standardize(in[0])); });
  add("nn.standardize", {{"axis", json::array({0, 1})}}, operands({{3, 4}}), [](const Inputs& in) {
    return single(nn::standardize(in[0], {0, 1}));
  });
  add("flax.LayerNorm", {}, operands({{3, 4}, {4}, {4}}),
      [](const Inputs& in) { return single(nn::layer_norm(in[0], in[1], in[2])); });
  add("flax.RMSNorm", {}, operands({{2, 3, 5}, {5}}),
      [](const Inputs& in) { return single(nn::rms_norm(in[0], in[1])); });

  // Grouped-query attention: 4 query heads share 2 key heads.
  Shape q{2, 5, 4, 8}, kv{2, 6, 2, 8};
  // JAX computes the softmax in f32 for f64 inputs too, so its f64 results are f32-precise:
  // the f32 tolerance (measured up to 1.1e-6 on the sliding-window case).
  json loose = 2e-6;
  add("nn.dot_product_attention", {{"f64_tolerance", loose}}, operands({q, kv, kv}),
      [](const Inputs& in) { return single(nn::dot_product_attention(in[0], in[1], in[2])); });
  add("nn.dot_product_attention", {{"is_causal", true}, {"f64_tolerance", loose}},
      operands({q, kv, kv}), [](const Inputs& in) {
        return single(nn::dot_product_attention(in[0], in[1], in[2], {.is_causal = true}));
      });
  add(
      "nn.dot_product_attention",
      {{"scale", 0.5}, {"array_kwargs", {{"mask", 3}, {"bias", 4}}}, {"f64_tolerance", loose}},
      [=](DType dtype) {
        Inputs inputs = {smooth(q, dtype), smooth(kv, dtype, 0.4), smooth(kv, dtype, 0.8)};
        // Padding in the second sequence: keys 4 and 5 masked for every query, and query 4
        // may attend to nothing (it averages the values evenly, as in JAX).
        std::vector<double> mask;
        for (int64_t b = 0; b < 2; ++b) {
          for (int64_t t = 0; t < 5; ++t) {
            for (int64_t s = 0; s < 6; ++s) mask.push_back(!(b == 1 && (s >= 4 || t == 4)));
          }
        }
        inputs.push_back(astype(from_host(mask, Shape{2, 1, 5, 6}), DType::bool_));
        inputs.push_back(smooth({1, 4, 5, 6}, dtype, 1.1));
        return inputs;
      },
      [](const Inputs& in) {
        return single(nn::dot_product_attention(in[0], in[1], in[2],
                                                {.bias = in[4], .mask = in[3], .scale = 0.5}));
      });
  add("nn.dot_product_attention", {{"is_causal", true}, {"f64_tolerance", loose}},
      operands({{5, 2, 8}, {5, 2, 8}, {5, 2, 8}}), [](const Inputs& in) {
        return single(nn::dot_product_attention(in[0], in[1], in[2], {.is_causal = true}));
      });
  // Padded sequences by length (example 0: 3 queries and 4 keys valid; example 1: all), and
  // sliding windows, alone and with the causal mask.
  add(
      "nn.dot_product_attention",
      {{"array_kwargs", {{"query_seq_lengths", 3}, {"key_value_seq_lengths", 4}}},
       {"f64_tolerance", loose}},
      [=](DType dtype) {
        return Inputs{smooth(q, dtype), smooth(kv, dtype, 0.4), smooth(kv, dtype, 0.8),
                      from_host<int32_t>({3, 5}, {2}), from_host<int32_t>({4, 6}, {2})};
      },
      [](const Inputs& in) {
        return single(nn::dot_product_attention(
            in[0], in[1], in[2], {.query_seq_lengths = in[3], .key_value_seq_lengths = in[4]}));
      });
  add("nn.dot_product_attention",
      {{"local_window_size", json::array({2, 1})}, {"f64_tolerance", loose}}, operands({q, kv, kv}),
      [](const Inputs& in) {
        return single(
            nn::dot_product_attention(in[0], in[1], in[2], {.local_window_size = std::pair{2, 1}}));
      });
  add("nn.dot_product_attention",
      {{"local_window_size", json::array({1, 1})}, {"is_causal", true}, {"f64_tolerance", loose}},
      operands({q, kv, kv}), [](const Inputs& in) {
        return single(nn::dot_product_attention(
            in[0], in[1], in[2], {.is_causal = true, .local_window_size = std::pair{1, 1}}));
      });
}

// lax.gather and the lax.scatter family with dimension numbers: rows, points, windows,
// windows at output axes before the batch, batching dims; each mode (kError with indices in
// range is JAX's promise_in_bounds; clip and fill with indices out of range), and repeated
// indices for the combining scatters (not for scatter, whose order XLA leaves open).
void add_gather_scatter_cases(const AddCase& add) {
  auto axes = [](std::vector<int64_t> dims) { return json(dims); };
  auto to_dims = [](const std::vector<int64_t>& dims) { return Dims(dims.begin(), dims.end()); };
  auto mode_name = [](IndexMode mode) {
    return mode == IndexMode::kClip   ? "clip"
           : mode == IndexMode::kFill ? "fill"
                                      : "promise_in_bounds";
  };
  auto with_indices = [](Shape operand, std::vector<double> indices, Shape index_shape,
                         std::optional<Shape> updates = std::nullopt) {
    return [=](DType dtype) {
      Inputs in{smooth(operand, dtype), astype(from_host(indices, index_shape), DType::i32)};
      if (updates) in.push_back(smooth(*updates, dtype, 0.5));
      return in;
    };
  };
  struct G {
    std::vector<int64_t> offset, collapsed, map, operand_batching, indices_batching, slices;
  };
  auto gather_case = [&](G g, IndexMode mode, Shape operand, std::vector<double> indices,
                         Shape index_shape) {
    json numbers = {{"offset_dims", axes(g.offset)},
                    {"collapsed_slice_dims", axes(g.collapsed)},
                    {"start_index_map", axes(g.map)},
                    {"operand_batching_dims", axes(g.operand_batching)},
                    {"start_indices_batching_dims", axes(g.indices_batching)}};
    lax::GatherDimensionNumbers dn{to_dims(g.offset), to_dims(g.collapsed), to_dims(g.map),
                                   to_dims(g.operand_batching), to_dims(g.indices_batching)};
    Dims slices = to_dims(g.slices);
    add("lax.gather",
        {{"dimension_numbers", numbers},
         {"slice_sizes", axes(g.slices)},
         {"mode", mode_name(mode)}},
        with_indices(operand, indices, index_shape), [dn, slices, mode](const Inputs& in) {
          return single(lax::gather(in[0], in[1], dn, slices, mode));
        });
  };
  // x[i] for rows i; x[i, j] for points (clamped); 2 x 3 windows (filled where they do not
  // fit); the window's axis before the batch's; one start per row of a batch of matrices.
  gather_case({{1}, {0}, {0}, {}, {}, {1, 4}}, IndexMode::kError, {5, 4}, {4, 0, 2}, {3, 1});
  gather_case({{}, {0, 1}, {0, 1}, {}, {}, {1, 1}}, IndexMode::kClip, {4, 5},
              {0, 1, -1, 7, 5, 2, 3, 4, 2, 0, 1, 3}, {6, 2});
  gather_case({{2, 3}, {}, {0, 1}, {}, {}, {2, 3}}, IndexMode::kFill, {5, 6},
              {0, 0, 3, 3, 4, 1, 1, 4, -1, 2, 2, 2}, {2, 3, 2});
  gather_case({{0}, {0}, {0}, {}, {}, {1, 3}}, IndexMode::kError, {4, 3}, {3, 1}, {2, 1});
  gather_case({{2}, {1}, {1}, {0}, {0}, {1, 1, 4}}, IndexMode::kClip, {3, 5, 4}, {4, 0, 2, 9, 1, 1},
              {3, 2, 1});

  struct S {
    std::vector<int64_t> window, inserted, to_operand, operand_batching, indices_batching;
  };
  auto scatter_case = [&](std::string name, S sd, IndexMode mode, Shape operand,
                          std::vector<double> indices, Shape index_shape, Shape updates) {
    json numbers = {{"update_window_dims", axes(sd.window)},
                    {"inserted_window_dims", axes(sd.inserted)},
                    {"scatter_dims_to_operand_dims", axes(sd.to_operand)},
                    {"operand_batching_dims", axes(sd.operand_batching)},
                    {"scatter_indices_batching_dims", axes(sd.indices_batching)}};
    lax::ScatterDimensionNumbers dn{to_dims(sd.window), to_dims(sd.inserted),
                                    to_dims(sd.to_operand), to_dims(sd.operand_batching),
                                    to_dims(sd.indices_batching)};
    add("lax." + name, {{"dimension_numbers", numbers}, {"mode", mode_name(mode)}},
        with_indices(operand, indices, index_shape, updates), [name, dn, mode](const Inputs& in) {
          auto fn = name == "scatter"       ? lax::scatter
                    : name == "scatter_add" ? lax::scatter_add
                    : name == "scatter_mul" ? lax::scatter_mul
                    : name == "scatter_min" ? lax::scatter_min
                                            : lax::scatter_max;
          return single(fn(in[0], in[1], in[2], dn, mode, CallSite()));
        });
  };
  // Rows added, twice to row 1 and once past the end (dropped); points set (clamped);
  // repeated points multiplied, and reduced by min and max; 2 x 3 windows; one column per
  // row of a batch.
  scatter_case("scatter_add", {{1}, {0}, {0}, {}, {}}, IndexMode::kFill, {5, 3}, {1, 3, 1, 7},
               {4, 1}, {4, 3});
  scatter_case("scatter", {{}, {0, 1}, {0, 1}, {}, {}}, IndexMode::kClip, {4, 4},
               {0, 1, 2, 3, 9, 0}, {3, 2}, {3});
  scatter_case("scatter_mul", {{}, {0}, {0}, {}, {}}, IndexMode::kError, {6}, {2, 4, 2, 2, 0},
               {5, 1}, {5});
  scatter_case("scatter_min", {{}, {0}, {0}, {}, {}}, IndexMode::kError, {6}, {1, 1, 3, 5}, {4, 1},
               {4});
  scatter_case("scatter_max", {{}, {0}, {0}, {}, {}}, IndexMode::kFill, {6}, {1, 1, 3, 5, 6},
               {5, 1}, {5});
  scatter_case("scatter_max", {{1, 2}, {}, {0, 1}, {}, {}}, IndexMode::kClip, {5, 4}, {0, 1, 3, 0},
               {2, 2}, {2, 2, 3});
  scatter_case("scatter_add", {{}, {1}, {1}, {0}, {0}}, IndexMode::kError, {3, 5},
               {4, 0, 2, 2, 1, 3}, {3, 2, 1}, {3, 2});
}

// lax.cumprod / cummax / cummin, and jax.numpy's reductions with where=.
// (NaN and infinities are left to ScanFunctions.NaNPropagatesAndIntegersScan: through a
// NaN, JAX's max sends no gradient to either side and kiln's to the NaN, and cumprod's
// gradient through inf and 0 is NaN or inf by the order of the products.)
void add_scan_and_masked_reduction_cases(const AddCase& add) {
  auto of_shape = [](Shape shape) { return [shape](DType dtype) { return one(shape, dtype); }; };
  auto top = [](int64_t k) {
    return [k](const Inputs& in) {
      auto [values, indices] = top_k(in[0], k);
      return std::vector<Array>{values, indices};
    };
  };
  add("lax.top_k", {{"k", 2}}, of_shape({3, 5}), top(2));
  add("lax.top_k", {{"k", 4}}, of_shape({2, 3, 4}), top(4));
  add("lax.top_k", {{"k", 0}}, of_shape({5}), top(0));
  add(
      "lax.top_k", {{"k", 7}},
      [](DType dtype) {
        // Ties (in index order), -0 below +0, NaN and inf above everything.
        double inf = std::numeric_limits<double>::infinity();
        return Inputs{listed({3, -0.0, NAN, 0.0, 3, inf, -2}, {7}, dtype)};
      },
      top(7));
  add("sort", {{"axis", -1}}, of_shape({3, 5}),
      [](const Inputs& in) { return single(sort(in[0], -1)); });
  add("sort", {{"axis", 0}}, of_shape({4, 3}),
      [](const Inputs& in) { return single(sort(in[0], 0)); });
  using Widths = std::vector<std::pair<int64_t, int64_t>>;
  auto pad_case = [&](Shape shape, Widths widths, std::string mode_name, PadMode mode,
                      json extra = json::object()) {
    json pairs = json::array();
    for (const auto& [before, after] : widths) pairs.push_back(json::array({before, after}));
    json kwargs = {{"pad_width", pairs}, {"mode", mode_name}};
    kwargs.update(extra);
    double constant = extra.contains("constant_values") ? extra["constant_values"].get<double>()
                      : extra.contains("end_values")    ? extra["end_values"].get<double>()
                                                        : 0;
    add("pad", kwargs, of_shape(shape), [widths, mode, constant](const Inputs& in) {
      return single(pad(in[0], widths, mode, constant));
    });
  };
  pad_case({3, 4}, {{1, 2}, {2, 0}}, "edge", PadMode::kEdge);
  pad_case({3, 4}, {{2, 2}, {1, 3}}, "reflect", PadMode::kReflect);
  pad_case({3}, {{5, 4}}, "reflect", PadMode::kReflect);
  pad_case({1, 3}, {{2, 1}, {1, 1}}, "reflect", PadMode::kReflect);
  pad_case({3, 4}, {{1, 1}, {4, 2}}, "symmetric", PadMode::kSymmetric);
  pad_case({3}, {{7, 2}}, "symmetric", PadMode::kSymmetric);
  pad_case({3, 4}, {{3, 1}, {0, 5}}, "wrap", PadMode::kWrap);
  pad_case({2, 3}, {{1, 1}, {0, 2}}, "constant", PadMode::kConstant, {{"constant_values", 1.5}});
  pad_case({0, 3}, {{1, 1}, {0, 0}}, "constant", PadMode::kConstant);
  pad_case({3, 4}, {{2, 1}, {1, 3}}, "linear_ramp", PadMode::kLinearRamp, {{"end_values", 0.5}});
  pad_case({5}, {{3, 2}}, "linear_ramp", PadMode::kLinearRamp);
  pad_case({3, 4}, {{1, 2}, {2, 1}}, "maximum", PadMode::kMaximum);
  pad_case({2, 3}, {{0, 2}, {1, 0}}, "minimum", PadMode::kMinimum);
  pad_case({3, 4}, {{2, 1}, {1, 1}}, "mean", PadMode::kMean);
  pad_case({3, 4}, {{1, 1}, {2, 2}}, "median", PadMode::kMedian);
  pad_case({2, 5}, {{1, 0}, {0, 1}}, "median", PadMode::kMedian);
  for (std::string name : {"cumprod", "cummax", "cummin"}) {
    auto scan = [name](const Array& x, int64_t axis, bool reverse) {
      if (name == "cumprod") return cumprod(x, axis, reverse);
      return name == "cummax" ? cummax(x, axis, reverse) : cummin(x, axis, reverse);
    };
    add("lax." + name, {{"axis", 1}}, of_shape({3, 5}),
        [scan](const Inputs& in) { return single(scan(in[0], 1, false)); });
    add("lax." + name, {{"axis", 0}, {"reverse", true}}, of_shape({4, 3}),
        [scan](const Inputs& in) { return single(scan(in[0], 0, true)); });
    // lax takes no negative axis: kiln's -1 is its 1.
    add("lax." + name, {{"axis", 1}}, of_shape({2, 1}),
        [scan](const Inputs& in) { return single(scan(in[0], -1, false)); });
    add("lax." + name, {{"axis", 0}}, of_shape({0, 3}),
        [scan](const Inputs& in) { return single(scan(in[0], 0, false)); });
  }
  auto with_mask = [](DType dtype) {
    // Row 2 selects nothing.
    std::vector<double> mask = {1, 0, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0};
    return Inputs{smooth({3, 4}, dtype), astype(from_host(mask, Shape{3, 4}), DType::bool_)};
  };
  json where_1 = {{"where", 1}};
  add("sum", {{"axis", 1}, {"array_kwargs", where_1}}, with_mask,
      [](const Inputs& in) { return single(sum(in[0], {1}, false, in[1])); });
  add("sum", {{"array_kwargs", where_1}}, with_mask,
      [](const Inputs& in) { return single(sum(in[0], {}, false, in[1])); });
  add("prod", {{"axis", 1}, {"keepdims", true}, {"array_kwargs", where_1}}, with_mask,
      [](const Inputs& in) { return single(prod(in[0], {1}, true, in[1])); });
  add("mean", {{"axis", 1}, {"array_kwargs", where_1}}, with_mask,
      [](const Inputs& in) { return single(mean(in[0], {1}, false, in[1])); });
  add("mean", {{"axis", 0}, {"array_kwargs", where_1}}, with_mask,
      [](const Inputs& in) { return single(mean(in[0], {0}, false, in[1])); });
  add("max", {{"axis", 1}, {"initial", -1.5}, {"array_kwargs", where_1}}, with_mask,
      [](const Inputs& in) { return single(max(in[0], {1}, false, in[1], -1.5)); });
  add("min", {{"axis", 0}, {"initial", 1.0}, {"keepdims", true}, {"array_kwargs", where_1}},
      with_mask, [](const Inputs& in) { return single(min(in[0], {0}, true, in[1], 1.0)); });
}

std::vector<Case> cases() {
  std::vector<Case> list;
  auto add = [&](std::string name, json kwargs, std::function<Inputs(DType)> inputs, Function fn) {
    list.push_back({std::move(name), std::move(kwargs), std::move(inputs), std::move(fn)});
  };
  auto of_shape = [](Shape shape) { return [shape](DType dtype) { return one(shape, dtype); }; };
  auto specials = [](DType dtype) {
    double inf = std::numeric_limits<double>::infinity();
    return Inputs{listed({NAN, inf, -inf, 1.5, 0.0, -2.0}, Shape{6}, dtype)};
  };
  add("square", {}, of_shape({3, 4}), [](const Inputs& in) { return single(square(in[0])); });
  add("isnan", {}, specials, [](const Inputs& in) { return single(isnan(in[0])); });
  add("isinf", {}, specials, [](const Inputs& in) { return single(isinf(in[0])); });
  add("isfinite", {}, specials, [](const Inputs& in) { return single(isfinite(in[0])); });
  add(
      "clip", {},
      [](DType dtype) {
        return Inputs{smooth({3, 4}, dtype), listed({-1.1, -0.3, 0.2, -1.7}, {4}, dtype),
                      listed({0.9, 1.3, 0.45}, {3, 1}, dtype)};
      },
      [](const Inputs& in) { return single(clip(in[0], in[1], in[2])); });
  add("flip", {}, of_shape({2, 3, 4}), [](const Inputs& in) { return single(flip(in[0])); });
  add("flip", {{"axis", -1}}, of_shape({2, 3, 4}),
      [](const Inputs& in) { return single(flip(in[0], {-1})); });
  add("flip", {{"axis", json::array({0, 2})}}, of_shape({2, 3, 4}), [](const Inputs& in) {
    return single(flip(in[0], {0, 2}));
  });
  add("flip", {}, of_shape({0, 3}), [](const Inputs& in) { return single(flip(in[0])); });
  add("roll", {{"shift", 2}}, of_shape({3, 4}),
      [](const Inputs& in) { return single(roll(in[0], 2)); });
  add("roll", {{"shift", -1}, {"axis", 1}}, of_shape({3, 4}),
      [](const Inputs& in) { return single(roll(in[0], -1, 1)); });
  add("roll", {{"shift", json::array({1, -5})}, {"axis", json::array({0, 1})}}, of_shape({3, 4}),
      [](const Inputs& in) {
        return single(roll(in[0], {1, -5}, {0, 1}));
      });
  add("roll", {{"shift", 3}, {"axis", 0}}, of_shape({0, 2}),
      [](const Inputs& in) { return single(roll(in[0], 3, 0)); });
  add("swapaxes", {{"axis1", 0}, {"axis2", -1}}, of_shape({2, 3, 4}),
      [](const Inputs& in) { return single(swapaxes(in[0], 0, -1)); });
  add("moveaxis", {{"source", 0}, {"destination", 2}}, of_shape({2, 3, 4}),
      [](const Inputs& in) { return single(moveaxis(in[0], 0, 2)); });
  add("moveaxis", {{"source", -1}, {"destination", 0}}, of_shape({2, 3, 4}),
      [](const Inputs& in) { return single(moveaxis(in[0], -1, 0)); });
  add("tril", {}, of_shape({4, 5}), [](const Inputs& in) { return single(tril(in[0])); });
  add("tril", {{"k", -1}}, of_shape({2, 3, 3}),
      [](const Inputs& in) { return single(tril(in[0], -1)); });
  add("triu", {{"k", 1}}, of_shape({4, 5}),
      [](const Inputs& in) { return single(triu(in[0], 1)); });
  add("triu", {}, of_shape({3, 3}), [](const Inputs& in) { return single(triu(in[0])); });
  add("repeat", {{"repeats", 2}}, of_shape({2, 3}),
      [](const Inputs& in) { return single(repeat(in[0], 2)); });
  add("repeat", {{"repeats", 3}, {"axis", 1}}, of_shape({2, 3}),
      [](const Inputs& in) { return single(repeat(in[0], 3, 1)); });
  add("repeat", {{"repeats", 0}, {"axis", 0}}, of_shape({2, 3}),
      [](const Inputs& in) { return single(repeat(in[0], 0, 0)); });
  add("tile", {{"reps", json::array({2})}}, of_shape({3}),
      [](const Inputs& in) { return single(tile(in[0], {2})); });
  add("tile", {{"reps", json::array({2, 1})}}, of_shape({3}), [](const Inputs& in) {
    return single(tile(in[0], {2, 1}));
  });
  add("tile", {{"reps", json::array({2, 3})}}, of_shape({2, 2}), [](const Inputs& in) {
    return single(tile(in[0], {2, 3}));
  });
  add("tile", {{"reps", json::array({2})}}, of_shape({2, 3, 1}),
      [](const Inputs& in) { return single(tile(in[0], {2})); });
  add("split", {{"indices_or_sections", 2}, {"axis", 1}}, of_shape({2, 4}),
      [](const Inputs& in) { return split(in[0], 2, 1); });
  add("split", {{"indices_or_sections", json::array({1, 3})}, {"axis", 0}}, of_shape({5, 2}),
      [](const Inputs& in) {
        return split(in[0], Dims{1, 3}, 0);
      });
  add("split", {{"indices_or_sections", json::array({0, 5, 5})}, {"axis", 0}}, of_shape({5, 2}),
      [](const Inputs& in) {
        return split(in[0], Dims{0, 5, 5}, 0);
      });
  add("array_split", {{"indices_or_sections", 3}}, of_shape({7}),
      [](const Inputs& in) { return array_split(in[0], 3); });
  auto with_zeros = [](DType dtype) {
    return Inputs{listed({0, 1, 0, 0, 2, 3, -1, 4, 0, 0, 0, 0}, {3, 4}, dtype)};
  };
  add("any", {{"axis", 1}}, with_zeros, [](const Inputs& in) { return single(any(in[0], {1})); });
  add("all", {{"axis", 1}}, with_zeros, [](const Inputs& in) { return single(all(in[0], {1})); });
  add("any", {{"axis", 0}, {"keepdims", true}}, with_zeros,
      [](const Inputs& in) { return single(any(in[0], {0}, true)); });
  add("any", {}, of_shape({0, 3}), [](const Inputs& in) { return single(any(in[0])); });
  add("all", {}, of_shape({0, 3}), [](const Inputs& in) { return single(all(in[0])); });
  add("any", {}, specials, [](const Inputs& in) { return single(any(in[0])); });
  add("var", {}, of_shape({3, 4}), [](const Inputs& in) { return single(var(in[0])); });
  add("var", {{"axis", 1}, {"ddof", 1}}, of_shape({3, 4}),
      [](const Inputs& in) { return single(var(in[0], {1}, 1)); });
  add("var", {{"axis", 0}, {"keepdims", true}}, of_shape({3, 4}),
      [](const Inputs& in) { return single(var(in[0], {0}, 0, true)); });
  add("std", {{"axis", 0}}, of_shape({3, 4}),
      [](const Inputs& in) { return single(std(in[0], {0})); });
  add("std", {{"axis", -1}, {"ddof", 2}}, of_shape({2, 5}),
      [](const Inputs& in) { return single(std(in[0], {-1}, 2)); });
  add("logsumexp", {{"axis", 1}}, of_shape({3, 4}),
      [](const Inputs& in) { return single(logsumexp(in[0], {1})); });
  add("logsumexp", {}, of_shape({3, 4}), [](const Inputs& in) { return single(logsumexp(in[0])); });
  add("logsumexp", {{"axis", 0}, {"keepdims", true}}, of_shape({3, 4}),
      [](const Inputs& in) { return single(logsumexp(in[0], {0}, true)); });
  add(
      "logsumexp", {{"axis", 1}},
      [](DType dtype) {
        double inf = std::numeric_limits<double>::infinity();
        return Inputs{listed({-inf, -inf, 1000, 999, inf, 1, NAN, 2}, {4, 2}, dtype)};
      },
      [](const Inputs& in) { return single(logsumexp(in[0], {1})); });
  add("logsumexp", {{"axis", 0}}, of_shape({0, 3}),
      [](const Inputs& in) { return single(logsumexp(in[0], {0})); });
  add("linalg.norm", {}, of_shape({3, 4}),
      [](const Inputs& in) { return single(linalg::norm(in[0])); });
  add("linalg.norm", {{"axis", 1}, {"keepdims", true}}, of_shape({3, 4}),
      [](const Inputs& in) { return single(linalg::norm(in[0], {1}, true)); });
  for (double ord : {1.0, 3.0, 0.5, 0.0, std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    add("linalg.vector_norm", {{"ord", number(ord)}, {"axis", 1}}, of_shape({3, 4}),
        [ord](const Inputs& in) { return single(linalg::vector_norm(in[0], ord, {1})); });
  }
  add_contraction_and_nn_cases(add);
  add_scan_and_masked_reduction_cases(add);
  add_gather_scatter_cases(add);
  return list;
}

// Weights that differ along the first two axes (the same formula in jnp_crosscheck.py).
Array weights_like(const Array& out) {
  if (out.rank() == 0) return scalar(0.7, out.dtype());
  Array row = iota(out.shape(), DType::f64, 0);
  Array weights = cos(mul(row, scalar(0.3, DType::f64)));
  if (out.rank() > 1) weights = add(weights, iota(out.shape(), DType::f64, 1));
  return astype(weights, out.dtype());
}

// The gradient of sum(result * weights) over the float results, with respect to input 0.
Array gradient(const Function& fn, const Inputs& inputs) {
  auto objective = [&](const Array& first) {
    Inputs changed = inputs;
    changed[0] = first;
    Array total = scalar(0, first.dtype());
    for (const Array& out : fn(changed)) {
      if (is_floating(out.dtype())) total = add(total, sum(mul(out, weights_like(out))));
    }
    return total;
  };
  return grad(objective)(inputs[0]);
}

// The tangents of the float results along weights_like(input 0), by forward mode.
json tangents(const Function& fn, const Inputs& inputs) {
  auto of_first = [&](const Array& first) {
    Inputs changed = inputs;
    changed[0] = first;
    std::vector<Array> floats;
    for (const Array& out : fn(changed)) {
      if (is_floating(out.dtype())) floats.push_back(out);
    }
    return floats;
  };
  auto [results, pushed] =
      jvp(of_first, std::tuple{inputs[0]}, std::tuple{weights_like(inputs[0])});
  json encoded = json::array();
  for (const Array& t : pushed) encoded.push_back(encode(t));
  return encoded;
}

TEST(JnpCrosscheck, ArrayFunctionsMatchJaxNumpyInValueAndGradient) {
  json record = {{"cases", json::array()}};
  for (const Case& c : cases()) {
    for (DType dtype : {DType::f32, DType::f64}) {
      Inputs inputs = c.inputs(dtype);
      std::vector<Array> outputs = c.fn(inputs);
      json entry = {{"name", c.name},
                    {"kwargs", c.kwargs},
                    {"inputs", json::array()},
                    {"outputs", json::array()}};
      for (const Array& x : inputs) entry["inputs"].push_back(encode(x));
      for (const Array& y : outputs) entry["outputs"].push_back(encode(y));
      if (is_floating(outputs.at(0).dtype())) {
        entry["gradient"] = encode(gradient(c.fn, inputs));
        entry["tangents"] = tangents(c.fn, inputs);
      }
      record["cases"].push_back(entry);
    }
  }
  PeerReport peer = run_peer_check("jnp_crosscheck.py", record);
  EXPECT_EQ(peer.status, 0) << peer.text;
  EXPECT_THAT(peer.text, ::testing::HasSubstr(" 0 failed")) << peer.text;
  std::cout << peer.text;
}

// The other two transformations on every case, in f64, against kiln's own eager results
// (the values are checked against JAX above): jit of the function, and vmap over a batch
// of two examples, the second with its float inputs moved (integer inputs, indices among
// them, stay valid unchanged). Release only, with the cross-check: a compilation per case.
TEST(JnpCrosscheck, JitAndVmapOfEveryCaseMatchEager) {
  auto same = [](const Array& got, const Array& want, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    std::vector<double> a = values(got), b = values(want);
    for (size_t i = 0; i < a.size(); ++i) {
      bool equal = std::isnan(b[i]) ? std::isnan(a[i])
                                    : a[i] == b[i] || std::fabs(a[i] - b[i]) <=
                                                          1e-12 * std::max(1.0, std::fabs(b[i]));
      EXPECT_TRUE(equal) << what << "[" << i << "]: " << a[i] << ", eager " << b[i];
    }
  };
  int checked = 0;
  for (const Case& c : cases()) {
    Inputs inputs = c.inputs(DType::f64);
    Function fn = c.fn;
    auto flat = [fn](const std::vector<Array>& in) { return fn(in); };
    std::vector<Array> eager = fn(inputs);
    std::string label = c.name + " " + c.kwargs.dump();
    std::vector<Array> jitted;
    try {
      jitted = jit(flat)(inputs);
    } catch (const Error& error) {
      ADD_FAILURE() << label << " jit: " << error.what();
      continue;
    }
    ASSERT_EQ(jitted.size(), eager.size()) << label;
    for (size_t k = 0; k < eager.size(); ++k)
      same(jitted[k], eager[k], label + " jit " + std::to_string(k));
    Inputs second, stacked;
    for (const Array& x : inputs) {
      Array other =
          is_floating(x.dtype()) ? add(mul(x, scalar(0.5, x.dtype())), scalar(0.25, x.dtype())) : x;
      second.push_back(other);
      stacked.push_back(stack({x, other}));
    }
    std::vector<Array> batched;
    try {
      batched = vmap(flat)(stacked);
    } catch (const Error& error) {
      ADD_FAILURE() << label << " vmap: " << error.what();
      continue;
    }
    std::vector<Array> eager_second = fn(second);
    ASSERT_EQ(batched.size(), eager.size()) << label;
    for (size_t k = 0; k < eager.size(); ++k) {
      same(take(batched[k], from_host<int32_t>({0}, {}), 0), eager[k],
           label + " vmap example 0 result " + std::to_string(k));
      same(take(batched[k], from_host<int32_t>({1}, {}), 0), eager_second[k],
           label + " vmap example 1 result " + std::to_string(k));
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

// Small cases worked by hand, so that the index arithmetic also runs under ASan (the
// comparison with JAX runs in the release build only).
TEST(ArrayFunctions, SmallCasesWorkedByHand) {
  using V = std::vector<double>;
  Array x = counting({2, 3});  // [[0 1 2] [3 4 5]]
  EXPECT_EQ(values(flip(x)), (V{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values(flip(x, {1})), (V{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(values(roll(x, 1)), (V{5, 0, 1, 2, 3, 4}));
  EXPECT_EQ(values(roll(x, -1, 1)), (V{1, 2, 0, 4, 5, 3}));
  EXPECT_EQ(values(swapaxes(x, 0, 1)), (V{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(values(tril(x)), (V{0, 0, 0, 3, 4, 0}));
  EXPECT_EQ(values(triu(x, 1)), (V{0, 1, 2, 0, 0, 5}));
  EXPECT_EQ(values(repeat(x, 2, 1)), (V{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}));
  EXPECT_EQ(tile(x, {2, 1}).shape(), (Shape{4, 3}));
  EXPECT_EQ(values(tile(counting({2}), {3})), (V{0, 1, 0, 1, 0, 1}));
  std::vector<Array> parts = array_split(counting({7}), 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(values(parts[0]), (V{0, 1, 2}));
  EXPECT_EQ(values(parts[2]), (V{5, 6}));
  EXPECT_EQ(values(any(x - 3.0, {1})), (V{1, 1}));
  EXPECT_EQ(values(all(x, {1})), (V{0, 1}));
  for (double v : values(var(x, {1}))) EXPECT_NEAR(v, 2.0 / 3, 1e-7);
  EXPECT_EQ(values(moveaxis(counting({1, 2, 3}), 2, 0)).size(), 6u);
  EXPECT_EQ(moveaxis(counting({1, 2, 3}), 2, 0).shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(values(einsum("ij->ji", x)), (V{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(values(einsum("ij,j->i", x, counting({3}))), (V{5, 14}));
  EXPECT_EQ(values(einsum("ii", counting({2, 2}))), (V{3}));
  EXPECT_EQ(einsum("...j,...j->...", counting({4, 1, 3}), counting({5, 3})).shape(), (Shape{4, 5}));
}

TEST(ScanFunctions, NaNPropagatesAndIntegersScan) {
  using V = std::vector<double>;
  Array x = from_host(std::vector<float>{3, NAN, 1, 4}, Shape{4});
  std::vector<double> running_max = values(cummax(x, 0));
  EXPECT_EQ(running_max[0], 3);
  for (size_t i = 1; i < 4; ++i) EXPECT_TRUE(std::isnan(running_max[i])) << i;
  Array integers = astype(from_host(std::vector<double>{2, -1, 3, 5, 0}, Shape{5}), DType::i64);
  EXPECT_EQ(values(cumprod(integers, 0)), (V{2, -2, -6, -30, 0}));
  EXPECT_EQ(values(cummax(integers, 0)), (V{2, 2, 3, 5, 5}));
  EXPECT_EQ(values(cummin(integers, 0, true)), (V{-1, -1, 0, 0, 0}));
  EXPECT_EQ(cumprod(integers, 0).dtype(), DType::i64);
  Array flags = astype(from_host(std::vector<double>{1, 1, 0, 1}, Shape{4}), DType::bool_);
  EXPECT_EQ(cumprod(flags, 0).dtype(), DType::i32);
  EXPECT_EQ(values(cumprod(flags, 0)), (V{1, 1, 0, 0}));
  // Masked reductions, integers included.
  Array mask = astype(from_host(std::vector<double>{1, 0, 1, 1, 0}, Shape{5}), DType::bool_);
  EXPECT_EQ(values(sum(integers, {}, false, mask)), (V{10}));
  EXPECT_EQ(values(max(integers, {}, false, mask, -100)), (V{5}));
  EXPECT_EQ(values(min(integers, {}, false, mask, -100)), (V{-100}));
}

// Bad arguments name the function and what was expected.
TEST(ArrayFunctions, BadArgumentsAreNamed) {
  Array matrix = ones({2, 4});
  EXPECT_TRUE(fails_with(
      [&] { (void)split(matrix, 3, 1); },
      {"split: axis 1 of f32[2,4] (size 4) does not split into 3 equal parts", "array_split"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)split(matrix, Dims{-1, 2}, 1);
      },
      {"split: the indices must increase within [0, 4]", "got -1, 2"}));
  EXPECT_TRUE(fails_with([&] { (void)split(matrix, Dims{3, 2}, 1); }, {"got 3, 2"}));
  EXPECT_TRUE(fails_with([&] { (void)split(matrix, Dims{5}, 1); }, {"got 5"}));
  EXPECT_TRUE(fails_with([&] { (void)tril(ones({3})); },
                         {"tril: the operand must have at least 2 axes", "f32[3]"}));
  EXPECT_TRUE(fails_with([&] { (void)roll(matrix, {1}, {0, 1}); }, {"roll: 1 shifts for 2 axes"}));
  EXPECT_TRUE(fails_with([&] { (void)repeat(matrix, -1); }, {"repeat: repeats must be >= 0"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)tile(matrix, {2, -1});
      },
      {"tile: every repetition must be >= 0"}));
  EXPECT_TRUE(fails_with([&] { (void)var(matrix, {}, -1); }, {"var: ddof must be >= 0"}));
  EXPECT_TRUE(fails_with([&] { (void)swapaxes(matrix, 0, 2); }, {"swapaxes"}));
  EXPECT_TRUE(fails_with([&] { (void)array_split(matrix, 0); }, {"array_split: sections"}));
  EXPECT_TRUE(fails_with([&] { (void)flip(Array()); }, {"flip: the operand is an empty Array"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)sum(matrix, {}, false, ones({2, 4}));
      },
      {"sum: where must be a bool mask", "f32[2,4]"}));
  EXPECT_TRUE(fails_with([&] { (void)mean(matrix, {}, false, astype(ones({3}), DType::bool_)); },
                         {"mean", "f32[2,4]", "bool[3]"}));
  EXPECT_TRUE(fails_with([&] { (void)cummax(matrix, 2); }, {"cummax", "axis 2"}));
  EXPECT_TRUE(
      fails_with([&] { (void)top_k(matrix, 5); },
                 {"top_k: k = 5 is outside [0, 4], the size of the last axis of f32[2,4]"}));
  EXPECT_TRUE(fails_with([&] { (void)top_k(matrix, -1); }, {"top_k: k = -1 is outside [0, 4]"}));
  EXPECT_TRUE(fails_with([&] { (void)top_k(scalar(1.0), 1); },
                         {"top_k: the operand must have at least one axis"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)pad(matrix, {{1, 1}}, PadMode::kEdge);
      },
      {"pad: 1 (before, after) pairs for f32[2,4] (2 axes)"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)pad(matrix, {{1, -1}, {0, 0}}, PadMode::kWrap);
      },
      {"pad: the widths of axis 0 are (1, -1)"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)pad(ones({0, 2}), {{1, 0}, {0, 0}}, PadMode::kReflect);
      },
      {"pad: mode reflect cannot extend axis 0 of f32[0,2]: it is empty", "kConstant"}));
  EXPECT_TRUE(fails_with([&] { (void)einsum("ij,jk->ik", matrix); },
                         {"einsum: \"ij,jk->ik\" names 2 operand(s), 1 given"}));
  EXPECT_TRUE(fails_with([&] { (void)einsum("ijk->i", matrix); },
                         {"einsum: operand 0 is f32[2,4], but its subscripts name 3 axes"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)einsum("ij,ij->i", matrix, ones({2, 3}));
      },
      {"'j' has size 4 where it first appears and 3 in operand 1"}));
  EXPECT_TRUE(fails_with([&] { (void)einsum("i1->i", matrix); }, {"'1' is not a letter"}));
  EXPECT_TRUE(
      fails_with([&] { (void)einsum("ij->ii", matrix); }, {"'i' appears twice in the output"}));
  EXPECT_TRUE(
      fails_with([&] { (void)einsum("ij->k", matrix); }, {"the output's 'k' is in no operand"}));
  EXPECT_TRUE(fails_with(
      [&] {
        (void)einsum("...j->j", ones({3, 2, 4}));
      },
      {"need a '...' in the output"}));
  EXPECT_TRUE(fails_with([&] { (void)einsum("i...j...->i", matrix); }, {"more than one ellipsis"}));
}

}  // namespace
}  // namespace kiln::testing
