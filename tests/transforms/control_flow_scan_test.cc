// kiln::scan and kiln::fori_loop with static bounds: results against plain loops and ops
// (cumsum), reverse and unroll, lengths 0 and 1, pytree carries, random keys split in the
// body, gradients (against an unrolled loop, check_grads, grad of grad, closed-over
// weights), vmap against a loop over examples, the program text, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kiln/checkpoint.h"
#include "kiln/control_flow.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/vmap.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "support/text.h"
#include "transforms/rnn_cell.h"

namespace kiln {
namespace {

using ::kiln::testing::count_of;

using testing::example;
using testing::fails_with;
using ::testing::HasSubstr;
using testing::rnn_loss_scan;
using testing::values;

// f(carry, x) = (carry + x, carry + x): the running sum.
auto running_sum = [](const Array& c, const Array& x) {
  Array s = c + x;
  return std::pair{s, s};
};

TEST(Scan, CumulativeSumMatchesCumsum) {
  Array xs = from_host<float>({1, 2, 3, 4, 5}, {5});
  auto [total, partial] = scan(running_sum, scalar(0.0), xs);
  EXPECT_EQ(total.item<float>(), 15.0f);
  EXPECT_EQ(values(partial), values(cumsum(xs, 0)));
  EXPECT_EQ(partial.dtype(), DType::f32);
  EXPECT_FALSE(partial.weak_type());
}

TEST(Scan, ReverseRunsFromTheEndAndKeepsYsIndexedByStep) {
  Array xs = from_host<float>({1, 2, 3, 4}, {4});
  auto [total, partial] = scan(running_sum, scalar(0.0), xs, {.reverse = true});
  EXPECT_EQ(total.item<float>(), 10.0f);
  EXPECT_EQ(values(partial), values(cumsum(xs, 0, true)));
}

TEST(Scan, UnrollGivesIdenticalBits) {
  Array xs = random::normal(random::key(3), {7, 3});
  auto step = [](const Array& c, const Array& x) {
    Array next = tanh(c * 1.3 + x);
    return std::pair{next, sin(next)};
  };
  auto [c1, y1] = scan(step, zeros({3}), xs, {.unroll = 1});
  for (int64_t unroll : {2, 3, 7, 10}) {
    auto [c, y] = scan(step, zeros({3}), xs, {.unroll = unroll});
    EXPECT_EQ(values(c), values(c1)) << "unroll " << unroll;
    EXPECT_EQ(values(y), values(y1)) << "unroll " << unroll;
  }
}

TEST(Scan, LengthZeroReturnsTheInitialCarryAndEmptyYs) {
  Array xs = zeros({0, 2});
  auto [carry, ys] = scan(running_sum, from_host<float>({1, 2}, {2}), xs);
  EXPECT_EQ(values(carry), (std::vector<double>{1, 2}));
  EXPECT_EQ(ys.shape(), Shape({0, 2}));
}

TEST(Scan, LengthOne) {
  auto [carry, ys] = scan(running_sum, scalar(2.0), from_host<float>({5}, {1}));
  EXPECT_EQ(carry.item<float>(), 7.0f);
  EXPECT_EQ(values(ys), (std::vector<double>{7}));
}

TEST(Scan, NoXsWithALength) {
  auto step = [](const Array& c, const std::vector<Array>&) {
    return std::pair{c * 2.0, std::vector<Array>{c}};
  };
  auto [carry, ys] = scan(step, scalar(1.0), std::vector<Array>{}, {.length = 4});
  EXPECT_EQ(carry.item<float>(), 16.0f);
  EXPECT_EQ(values(ys[0]), (std::vector<double>{1, 2, 4, 8}));
}

TEST(Scan, PytreeCarryAndXs) {
  Tree init = Tree::dict({{"sum", scalar(0.0)}, {"count", scalar(0, DType::i32)}});
  std::pair<Array, Array> xs{from_host<float>({1, 2, 3}, {3}), from_host<float>({10, 20, 30}, {3})};
  auto step = [](const Tree& c, const std::pair<Array, Array>& x) {
    Tree next = Tree::dict(
        {{"sum", c["sum"].leaf() + x.first * x.second}, {"count", c["count"].leaf() + 1}});
    return std::pair{next, x.first - x.second};
  };
  auto [carry, ys] = scan(step, init, xs);
  EXPECT_EQ(carry["sum"].leaf().item<float>(), 140.0f);
  EXPECT_EQ(carry["count"].leaf().item<int32_t>(), 3);
  EXPECT_EQ(values(ys), (std::vector<double>{-9, -18, -27}));
}

TEST(Scan, RandomKeysSplitInTheBody) {
  auto step = [](const Array& key, const Array&) {
    Array keys = random::split(key);
    return std::pair{random::key_at(keys, 0), random::normal(random::key_at(keys, 1), {2})};
  };
  auto [last_key, draws] = scan(step, random::key(7), zeros({3}));
  // The same draws as the loop written out.
  Array key = random::key(7);
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) {
    Array keys = random::split(key);
    key = random::key_at(keys, 0);
    for (double v : values(random::normal(random::key_at(keys, 1), {2}))) expected.push_back(v);
  }
  EXPECT_EQ(values(draws), expected);
  EXPECT_EQ(last_key.to_vector<uint32_t>(), key.to_vector<uint32_t>());
}

// ----- gradients ------------------------------------------------------------------------

// rnn_loss_scan (rnn_cell.h) written out step by step.
Array rnn_loss_unrolled(const Array& w, const Array& h0, const Array& xs) {
  Array h = h0, total = zeros({}, xs.dtype());
  for (int64_t t = 0; t < xs.shape()[0]; ++t) {
    Array x = squeeze(slice(xs, {t, 0}, {t + 1, xs.shape()[1]}), {0});
    h = tanh(w * h + x);
    total = total + sum(h * h);
  }
  return total + sum(h);
}

void expect_close(const Array& a, const Array& b, double tolerance) {
  std::vector<double> x = values(a), y = values(b);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tolerance) << "element " << i;
}

