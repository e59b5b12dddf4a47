// Writes one small ONNX model per case of the translation table (src/artifact/onnx_export.cc)
// with an input and kiln's own output, for onnx_runtime_check.py to run in ONNX Runtime:
//   onnx_cases DIR   ->   DIR/<case>/{model.onnx, input.npy, expected.npy}
// Each case is a function of weights (initializers in the model) and one input, traced to a
// program and translated; kiln's expected output is the function run eagerly, the
// reference. The cases cover every translated primitive with the shapes and edge cases
// that change its translation: batched and transposed contractions, padded, strided,
// dilated and grouped windows, broadcasting, an empty batch, NaN and infinities.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "artifact/onnx_export.h"
#include "data/npy.h"
#include "ir/program.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/tracing.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using Inputs = std::vector<Array>;  // the weights, then the input

struct Case {
  std::string name;
  Inputs inputs;
  std::function<Array(const Inputs&)> f;
};

Array normal(uint64_t seed, Shape shape, double scale = 1) {
  return random::normal(random::key(seed), std::move(shape)) * scale;
}

// Values with NaN, both infinities, zeros of both signs and ordinary numbers.
Array special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {std::nanf(""), inf, -inf, 0.0f, -0.0f, 1.5f, -2.25f, 3.0f};
  return from_host<float>(v, Shape{2, 4});
}

void write(const fs::path& path, const Array& array) {
  HostArray host = array.to_host();
  data::RawArray raw;
  raw.dtype = host.aval.dtype;
  raw.shape.assign(host.aval.shape.dims().begin(), host.aval.shape.dims().end());
  const auto* bytes = reinterpret_cast<const uint8_t*>(host.bytes.data());
  raw.bytes.assign(bytes, bytes + host.bytes.size());
  data::write_npy(path, raw);
}

std::vector<Case> unary_cases() {
  struct Unary {
    const char* name;
    std::function<Array(const Array&)> f;
  };
  std::vector<Unary> ops = {
      {"neg", [](const Array& x) { return -x; }},
      {"abs", [](const Array& x) { return abs(x); }},
      {"sign", [](const Array& x) { return sign(x); }},
      {"exp", [](const Array& x) { return exp(x); }},
      {"expm1", [](const Array& x) { return expm1(x); }},
      {"log", [](const Array& x) { return log(abs(x) + 0.1); }},
      {"log1p", [](const Array& x) { return log1p(abs(x)); }},
      {"sqrt", [](const Array& x) { return sqrt(abs(x)); }},
      {"rsqrt", [](const Array& x) { return rsqrt(abs(x) + 0.1); }},
      {"tanh", [](const Array& x) { return tanh(x); }},
      {"logistic", [](const Array& x) { return logistic(x); }},
      {"sin", [](const Array& x) { return sin(x); }},
      {"cos", [](const Array& x) { return cos(x); }},
      {"floor", [](const Array& x) { return floor(x); }},
      {"ceil", [](const Array& x) { return ceil(x); }},
      {"erf", [](const Array& x) { return erf(x); }},
  };
  std::vector<Case> cases;
  for (const Unary& op : ops) {
    auto f = op.f;
    cases.push_back({fmt::format("unary_{}", op.name),
                     {normal(1, Shape{4, 6}, 2)},
                     [f](const Inputs& in) { return f(in[0]); }});
    // NaN and the infinities pass through each function as kiln's kernels pass them.
    cases.push_back({fmt::format("unary_{}_special", op.name),
                     {special_values()},
                     [f](const Inputs& in) { return f(in[0]); }});
  }
  return cases;
}

