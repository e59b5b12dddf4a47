// The checks of kernel_checks.h. Inputs are drawn from fixed keys, so every run checks the
// same numbers; the reference casts them to f64 and runs kiln's plain ops.
#include "pallas/kernel_checks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/array_functions.h"
#include "kiln/grad.h"
#include "kiln/nn/activations.h"
#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "kiln/random.h"
#include "kiln/tracing.h"

namespace kiln::pallas {
namespace {

constexpr double kEps32 = 1.1920928955078125e-07;

// The spacing of `dtype`'s numbers at |x| (the smallest normal's spacing below it).
double ulp(double x, DType dtype) {
  int mantissa = dtype == DType::bf16 ? 7 : dtype == DType::f16 ? 10 : 23;
  int min_exponent = dtype == DType::f16 ? -14 : -126;
  int exponent = x == 0 ? min_exponent : std::max(std::ilogb(x), min_exponent);
  return std::ldexp(1.0, exponent - mantissa);
}

std::vector<double> to_f64(const Array& x) {
  HostArray host = astype(x, DType::f64).to_host();
  std::span<const double> values = host.as<double>();
  return {values.begin(), values.end()};
}

// Compares `got` with `reference` element by element; element i may be off by
// atol(i) + ulps x ulp(reference[i]) in got's dtype.
KernelCheck compare(std::string kernel, std::string what, const Array& got, const Array& reference,
                    const std::function<double(size_t)>& atol, double ulps, std::string bound) {
  KernelCheck check;
  check.kernel = std::move(kernel);
  check.what = std::move(what);
  check.bound = std::move(bound);
  check.ok = got.shape() == reference.shape();
  if (!check.ok) return check;
  std::vector<double> g = to_f64(got), r = to_f64(reference);
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(r[i])) {
      // NaN where the reference has NaN, the same infinity where it has one.
      bool same = std::isnan(r[i]) ? std::isnan(g[i]) : g[i] == r[i];
      if (!same) check.ok = false;
      continue;
    }
    double error = std::abs(g[i] - r[i]);
    if (!std::isfinite(g[i])) error = std::numeric_limits<double>::infinity();
    double unit = ulp(std::abs(r[i]), got.dtype());
    double allowed = atol(i) + ulps * unit;
    check.max_abs_error = std::max(check.max_abs_error, error);
    if (r[i] != 0) check.max_rel_error = std::max(check.max_rel_error, error / std::abs(r[i]));
    check.max_ulps = std::max(check.max_ulps, error / unit);
    check.worst_share_of_bound = std::max(check.worst_share_of_bound, error / allowed);
    if (!(error <= allowed)) check.ok = false;
  }
  return check;
}

Array draw(uint64_t seed, Shape shape, DType dtype, double scale = 1.0) {
  return astype(random::normal(random::key(seed), std::move(shape)) * scale, dtype);
}

using Progress = std::function<void(const std::string&)>;

// Runs check(what, dtype, c) for every case in f32, bf16 and f16, in that order, telling
// `progress` "<kernel> <what>" before each; label(dtype, c) makes `what`.
template <typename Case, typename Label, typename Check>
void for_each_case(std::string_view kernel, const std::vector<Case>& cases,
                   const Progress& progress, Label label, Check check) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const Case& c : cases) {
      std::string what = label(dtype, c);
      if (progress) progress(fmt::format("{} {}", kernel, what));
      check(what, dtype, c);
    }
  }
}

// The row-wise kernels' cases (softmax, layer norm, softmax cross-entropy): x [rows, n] in
// blocks of block_rows rows, its values N(0, 1) x scale + offset, and a kernel's own
// special values where `special`.
struct RowCase {
  int64_t rows, n, block_rows;
  double scale = 1;
  bool special = false;
  double offset = 0;
};

std::string row_label(DType dtype, const RowCase& c, std::string_view values,
                      std::string_view special) {
  return fmt::format("{} {}x{}, {} rows a block{}{}{}", dtype_name(dtype), c.rows, c.n,
                     c.block_rows, c.offset != 0 ? fmt::format(", {} + {}", values, c.offset) : "",
                     c.scale != 1 ? fmt::format(", {} x{}", values, c.scale) : "",
                     c.special ? special : "");
}