TEST(ScanGrad, MatchesTheUnrolledLoop) {
  Array w = random::normal(random::key(1), {3}, DType::f64) * 0.5;
  Array h0 = random::normal(random::key(2), {3}, DType::f64);
  Array xs = random::normal(random::key(3), {5, 3}, DType::f64);
  auto [dw, dh0, dxs] =
      std::tuple{grad<0>(rnn_loss_scan)(w, h0, xs), grad<1>(rnn_loss_scan)(w, h0, xs),
                 grad<2>(rnn_loss_scan)(w, h0, xs)};
  expect_close(dw, grad<0>(rnn_loss_unrolled)(w, h0, xs), 1e-12);
  expect_close(dh0, grad<1>(rnn_loss_unrolled)(w, h0, xs), 1e-12);
  expect_close(dxs, grad<2>(rnn_loss_unrolled)(w, h0, xs), 1e-12);
}

TEST(ScanGrad, ReverseScanMatchesTheUnrolledLoopBackwards) {
  Array w = random::normal(random::key(4), {2}, DType::f64);
  Array xs = random::normal(random::key(5), {4, 2}, DType::f64);
  auto forward = [](const Array& w, const Array& xs) {
    auto step = [&w](const Array& c, const Array& x) { return std::pair{sin(c * w + x), c * x}; };
    auto [c, ys] = scan(step, zeros({2}, DType::f64), xs, {.reverse = true, .unroll = 3});
    return sum(c) + sum(ys * ys);
  };
  auto by_hand = [](const Array& w, const Array& xs) {
    Array c = zeros({2}, DType::f64), total = zeros({}, DType::f64);
    for (int64_t t = 3; t >= 0; --t) {
      Array x = squeeze(slice(xs, {t, 0}, {t + 1, 2}), {0});
      total = total + sum((c * x) * (c * x));
      c = sin(c * w + x);
    }
    return sum(c) + total;
  };
  expect_close(grad(forward)(w, xs), grad(by_hand)(w, xs), 1e-12);
  expect_close(grad<1>(forward)(w, xs), grad<1>(by_hand)(w, xs), 1e-12);
}

TEST(ScanGrad, CheckGradsFirstAndSecondOrder) {
  Array w = random::normal(random::key(6), {3}, DType::f64) * 0.5;
  Array h0 = random::normal(random::key(7), {3}, DType::f64);
  Array xs = random::normal(random::key(8), {4, 3}, DType::f64);
  EXPECT_NO_THROW(check_grads(rnn_loss_scan, std::tuple{w, h0, xs}, {.order = 2}));
}