std::vector<Case> binary_cases() {
  struct Binary {
    const char* name;
    std::function<Array(const Array&, const Array&)> f;
  };
  std::vector<Binary> ops = {
      {"add", [](const Array& w, const Array& x) { return x + w; }},
      {"sub", [](const Array& w, const Array& x) { return x - w; }},
      {"mul", [](const Array& w, const Array& x) { return x * w; }},
      {"div", [](const Array& w, const Array& x) { return x / w; }},
      {"rem", [](const Array& w, const Array& x) { return rem(x, w); }},
      {"pow", [](const Array& w, const Array& x) { return pow(abs(x) + 0.5, w); }},
      {"max", [](const Array& w, const Array& x) { return maximum(x, w); }},
      {"min", [](const Array& w, const Array& x) { return minimum(x, w); }},
      {"compare_select",
       [](const Array& w, const Array& x) {
         return where(x > w, x, w * 2) + where(x <= w, x, -w) + where(x == w, x, w) +
                where(x != w, w, x) + where(x < w, x, w) + where(x >= w, w, x);
       }},
      {"logical",
       [](const Array& w, const Array& x) {
         Array a = x > 0, b = w > 0;
         return bitwise_xor(bitwise_and(a, b), bitwise_or(logical_not(a), b));
       }},
  };
  std::vector<Case> cases;
  for (const Binary& op : ops) {
    auto f = op.f;
    // The weight broadcasts against the input: [1, 6] against [4, 6].
    cases.push_back({fmt::format("binary_{}", op.name),
                     {normal(2, Shape{1, 6}, 2), normal(3, Shape{4, 6}, 2)},
                     [f](const Inputs& in) { return f(in[0], in[1]); }});
  }
  cases.push_back({"binary_max_special",
                   {normal(4, Shape{2, 4}), special_values()},
                   [](const Inputs& in) { return maximum(in[1], in[0]) + minimum(in[1], in[0]); }});
  cases.push_back({"is_finite", {special_values()}, [](const Inputs& in) {
                     return where(is_finite(in[0]), in[0], zeros_like(in[0]));
                   }});
  cases.push_back({"convert", {normal(5, Shape{3, 5}, 10)}, [](const Inputs& in) {
                     return astype(astype(in[0], DType::i32), DType::f64) * 0.5;
                   }});
  return cases;
}

std::vector<Case> contraction_cases() {
  return {
      {"matmul",
       {normal(6, Shape{5, 7}), normal(7, Shape{3, 5})},
       [](const Inputs& in) { return matmul(in[1], in[0]); }},
      {"matmul_empty_batch",
       {normal(6, Shape{5, 7}), zeros(Shape{0, 5})},
       [](const Inputs& in) { return matmul(in[1], in[0]); }},
      {"dot_general_batched",
       {normal(8, Shape{2, 4, 6}), normal(9, Shape{2, 3, 4})},
       [](const Inputs& in) { return dot_general(in[1], in[0], {2}, {1}, {0}, {0}); }},
      {"dot_general_transposed",
       {normal(10, Shape{6, 4}), normal(11, Shape{4, 3})},
       [](const Inputs& in) { return dot_general(in[1], in[0], {0}, {1}); }},
      // Two contracting axes in another order, a batch axis that is not the first.
      {"dot_general_general",
       {normal(12, Shape{5, 4, 2, 7}), normal(13, Shape{2, 3, 4, 5})},
       [](const Inputs& in) {
         return dot_general(in[1], in[0], {2, 3}, {1, 0}, {0}, {2});
       }},
      {"conv_same_strided",
       {normal(14, Shape{3, 3, 3, 4}), normal(15, Shape{2, 9, 9, 3})},
       [](const Inputs& in) {
         return conv2d(in[1], in[0], {2, 2}, Padding::kSame);
       }},
      {"conv_dilated_grouped",
       {normal(16, Shape{3, 3, 2, 6}), normal(17, Shape{1, 10, 10, 4})},
       [](const Inputs& in) {
         return conv2d(in[1], in[0], {1, 1}, Padding::kValid, {2, 2}, 2);
       }},
      {"conv_asymmetric_padding",
       {normal(18, Shape{2, 3, 2, 3}), normal(19, Shape{2, 6, 5, 2})},
       [](const Inputs& in) {
         return conv_general_dilated(in[1], in[0], {1, 2}, {1, 0}, {0, 2}, {1, 1}, {1, 1});
       }},
      {"max_pool_padded",
       {normal(20, Shape{2, 7, 7, 3})},
       [](const Inputs& in) {
         return max_pool(in[0], {3, 3}, {2, 2}, Padding::kSame);
       }},
      {"avg_pool",
       {normal(21, Shape{2, 6, 6, 2})},
       [](const Inputs& in) {
         return avg_pool(in[0], {2, 2}, {2, 2});
       }},
      {"avg_pool_padded",
       {normal(22, Shape{1, 5, 5, 3})},
       [](const Inputs& in) {
         return avg_pool(in[0], {3, 3}, {2, 2}, Padding::kSame);
       }},
  };
}