std::vector<KernelCheck> check_matmul(const std::function<void(const std::string&)>& progress) {
  struct Case {
    int64_t m, k, n;
    MatmulBlocks blocks;
  };
  const std::vector<Case> cases = {
      {0, 5, 3, {16, 16, 16}},      {4, 0, 3, {16, 16, 16}},          {1, 1, 1, {16, 16, 16}},
      {37, 29, 53, {16, 16, 16}},   {37, 29, 53, {32, 64, 8}},        {64, 64, 64, {64, 64, 64}},
      {130, 200, 70, {64, 32, 48}}, {256, 256, 256, {128, 128, 128}},
  };
  std::vector<KernelCheck> checks;
  uint64_t seed = 0;
  auto label = [](DType dtype, const Case& c) {
    return fmt::format("{} {}x{} @ {}x{}, blocks {}x{}x{}", dtype_name(dtype), c.m, c.k, c.k, c.n,
                       c.blocks.m, c.blocks.n, c.blocks.k);
  };
  for_each_case("matmul", cases, progress, label,
                [&](const std::string& what, DType dtype, const Case& c) {
                  Array a = draw(++seed, Shape({c.m, c.k}), dtype);
                  Array b = draw(++seed, Shape({c.k, c.n}), dtype);
                  Array got = matmul(a, b, c.blocks);
                  Array reference = kiln::matmul(astype(a, DType::f64), astype(b, DType::f64));
                  // f32 accumulation of K products: 2 K eps32 sum_k |a_ik b_kj| at most (the sum's
                  // rounding, then the products'), plus one ulp of the result's rounding to its
                  // dtype.
                  std::vector<double> scale =
                      to_f64(kiln::matmul(abs(astype(a, DType::f64)), abs(astype(b, DType::f64))));
                  double k_terms = static_cast<double>(std::max<int64_t>(c.k, 1));
                  checks.push_back(compare(
                      "matmul", what, got, reference,
                      [&](size_t i) { return 2 * k_terms * kEps32 * scale[i]; }, 1.0,
                      "2 K eps(f32) sum|a b| + 1 ulp"));
                });
  return checks;
}

std::vector<KernelCheck> check_softmax(const Progress& progress) {
  // special: a -inf in every row, a whole row of -inf, a NaN.
  const std::vector<RowCase> cases = {
      {0, 4, 8},    {1, 1, 8},         {7, 13, 8},     {33, 100, 8},
      {33, 100, 1}, {33, 100, 32, 30}, {128, 512, 16}, {9, 6, 4, 1, true},
  };
  std::vector<KernelCheck> checks;
  uint64_t seed = 100;
  auto label = [](DType dtype, const RowCase& c) {
    return row_label(dtype, c, "values", ", with -inf, a row of -inf and a NaN");
  };
  for_each_case("softmax", cases, progress, label,
                [&](const std::string& what, DType dtype, const RowCase& c) {
                  Array x = draw(++seed, Shape({c.rows, c.n}), DType::f64, c.scale);
                  if (c.special) {
                    std::vector<double> v = to_f64(x);
                    const double inf = std::numeric_limits<double>::infinity();
                    for (int64_t r = 0; r < c.rows; ++r)
                      v[static_cast<size_t>(r * c.n + r % c.n)] = -inf;
                    for (int64_t j = 0; j < c.n; ++j) v[static_cast<size_t>(3 * c.n + j)] = -inf;
                    v[static_cast<size_t>(5 * c.n + 1)] = std::numeric_limits<double>::quiet_NaN();
                    x = from_host(v, Shape({c.rows, c.n}));
                  }
                  x = astype(x, dtype);
                  Array got = softmax(x, c.block_rows);
                  Array z = astype(x, DType::f64);
                  Array e = exp(z - max(z, {1}, true));
                  Array reference = e / sum(e, {1}, true);
                  // In f32: the exponentials and the sum of n of them, each within a few eps(f32)
                  // relative (n eps for the sum), then one ulp of the result's rounding.
                  std::vector<double> r = to_f64(reference);
                  double terms = static_cast<double>(c.n + 4);
                  checks.push_back(compare(
                      "softmax", what, got, reference,
                      [&](size_t i) { return terms * kEps32 * std::abs(r[i]); }, 1.0,
                      "(n + 4) eps(f32) |p| + 1 ulp"));
                });
  return checks;
}