TEST(ScanGrad, GradOfGradMatchesTheUnrolledLoop) {
  Array w = random::normal(random::key(9), {3}, DType::f64) * 0.5;
  Array h0 = random::normal(random::key(10), {3}, DType::f64);
  Array xs = random::normal(random::key(11), {3, 3}, DType::f64);
  auto directional = [](auto loss) {
    return [loss](const Array& w, const Array& h0, const Array& xs) {
      return sum(grad(loss)(w, h0, xs) * h0);
    };
  };
  expect_close(grad(directional(rnn_loss_scan))(w, h0, xs),
               grad(directional(rnn_loss_unrolled))(w, h0, xs), 1e-10);
}

// The text of the body of the backward (reverse) scan in a gradient program.
std::string backward_scan_body(const std::string& text) {
  size_t reverse = text.find("reverse=true");
  EXPECT_NE(reverse, std::string::npos) << text;
  size_t start = text.rfind("scan[body={", reverse);
  EXPECT_NE(start, std::string::npos) << text;
  return text.substr(start, reverse - start);
}

TEST(ScanGrad, BackwardPassTakesTheCostlyResultsFromTheForwardRun) {
  Array w = random::normal(random::key(12), {3}, DType::f64) * 0.5;
  Array h0 = random::normal(random::key(13), {3}, DType::f64);
  Array xs = random::normal(random::key(14), {4, 3}, DType::f64);
  std::string text = print_program(*make_program(grad(rnn_loss_scan), w, h0, xs).program);
  std::string body = backward_scan_body(text);
  // tanh and both products come from the stacked forward results; the cheap add is
  // replayed so that the saved tanh's VJP has its operand.
  EXPECT_EQ(count_of(body, "= tanh"), 0) << body;
  EXPECT_EQ(count_of(body, "name=\"saved tanh\""), 1) << body;
  EXPECT_EQ(count_of(body, "name=\"saved mul\""), 2) << body;
  EXPECT_GE(count_of(body, "= add"), 1) << body;
}

TEST(ScanGrad, RecomputeRunsTheBodyAgainAndGivesTheSameBits) {
  auto loss = [](bool recompute) {
    return [recompute](const Array& w, const Array& h0, const Array& xs) {
      auto step = [&w](const Array& h, const Array& x) {
        Array next = tanh(w * h + x);
        return std::pair{next, next * next};
      };
      auto [h, ys] = scan(step, h0, xs, {.recompute = recompute});
      return sum(ys) + sum(h);
    };
  };
  Array w = random::normal(random::key(18), {3}, DType::f32) * 0.5f;
  Array h0 = random::normal(random::key(19), {3}, DType::f32);
  Array xs = random::normal(random::key(20), {5, 3}, DType::f32);
  std::string text = print_program(*make_program(grad(loss(true)), w, h0, xs).program);
  std::string body = backward_scan_body(text);
  EXPECT_THAT(text, HasSubstr("recompute=true"));
  EXPECT_EQ(count_of(body, "saved"), 0) << body;
  EXPECT_EQ(count_of(body, "= tanh"), 1) << body;
  for (int argnum = 0; argnum < 3; ++argnum) {
    auto kept = argnum == 0   ? grad<0>(loss(false))(w, h0, xs)
                : argnum == 1 ? grad<1>(loss(false))(w, h0, xs)
                              : grad<2>(loss(false))(w, h0, xs);
    auto recomputed = argnum == 0   ? grad<0>(loss(true))(w, h0, xs)
                      : argnum == 1 ? grad<1>(loss(true))(w, h0, xs)
                                    : grad<2>(loss(true))(w, h0, xs);
    EXPECT_EQ(kept.to_vector<float>(), recomputed.to_vector<float>()) << "argument " << argnum;
  }
  EXPECT_NO_THROW(check_grads(
      loss(true), std::tuple{astype(w, DType::f64), astype(h0, DType::f64), astype(xs, DType::f64)},
      {.order = 2}));
}

TEST(ScanGrad, ACheckpointedBodyIsRecomputedInTheBackwardPass) {
  auto loss = [](const Array& w, const Array& h0, const Array& xs) {
    auto cell = checkpoint([&w](const Array& h, const Array& x) { return tanh(w * h + x); });
    auto step = [&cell](const Array& h, const Array& x) {
      Array next = cell(h, x);
      return std::pair{next, next * next};
    };
    auto [h, ys] = scan(step, h0, xs);
    return sum(ys) + sum(h);
  };
  Array w = random::normal(random::key(15), {3}, DType::f64) * 0.5;
  Array h0 = random::normal(random::key(16), {3}, DType::f64);
  Array xs = random::normal(random::key(17), {4, 3}, DType::f64);
  std::string body =
      backward_scan_body(print_program(*make_program(grad(loss), w, h0, xs).program));
  EXPECT_EQ(count_of(body, "name=\"saved tanh\""), 0) << body;
  EXPECT_EQ(count_of(body, "= tanh"), 1) << body;  // the checkpoint's replay
  expect_close(grad(loss)(w, h0, xs), grad(rnn_loss_unrolled)(w, h0, xs), 1e-12);
}