std::vector<Case> shape_cases() {
  return {
      {"reshape_transpose",
       {normal(23, Shape{2, 3, 4})},
       [](const Inputs& in) {
         return transpose(reshape(in[0], Shape{4, 6}), {1, 0});
       }},
      {"broadcast",
       {normal(24, Shape{3, 1}), normal(25, Shape{2, 3, 4})},
       [](const Inputs& in) {
         return in[1] + broadcast_in_dim(reshape(in[0], Shape{3}), Shape{2, 3, 4}, {1}) +
                broadcast_to(scalar(2.0f), Shape{2, 3, 4});
       }},
      {"slice_strided",
       {normal(26, Shape{7, 9})},
       [](const Inputs& in) {
         return slice(in[0], {1, 0}, {7, 9}, {2, 3});
       }},
      {"concatenate",
       {normal(27, Shape{2, 3}), normal(28, Shape{2, 5})},
       [](const Inputs& in) {
         return concatenate({in[1], in[0], in[1]}, 1);
       }},
      {"pad",
       {normal(29, Shape{3, 4})},
       [](const Inputs& in) {
         return pad(in[0], {1, 0}, {2, 3}, {}, -1.5);
       }},
      {"iota",
       {normal(30, Shape{3, 4})},
       [](const Inputs& in) {
         return in[0] + astype(iota(Shape{3, 4}, DType::i32, 1), DType::f32);
       }},
  };
}

std::vector<Case> reduction_and_index_cases() {
  std::vector<int32_t> ids = {0, 9, 3, 3, 12, -4, 5, 1};  // 12 and -4 clipped
  std::vector<int32_t> in_range = {0, 9, 3, 3, 7, 2};
  return {
      {"reduce",
       {normal(31, Shape{3, 4, 5})},
       [](const Inputs& in) {
         return sum(in[0], {1}) + max(in[0], {1}) + min(in[0], {1}) + prod(in[0], {1}) +
                mean(in[0], {1});
       }},
      {"reduce_all_axes",
       {normal(32, Shape{3, 4})},
       [](const Inputs& in) {
         return sum(in[0]) + max(in[0], {0, 1});
       }},
      {"argmax",
       {normal(33, Shape{4, 6})},
       [](const Inputs& in) { return argmax(in[0], 1) + argmin(in[0], 1); }},
      {"argmax_i64",
       {normal(34, Shape{5, 3})},
       [](const Inputs& in) { return argmax(in[0], 0, DType::i64); }},
      {"cumsum",
       {normal(35, Shape{3, 5})},
       [](const Inputs& in) { return cumsum(in[0], 1) * cumsum(in[0], 0, true); }},
      {"take",
       {normal(36, Shape{10, 4}), from_host<int32_t>(in_range, Shape{2, 3})},
       [](const Inputs& in) { return take(in[0], in[1], 0); }},
      {"take_clipped",
       {normal(37, Shape{10, 4}), from_host<int32_t>(ids, Shape{2, 4})},
       [](const Inputs& in) { return take(in[0], in[1], 0, IndexMode::kClip); }},
  };
}

void write_case(const fs::path& dir, const Case& c) {
  fs::create_directories(dir);
  TracedProgram traced = make_program(c.f, c.inputs);
  artifact::OnnxGraph graph;
  graph.name = c.name;
  for (size_t i = 0; i + 1 < c.inputs.size(); ++i) {
    graph.weight_names.push_back(fmt::format("w{}", i));
    graph.weights.push_back(c.inputs[i]);
  }
  std::string bytes = artifact::onnx_model(*traced.program, graph);
  std::ofstream(dir / "model.onnx", std::ios::binary) << bytes;
  write(dir / "input.npy", c.inputs.back());
  write(dir / "expected.npy", c.f(c.inputs));
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc != 2) {
    std::cerr << "usage: onnx_cases DIR\n";
    return 2;
  }
  fs::path root = argv[1];
  std::vector<Case> cases;
  for (auto family :
       {unary_cases, binary_cases, contraction_cases, shape_cases, reduction_and_index_cases}) {
    for (Case& c : family()) cases.push_back(std::move(c));
  }
  try {
    for (const Case& c : cases) write_case(root / c.name, c);
  } catch (const Error& e) {
    std::cerr << "onnx_cases: " << e.what() << "\n";
    return 1;
  }
  std::cout << cases.size() << " cases written to " << root.string() << "\n";
  return 0;
}