std::vector<KernelCheck> check_layer_norm(const Progress& progress) {
  // A large offset is a large mean to subtract; values x0.01 have a variance near eps, which
  // then matters.
  const std::vector<RowCase> cases = {
      {0, 4, 8},        {1, 1, 8},     {7, 13, 8},     {33, 100, 8},
      {33, 100, 1},     {33, 100, 32}, {128, 768, 16}, {9, 64, 4, 1, false, 100},
      {9, 64, 4, 0.01},
  };
  std::vector<KernelCheck> checks;
  uint64_t seed = 300;
  auto label = [](DType dtype, const RowCase& c) { return row_label(dtype, c, "values", ""); };
  for_each_case(
      "layer_norm", cases, progress, label,
      [&](const std::string& what, DType dtype, const RowCase& c) {
        Array x = astype(draw(++seed, Shape({c.rows, c.n}), DType::f64, c.scale) + c.offset, dtype);
        Array scale = draw(++seed, Shape({c.n}), dtype), bias = draw(++seed, Shape({c.n}), dtype);
        Array got = layer_norm(x, scale, bias);
        // The plain program in f64 (biased variance, eps 1e-5).
        Array z = astype(x, DType::f64);
        Array centred = z - mean(z, {1}, true);
        Array normed = centred / sqrt(mean(centred * centred, {1}, true) + 1e-5);
        Array reference = normed * astype(scale, DType::f64) + astype(bias, DType::f64);
        // In f32: the mean and variance over n elements within about n eps(f32) relative of
        // the spread of the row (a large mean loses that much more, relative to the spread),
        // then the scale and bias, then one ulp of the result's rounding.
        std::vector<double> xhat = to_f64(normed), g = to_f64(astype(scale, DType::f64)),
                            b = to_f64(astype(bias, DType::f64));
        double terms = static_cast<double>(c.n + 8) * (1 + std::abs(c.offset));
        checks.push_back(compare(
            "layer_norm", what, got, reference,
            [&](size_t i) {
              size_t j = i % static_cast<size_t>(std::max<int64_t>(c.n, 1));
              return terms * kEps32 * (std::abs(g[j]) * (std::abs(xhat[i]) + 1) + std::abs(b[j]));
            },
            1.0, "(n + 8)(1 + |offset|) eps(f32) (|scale| (|x^| + 1) + |bias|) + 1 ulp"));
      });
  return checks;
}

std::vector<KernelCheck> check_softmax_cross_entropy(const Progress& progress) {
  // special: a -inf logit away from the label in every row.
  const std::vector<RowCase> cases = {
      {0, 4, 8},    {1, 1, 8},         {7, 13, 8},      {33, 100, 8},
      {33, 100, 1}, {33, 100, 32, 30}, {64, 50304, 16}, {9, 6, 4, 1, true},
  };
  std::vector<KernelCheck> checks;
  uint64_t seed = 400;
  auto label = [](DType dtype, const RowCase& c) {
    return row_label(dtype, c, "logits", ", with -inf logits");
  };
  for_each_case(
      "softmax_cross_entropy", cases, progress, label,
      [&](const std::string& what, DType dtype, const RowCase& c) {
        Array x = draw(++seed, Shape({c.rows, c.n}), DType::f64, c.scale);
        Array labels =
            random::randint(random::key(++seed), Shape({c.rows}), 0, std::max<int64_t>(c.n, 1));
        if (c.special) {
          std::vector<double> v = to_f64(x);
          std::vector<int32_t> l = labels.to_vector<int32_t>();
          for (int64_t r = 0; r < c.rows; ++r) {
            int64_t away = (l[static_cast<size_t>(r)] + 1) % c.n;
            v[static_cast<size_t>(r * c.n + away)] = -std::numeric_limits<double>::infinity();
          }
          x = from_host(v, Shape({c.rows, c.n}));
        }
        x = astype(x, dtype);
        Array got = softmax_cross_entropy(x, labels, c.block_rows);
        // The plain program in f64: minus the log-probability of the label.
        Array z = astype(x, DType::f64);
        Array row_max = max(z, {1}, true);
        Array log_p = z - row_max - log(sum(exp(z - row_max), {1}, true));
        Array reference = -squeeze(take_along_axis(log_p, expand_dims(labels, 1), 1), {1});
        // In f32: the row's maximum subtracted exactly, n exponentials summed (n eps relative),
        // the log, and the label's logit subtracted: (n + 8) eps(f32) (|max| + |logit| + 1).
        std::vector<double> m = to_f64(squeeze(row_max, {1}));
        std::vector<double> picked =
            to_f64(squeeze(take_along_axis(z, expand_dims(labels, 1), 1), {1}));
        double terms = static_cast<double>(c.n + 8);
        checks.push_back(compare(
            "softmax_cross_entropy", what, got, reference,
            [&](size_t i) { return terms * kEps32 * (std::abs(m[i]) + std::abs(picked[i]) + 1); },
            1.0, "(n + 8) eps(f32) (|max| + |logit| + 1) + 1 ulp"));
      });
  return checks;
}