TEST(ScanGrad, IntegerCarryAndLengthZero) {
  auto loss = [](const Array& w, const Array& xs) {
    auto step = [&w](const std::pair<Array, Array>& c, const Array& x) {
      return std::pair{std::pair{c.first + 1, c.second * w + x}, astype(c.first, DType::f64) * x};
    };
    auto [c, ys] = scan(step, std::pair{scalar(0, DType::i32), zeros({}, DType::f64)}, xs);
    return c.second + sum(ys);
  };
  Array w = scalar(0.7, DType::f64);
  Array xs = from_host<double>({1, 2, 3}, {3});
  // c = ((x0 w + x1) w + x2); ys sum = 0*x0 + 1*x1 + 2*x2; d/dw = 2 x0 w + x1.
  EXPECT_NEAR(grad(loss)(w, xs).item<double>(), 2 * 1 * 0.7 + 2, 1e-12);
  EXPECT_EQ(values(grad<1>(loss)(w, xs)), (std::vector<double>{0.7 * 0.7, 0.7 + 1, 1 + 2}));
  Array none = zeros({0}, DType::f64);
  EXPECT_EQ(grad(loss)(w, none).item<double>(), 0.0);
}

TEST(ScanGrad, ForiLoopWithStaticBoundsIsDifferentiable) {
  auto power = [](const Array& x) {
    return fori_loop(
        0, 5, [&x](const Array&, const Array& acc) { return acc * x; }, ones({}, DType::f64));
  };
  Array x = scalar(1.5, DType::f64);
  EXPECT_NEAR(power(x).item<double>(), std::pow(1.5, 5), 1e-12);
  EXPECT_NEAR(grad(power)(x).item<double>(), 5 * std::pow(1.5, 4), 1e-12);
  auto indexed = [](const Array& x) {
    return fori_loop(
        2, 4, [&x](const Array& i, const Array& acc) { return acc + astype(i, DType::f64) * x; },
        zeros({}, DType::f64));
  };
  EXPECT_NEAR(indexed(x).item<double>(), (2 + 3) * 1.5, 1e-12);
  EXPECT_NEAR(grad(indexed)(x).item<double>(), 5.0, 1e-12);
}

// ----- vmap -----------------------------------------------------------------------------

TEST(ScanVmap, MatchesALoopOverExamples) {
  Array w = random::normal(random::key(12), {3}, DType::f64);
  Array h0s = random::normal(random::key(13), {4, 3}, DType::f64);
  Array xss = random::normal(random::key(14), {4, 5, 3}, DType::f64);
  auto run = [](const Array& w, const Array& h0, const Array& xs) {
    auto step = [&w](const Array& h, const Array& x) {
      Array next = tanh(w * h + x);
      return std::pair{next, next * 2.0};
    };
    return scan(step, h0, xs, {.reverse = true});
  };
  // Batched carry and xs; then only xs (the carry becomes batched through the body); then
  // only the closed-over weight.
  auto [hs, ys] = vmap(run, {kNotMapped, 0, 0})(w, h0s, xss);
  auto [hs2, ys2] = vmap(run, {kNotMapped, kNotMapped, 0})(w, example(h0s, 0), xss);
  Array ws = random::normal(random::key(15), {4, 3}, DType::f64);
  auto [hs3, ys3] = vmap(run, {0, kNotMapped, kNotMapped})(ws, example(h0s, 0), example(xss, 0));
  for (int64_t b = 0; b < 4; ++b) {
    auto [h, y] = run(w, example(h0s, b), example(xss, b));
    EXPECT_EQ(values(example(hs, b)), values(h));
    EXPECT_EQ(values(example(ys, b)), values(y));
    auto [h2, y2] = run(w, example(h0s, 0), example(xss, b));
    EXPECT_EQ(values(example(hs2, b)), values(h2));
    EXPECT_EQ(values(example(ys2, b)), values(y2));
    auto [h3, y3] = run(example(ws, b), example(h0s, 0), example(xss, 0));
    EXPECT_EQ(values(example(hs3, b)), values(h3));
    EXPECT_EQ(values(example(ys3, b)), values(y3));
  }
}

