// Golden program text: programs traced from real functions print exactly as the files in
// tests/ir/golden/ say, parse back, print identically again, and verify. Together the
// cases use every kind of params field and every kind of literal.
// Regenerate the files with KILN_UPDATE_GOLDEN=1 (then review the diff).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kiln/control_flow.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "support/source_tree.h"
#include "transforms/eval.h"

namespace kiln {
namespace {

struct GoldenCase {
  std::string name;
  std::function<TracedProgram()> trace;
};

std::string golden_path(const std::string& name) {
  return (kiln::testing::source_dir() / "tests/ir/golden/").string() + name + ".txt";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool updating_goldens() {
  const char* update = std::getenv("KILN_UPDATE_GOLDEN");
  return update != nullptr && std::string(update) == "1";
}

// A weakly typed scalar (as a C++ number in an expression would be).
Array weak(double value, const Array& like) {
  return detail::weak_scalar_like(value, true, like);
}

Array relu(const Array& x) {
  return maximum(x, weak(0.0, x));
}

TracedProgram mlp_layer() {
  auto layer = [](const Array& x, const Array& w, const Array& b) {
    auto scope = named_scope("mlp");
    auto dense = named_scope("dense1");
    return relu(matmul(x, w) + b);
  };
  return make_program(layer, zeros({128, 784}), zeros({784, 512}), zeros({512}));
}

TracedProgram softmax() {
  auto f = [](const Array& x) {
    auto scope = named_scope("softmax");
    Array shifted = x - stop_gradient(max(x, {1}, true));
    Array e = exp(shifted);
    return e / sum(e, {1}, true);
  };
  return make_program(f, zeros({8, 10}));
}

// The gradient of a small classifier's loss: many equations, scopes under grad/.
TracedProgram mlp_gradient() {
  auto loss = [](const Array& w, const Array& x, const Array& labels) {
    Array logits = [&] {
      auto scope = named_scope("dense");
      return matmul(x, w);
    }();
    Array shifted = logits - stop_gradient(max(logits, {1}, true));
    Array log_probs = shifted - log(sum(exp(shifted), {1}, true));
    return -mean(sum(log_probs * one_hot(labels, 10), {1}));
  };
  auto f = [&](const Array& w, const Array& x, const Array& labels) {
    return grad(loss)(w, x, labels);
  };
  return make_program(f, zeros({16, 10}), zeros({4, 16}), zeros({4}, DType::i32));
}

// Slices, pads, concatenation, transposes, reshapes, iota, dynamic slices, converts.
TracedProgram layout() {
  auto f = [](const Array& x, const Array& start) {
    Array sliced = slice(x, {1, 0}, {7, 9}, {2, 3});           // f32[3,3]
    Array padded = pad(sliced, {-1, 2}, {1, 0}, {1, 1}, 0.5);  // negative low, interior: [5,7]
    Array joined = concatenate({padded, padded + 1.0}, 1);
    Array flat = reshape(transpose(joined), {-1});
    Array counted = iota({2, 6}, DType::i32, 1).astype(DType::bf16);
    Array window = dynamic_slice(x, start, {2, 6});
    Array updated = dynamic_update_slice(x, window * 2.0, start);
    return std::vector<Array>{flat, counted, updated, bitcast_convert_type(window, DType::u32),
                              broadcast_in_dim(sliced, {2, 3, 3}, {1, 2})};
  };
  return make_program(f, zeros({8, 9}), zeros({2}, DType::i32));
}

// Gather and scatter with every index mode and batch dims.
TracedProgram indexing() {
  auto f = [](const Array& table, const Array& ids, const Array& rows) {
    Array picked = take(table, ids, 0, IndexMode::kClip);
    Array filled = take(table, ids, 1, IndexMode::kFill);
    Array per_row = take_along_axis(table, rows, 1);
    Array set = table.at(ids).set(picked * 0.0);
    Array added = table.at(ids).add(1.0);
    return std::vector<Array>{picked, filled, per_row, set, added};
  };
  return make_program(f, zeros({5, 6}), zeros({3}, DType::i32), zeros({5}, DType::i32));
}

// Convolutions (strided, grouped, dilated, transposed) and pooling windows.
TracedProgram conv_pool() {
  auto f = [](const Array& x, const Array& w, const Array& depthwise) {
    Array y = conv2d(x, w, {2, 2}, Padding::kSame);                        // [2,8,8,8]
    Array z = conv2d(y, depthwise, {1, 1}, Padding::kValid, {2, 2}, 8);    // [2,4,4,8]
    Array up = conv_general_dilated(z, depthwise, {1, 1}, {1, 1}, {1, 1},  // transposed
                                    {2, 2}, {1, 1}, 8);
    return std::vector<Array>{max_pool(up, {2, 2}, {2, 2}, Padding::kSame),
                              avg_pool(z, {3, 3}, {1, 1}, Padding::kValid)};
  };
  return make_program(f, zeros({2, 16, 16, 3}), zeros({3, 3, 3, 8}), zeros({3, 3, 1, 8}));
}

// dot_general with batch dimensions and a preferred element type; 16-bit floats.
TracedProgram contraction() {
  auto f = [](const Array& a, const Array& b, const Array& v) {
    // One operation per statement: the order of a call's arguments is the compiler's choice,
    // and the golden text must not depend on it.
    Array batched = matmul(a, b);
    Array a16 = a.astype(DType::bf16);
    Array b16 = b.astype(DType::bf16);
    Array wide = dot_general(a16, b16, {2}, {1}, {0}, {0}, DType::f32);
    Array left = v.astype(DType::f16);
    Array right = v.astype(DType::f16);
    Array vec = matmul(left, right);
    return std::vector<Array>{batched + wide, vec};
  };
  return make_program(f, zeros({4, 3, 5}), zeros({4, 5, 2}), zeros({7}));
}

// Reductions, arg reductions, scans and sorts (several results).
TracedProgram reduce_sort() {
  auto f = [](const Array& x, const Array& k) {
    Array total = sum(x, {0, 1});
    Array biggest = max(x, {1});
    Array smallest = min(x, {0});
    Array product = prod(x, {});
    Array where_max = argmax(x, 1, DType::i64);
    Array where_min = argmin(x, 0);
    Array running = cumsum(x, 1, true);
    std::vector<Array> sorted = sort(std::vector<Array>{k, x}, 0, 1);
    Array order = argsort(x, -1);
    return std::vector<Array>{total,     biggest, smallest,  product,   where_max,
                              where_min, running, sorted[0], sorted[1], order};
  };
  return make_program(f, zeros({4, 6}), zeros({4, 6}, DType::i32));
}

// Literals of every kind: weak and strong, bool, ints of each width, 16-bit floats, NaN
// and infinities, and i64 values beyond 2^53.
Array weak_f32(float value) {
  return from_host_bytes(&value, AbstractValue(Shape{}, DType::f32, true), nullptr, CallSite());
}

TracedProgram literals() {
  Array big = from_host<int64_t>({-9007199254740993LL}, {});
  Array half = scalar(6e-8, DType::f16);
  Array brain = scalar(0.1, DType::bf16);
  Array byte = scalar(200, DType::u8);
  Array word = scalar(4294967295.0, DType::u32);
  Array yes = scalar(1, DType::bool_);
  Array two = weak_f32(2.0f);
  auto f = [&](const Array& x, const Array& i, const Array& b, const Array& s) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    // One operation per statement where two could run in either order (see contraction).
    Array finite = is_finite(x);
    Array nan_or_x = where(finite, x, weak(std::numeric_limits<double>::quiet_NaN(), x));
    Array clipped = minimum(maximum(nan_or_x, weak(-kInf, x)), weak(kInf, x));
    Array tenth = clipped * 0.1;
    Array tiny = x.astype(DType::f64) * scalar(1e-300, DType::f64);
    Array scaled = tenth + tiny;
    Array ints = (i + 3) * big;
    Array halves = x.astype(DType::f16) * half;
    Array h = halves + brain.astype(DType::f16) + two;
    Array bytes = b.astype(DType::u8) + byte;
    Array words = b.astype(DType::u32) ^ word;
    Array flags = b & yes;
    Array still_weak = s * 3.0 - two;  // weak with weak stays weak
    return std::vector<Array>{scaled, ints, h, bytes, words, flags, still_weak};
  };
  return make_program(f, zeros({3}), zeros({3}, DType::i32), zeros({3}, DType::bool_),
                      weak_f32(0.0f));
}

// Names where scopes need quotes, and nested scopes.
TracedProgram scopes() {
  auto f = [](const Array& x) {
    auto outer = named_scope("block 1");
    Array y = exp(x);
    {
      auto odd = named_scope("at @home \"quoted\"");
      y = y * y;
    }
    auto inner = named_scope("tab\there");
    return log(y);
  };
  return make_program(f, zeros({2}));
}

// Sub-programs printed nested: a scan whose body closes over an outer input and holds a
// cond, and a while_loop; scopes inside sub-programs print too.
TracedProgram control_flow() {
  auto f = [](const Array& w, const Array& xs, const Array& p) {
    auto step = [&](const Array& c, const Array& x) {
      auto scope = named_scope("cell");
      Array next = tanh(c * w + x);
      Array y = cond(
          p, [](const Array& v) { return v * 2.0; }, [](const Array& v) { return -v; }, next);
      return std::pair{next, y};
    };
    auto [h, ys] = scan(step, zeros({3}), xs, {.reverse = true, .unroll = 2});
    Array n = while_loop([](const Array& v) { return sum(v) < 10.0; },
                         [](const Array& v) { return v + 1.0; }, h);
    return std::pair{n, ys};
  };
  return make_program(f, zeros({3}), zeros({4, 3}), scalar(1, DType::bool_));
}

std::vector<GoldenCase> golden_cases() {
  return {
      {"mlp_layer", mlp_layer},     {"softmax", softmax},          {"mlp_gradient", mlp_gradient},
      {"layout", layout},           {"indexing", indexing},        {"conv_pool", conv_pool},
      {"contraction", contraction}, {"reduce_sort", reduce_sort},  {"literals", literals},
      {"scopes", scopes},           {"control_flow", control_flow}};
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, PrintsAsTheFileParsesBackAndPrintsIdentically) {
  const GoldenCase& golden = GetParam();
  TracedProgram traced = golden.trace();
  const PrintOptions options{.show_scopes = true};
  std::string text = print_program(*traced.program, options);
  verify(*traced.program);
  std::string path = golden_path(golden.name);
  if (updating_goldens()) {
    std::ofstream(path, std::ios::binary) << text << "\n";
  }
  std::string expected = read_file(path);
  ASSERT_FALSE(expected.empty()) << path << " is missing; run with KILN_UPDATE_GOLDEN=1";
  EXPECT_EQ(text + "\n", expected)
      << path << " differs from the printed program; if the change is intended, rerun with "
      << "KILN_UPDATE_GOLDEN=1 and review the diff";

  Program parsed = parse_program(expected);
  verify(parsed);
  EXPECT_EQ(print_program(parsed, options) + "\n", expected);
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Programs, Golden, ::testing::ValuesIn(golden_cases()), case_name);

// A program whose only constants are literals runs the same after printing and parsing.
TEST(GoldenRun, ParsedLiteralsProgramComputesTheSameValues) {
  TracedProgram traced = literals();
  Program parsed = parse_program(print_program(*traced.program));
  std::vector<Array> inputs = {from_host<float>({1.5f, -INFINITY, NAN}, {3}),
                               from_host<int32_t>({1, -2, 1 << 30}, {3}),
                               from_host<bool>({true, false, true}, {3}), weak_f32(0.25f)};
  std::vector<Array> expected = eval_program(*traced.program, inputs, CallSite());
  std::vector<Array> actual = eval_program(parsed, inputs, CallSite());
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    HostArray want = expected[i].to_host();
    HostArray got = actual[i].to_host();
    EXPECT_EQ(got.aval, want.aval) << "output " << i;
    EXPECT_EQ(got.bytes, want.bytes) << "output " << i;
  }
}

// Damaged program text never crashes the parser: each golden file with characters
// deleted, repeated or replaced either still parses (and verifies) or raises a kiln::Error
// that says where.
TEST(GoldenDamaged, EveryMutationParsesOrFailsWithAPosition) {
  std::mt19937_64 rng(7);
  const std::string alphabet = "{}()[]:;.=~,#@\"-0123456789abcxyz_ \n";
  int parsed = 0, failed = 0;
  for (const GoldenCase& golden : golden_cases()) {
    std::string original = read_file(golden_path(golden.name));
    ASSERT_FALSE(original.empty());
    for (int trial = 0; trial < 200; ++trial) {
      std::string text = original;
      int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        size_t at = rng() % text.size();
        switch (rng() % 3) {
          case 0:
            text.erase(at, 1 + rng() % 4);
            break;
          case 1:
            text.insert(at, text.substr(rng() % text.size(), 1 + rng() % 6));
            break;
          default:
            text[at] = alphabet[rng() % alphabet.size()];
            break;
        }
        if (text.empty()) text = "{";
      }
      try {
        Program program = parse_program(text);
        verify(program);
        ++parsed;
      } catch (const Error& error) {
        EXPECT_EQ(error.message().rfind("program text ", 0), 0u)
            << "an error without a position for:\n"
            << text << "\n"
            << error.what();
        ++failed;
      }
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(parsed, 0);  // some damage (a renamed variable, a changed digit) is still valid
}

}  // namespace
}  // namespace kiln