std::vector<KernelCheck> check_softmax_cross_entropy_grad(const Progress& progress) {
  const std::vector<RowCase> cases = {
      {0, 4, 8},    {1, 1, 8},         {7, 13, 8},     {33, 100, 8},
      {33, 100, 1}, {33, 100, 32, 30}, {16, 50304, 8},
  };
  std::vector<KernelCheck> checks;
  uint64_t seed = 500;
  auto label = [](DType dtype, const RowCase& c) { return row_label(dtype, c, "logits", ""); };
  for_each_case(
      "softmax_cross_entropy_grad", cases, progress, label,
      [&](const std::string& what, DType dtype, const RowCase& c) {
        Array x = astype(draw(++seed, Shape({c.rows, c.n}), DType::f64, c.scale), dtype);
        Array labels =
            random::randint(random::key(++seed), Shape({c.rows}), 0, std::max<int64_t>(c.n, 1));
        Array g = draw(++seed, Shape({c.rows}), DType::f32);
        Array got = softmax_cross_entropy_grad(x, labels, g, c.block_rows);
        // The reference is kiln's gradient of the f64 loss (autodiff, not the formula the
        // kernel uses): d/dz sum_r g_r (logsumexp(z_r) - z_r[label_r]).
        Array g64 = astype(g, DType::f64);
        auto loss = [&](const Array& z) {
          Array log_p = z - max(stop_gradient(z), {1}, true);
          log_p = log_p - log(sum(exp(log_p), {1}, true));
          return sum(g64 * -squeeze(take_along_axis(log_p, expand_dims(labels, 1), 1), {1}));
        };
        Array reference =
            c.rows == 0 ? zeros(Shape({0, c.n}), DType::f64) : grad(loss)(astype(x, DType::f64));
        // In f32: the probabilities within (n + 4) eps(f32) |p| (as softmax), the one-hot's
        // subtraction and the product by g one rounding each, then one ulp of the dtype.
        std::vector<double> p = to_f64(nn::softmax(astype(x, DType::f64), 1));
        std::vector<double> gs = to_f64(g64);
        double terms = static_cast<double>(c.n + 4);
        checks.push_back(compare(
            "softmax_cross_entropy_grad", what, got, reference,
            [&](size_t i) {
              double gi = std::abs(gs[i / static_cast<size_t>(std::max<int64_t>(c.n, 1))]);
              return (terms * std::abs(p[i]) + 2) * kEps32 * gi;
            },
            1.0, "((n + 4) |p| + 2) eps(f32) |g| + 1 ulp"));
      });
  return checks;
}

struct AttentionCase {
  int64_t heads, t, d;
  AttentionBlocks blocks;
  bool causal = false;
};