TEST(ScanVmap, PerExampleGradientsThroughScan) {
  Array w = random::normal(random::key(16), {3}, DType::f64) * 0.5;
  Array h0 = random::normal(random::key(17), {3}, DType::f64);
  Array xss = random::normal(random::key(18), {2, 4, 3}, DType::f64);
  Array per_example = vmap(grad(rnn_loss_scan), {kNotMapped, kNotMapped, 0})(w, h0, xss);
  for (int64_t b = 0; b < 2; ++b) {
    expect_close(example(per_example, b), grad(rnn_loss_scan)(w, h0, example(xss, b)), 1e-12);
  }
}

// ----- programs -------------------------------------------------------------------------

TEST(ScanProgram, PrintsNestedAndParsesBack) {
  auto f = [](const Array& w, const Array& xs) {
    auto step = [&w](const Array& c, const Array& x) { return std::pair{c * w + x, c}; };
    return scan(step, zeros({2}), xs);
  };
  TracedProgram traced = make_program(f, zeros({2}), zeros({3, 2}));
  std::string text = print_program(*traced.program);
  EXPECT_THAT(text, HasSubstr("scan[body={ lambda ; "));
  EXPECT_THAT(
      text, HasSubstr("length=3 num_consts=1 num_carry=1 reverse=false unroll=1 recompute=false]"));
  Program parsed = parse_program(text);
  verify(parsed);
  EXPECT_EQ(print_program(parsed), text);
}

// ----- errors ---------------------------------------------------------------------------

TEST(ScanErrors, CarryTypeChanges) {
  auto widen = [](const Array& c, const Array& x) { return std::pair{c + x, x}; };
  EXPECT_TRUE(fails_with(
      [&] {
        scan(widen, scalar(0.0), zeros({3, 2}));
      },
      {"scan: the body returns carry leaf 0 as f32[2], but the carry is f32[]",
       "keep its shape and dtype"}));
  auto to_f64 = [](const Array& c, const Array& x) {
    return std::pair{astype(c, DType::f64) + x, x};
  };
  EXPECT_TRUE(fails_with([&] { scan(to_f64, scalar(0.0), zeros({3}, DType::f64)); },
                         {"carry leaf 0 as f64[], but the carry is f32[]"}));
}

TEST(ScanErrors, CarryStructureChanges) {
  auto step = [](const std::vector<Array>& c, const Array& x) {
    return std::pair{std::vector<Array>{c[0] + x, c[0]}, x};
  };
  EXPECT_TRUE(fails_with(
      [&] { scan(step, std::vector<Array>{scalar(0.0)}, zeros({2})); },
      {"scan: the returned carry has structure [*, *]", "initial carry has structure [*]"}));
}

TEST(ScanErrors, XsLengthsDisagree) {
  std::pair<Array, Array> xs{zeros({3}), zeros({4})};
  auto step = [](const Array& c, const std::pair<Array, Array>& x) {
    return std::pair{c + x.first + x.second, c};
  };
  EXPECT_TRUE(fails_with([&] { scan(step, scalar(0.0), xs); },
                         {"scan: xs leaf 1 is f32[4], whose leading axis 4 differs from the length "
                          "3 (the leading axis of xs leaf 0)"}));
  EXPECT_TRUE(fails_with([&] { scan(running_sum, scalar(0.0), zeros({3}), {.length = 2}); },
                         {"xs leaf 0 is f32[3], whose leading axis 3 differs from the length 2 "
                          "(ScanOptions::length)"}));
  EXPECT_TRUE(fails_with([&] { scan(running_sum, scalar(0.0), scalar(1.0)); },
                         {"scan: xs leaf 0 is f32[], which has no leading axis"}));
  auto step_no_xs = [](const Array& c, const std::vector<Array>&) { return std::pair{c, c}; };
  EXPECT_TRUE(fails_with([&] { scan(step_no_xs, scalar(0.0), std::vector<Array>{}); },
                         {"scan: the length is unknown", "ScanOptions{.length = n}"}));
  EXPECT_TRUE(fails_with([&] { scan(running_sum, scalar(0.0), zeros({3}), {.unroll = 0}); },
                         {"scan: unroll is 0, but it must be at least 1"}));
}

}  // namespace
}  // namespace kiln