// Both passes of flash attention take the same cases: T of 0, 1 and sizes the blocks do and
// do not divide, causal or not, in every dtype. `check` gets each case's label.
void for_each_attention_case(
    std::string_view kernel, const Progress& progress,
    const std::function<void(const std::string& what, DType dtype, bool causal,
                             const AttentionCase& c)>& check) {
  const std::vector<AttentionCase> shapes = {
      {1, 1, 1, {16, 16}},   {2, 37, 16, {16, 8}}, {3, 64, 32, {32, 32}},
      {2, 100, 8, {64, 16}}, {1, 0, 4, {8, 8}},
  };
  std::vector<AttentionCase> cases = shapes;
  for (AttentionCase c : shapes) {
    c.causal = true;
    cases.push_back(c);
  }
  auto label = [](DType dtype, const AttentionCase& c) {
    return fmt::format("{} {}x{}x{}{}, blocks {}x{}", dtype_name(dtype), c.heads, c.t, c.d,
                       c.causal ? " causal" : "", c.blocks.q, c.blocks.k);
  };
  for_each_case(kernel, cases, progress, label,
                [&](const std::string& what, DType dtype, const AttentionCase& c) {
                  check(what, dtype, c.causal, c);
                });
}

// The plain program's attention probabilities in f64: softmax(q k^T / sqrt(D)) over the keys,
// keys after the query at -inf when causal (the row's maximum held constant for autodiff).
Array plain_attention_probabilities(const Array& q, const Array& k, bool causal) {
  const int64_t t = q.shape()[1], d = std::max<int64_t>(q.shape()[2], 1);
  Array scores = kiln::matmul(q, swapaxes(k, 1, 2)) / std::sqrt(static_cast<double>(d));
  if (causal && t > 0) {
    Array later = greater(iota(Shape({t, t}), DType::i32, 1), iota(Shape({t, t}), DType::i32, 0));
    scores = where(later, full(Shape({t, t}), -std::numeric_limits<double>::infinity(), DType::f64),
                   scores);
  }
  Array e = exp(scores - stop_gradient(max(scores, {2}, true)));
  return e / sum(e, {2}, true);
}

std::vector<KernelCheck> check_flash_attention(
    const std::function<void(const std::string&)>& progress) {
  std::vector<KernelCheck> checks;
  uint64_t seed = 200;
  for_each_attention_case(
      "flash_attention", progress,
      [&](const std::string& what, DType dtype, bool causal, const AttentionCase& c) {
        Shape shape({c.heads, c.t, c.d});
        Array q = draw(++seed, shape, dtype), k = draw(++seed, shape, dtype),
              v = draw(++seed, shape, dtype);
        Array got = flash_attention(q, k, v, causal, c.blocks);
        // The plain program: scores, mask, softmax, weighted values, in f64.
        Array qf = astype(q, DType::f64), kf = astype(k, DType::f64), vf = astype(v, DType::f64);
        Array reference = kiln::matmul(plain_attention_probabilities(qf, kf, causal), vf);
        // Scores in f32 (D products), exponentials, their sum over T keys and the weighted
        // sum of values: (T + D + 8) eps(f32) max|v|, then one ulp of the result's dtype.
        double v_max = 0;
        for (double x : to_f64(vf)) v_max = std::max(v_max, std::abs(x));
        double atol = static_cast<double>(c.t + c.d + 8) * kEps32 * v_max;
        checks.push_back(compare(
            "flash_attention", what, got, reference, [&](size_t) { return atol; }, 1.0,
            "(T + D + 8) eps(f32) max|v| + 1 ulp"));
      });
  return checks;
}

std::vector<KernelCheck> check_flash_attention_grad(
    const std::function<void(const std::string&)>& progress) {
  std::vector<KernelCheck> checks;
  uint64_t seed = 600;
  for_each_attention_case(
      "flash_attention_grad", progress,
      [&](const std::string& what, DType dtype, bool causal, const AttentionCase& c) {
        Shape shape({c.heads, c.t, c.d});
        Array q = draw(++seed, shape, dtype), k = draw(++seed, shape, dtype),
              v = draw(++seed, shape, dtype), d_out = draw(++seed, shape, dtype);
        AttentionGrads got = flash_attention_grad(q, k, v, d_out, causal, c.blocks);
        // The reference: kiln's autodiff of the plain f64 attention, one input at a time.
        Array qf = astype(q, DType::f64), kf = astype(k, DType::f64), vf = astype(v, DType::f64),
              df = astype(d_out, DType::f64);
        const double scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(c.d, 1)));
        auto probabilities = [&](const Array& qq, const Array& kk) {
          return plain_attention_probabilities(qq, kk, causal);
        };
        auto objective = [&](const Array& qq, const Array& kk, const Array& vv) {
          return sum(kiln::matmul(probabilities(qq, kk), vv) * df);
        };
        std::vector<Array> reference(3, zeros(shape, DType::f64));
        if (c.t > 0 && c.d > 0) {
          reference[0] = grad([&](const Array& x) { return objective(x, kf, vf); })(qf);
          reference[1] = grad([&](const Array& x) { return objective(qf, x, vf); })(kf);
          reference[2] = grad([&](const Array& x) { return objective(qf, kf, x); })(vf);
        }
        // Bounds from the magnitudes of the sums each gradient is (as matmul's): with P the
        // probabilities, dP = d_out v^T and delta = rowsum(d_out * out), |dS| <= P (|dP| +
        // |delta|); dQ sums |dS| |k| scale over T keys, dK |dS|^T |q| scale over T queries,
        // dV P^T |d_out|; each in f32 with (T + D + 8) eps(f32) of those magnitudes.
        std::vector<std::vector<double>> magnitude(3);
        if (c.t > 0 && c.d > 0) {
          Array p = probabilities(qf, kf);
          Array dp = abs(kiln::matmul(df, swapaxes(vf, 1, 2)));
          Array delta = abs(sum(df * kiln::matmul(p, vf), {2}, true));
          Array ds = p * (dp + delta);
          magnitude[0] = to_f64(kiln::matmul(ds, abs(kf)) * scale);
          magnitude[1] = to_f64(kiln::matmul(swapaxes(ds, 1, 2), abs(qf)) * scale);
          magnitude[2] = to_f64(kiln::matmul(swapaxes(p, 1, 2), abs(df)));
        }
        const double terms = static_cast<double>(c.t + c.d + 8);
        const std::vector<std::pair<const char*, Array>> outputs = {
            {"dq", got.dq}, {"dk", got.dk}, {"dv", got.dv}};
        for (size_t o = 0; o < 3; ++o) {
          checks.push_back(compare(
              "flash_attention_grad", fmt::format("{}, {}", what, outputs[o].first),
              outputs[o].second, reference[o],
              [&](size_t i) { return magnitude[o].empty() ? 0 : terms * kEps32 * magnitude[o][i]; },
              1.0, "(T + D + 8) eps(f32) of the sum's magnitudes + 1 ulp"));
        }
      });
  return checks;
}

}  // namespace

std::vector<std::string> kernel_names() {
  return {"matmul",
          "softmax",
          "layer_norm",
          "softmax_cross_entropy",
          "softmax_cross_entropy_grad",
          "flash_attention",
          "flash_attention_grad"};
}

std::vector<KernelCheck> check_kernels(const std::string& name,
                                       const std::function<void(const std::string&)>& progress) {
  std::vector<std::string> names = kernel_names();
  if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) {
    fail(kUnknownSite, fmt::format("no kernel named '{}'", name),
         fmt::format("the kernels: {}", fmt::join(names, ", ")));
  }
  std::vector<KernelCheck> checks;
  if (name.empty() || name == "matmul") {
    for (KernelCheck& c : check_matmul(progress)) checks.push_back(std::move(c));
  }
  if (name.empty() || name == "softmax") {
    for (KernelCheck& c : check_softmax(progress)) checks.push_back(std::move(c));
  }
  if (name.empty() || name == "layer_norm") {
    for (KernelCheck& c : check_layer_norm(progress)) checks.push_back(std::move(c));
  }
  if (name.empty() || name == "softmax_cross_entropy") {
    for (KernelCheck& c : check_softmax_cross_entropy(progress)) checks.push_back(std::move(c));
  }
  if (name.empty() || name == "softmax_cross_entropy_grad") {
    for (KernelCheck& c : check_softmax_cross_entropy_grad(progress)) {
      checks.push_back(std::move(c));
    }
  }
  if (name.empty() || name == "flash_attention") {
    for (KernelCheck& c : check_flash_attention(progress)) checks.push_back(std::move(c));
  }
  if (name.empty() || name == "flash_attention_grad") {
    for (KernelCheck& c : check_flash_attention_grad(progress)) checks.push_back(std::move(c));
  }
  return checks;
}

}  // namespace kiln::pallas
