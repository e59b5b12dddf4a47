// op_table rows for the contract family: dot_general and conv_general_dilated. The
// oracles are plain double-precision loops written from the definitions (integers exactly,
// wrapped to the result's width). Fast kernels accumulate in f32 for f32 and 16-bit
// floats, so their tolerance grows with the contracted length K:
// atol = 2 K eps max|a| max|b|, plus a couple of ulps of the result type.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "prims/ids/contract.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(static_cast<size_t>(shape.rank()), 1);
  for (int64_t axis = shape.rank() - 2; axis >= 0; --axis) {
    strides[static_cast<size_t>(axis)] = strides[static_cast<size_t>(axis) + 1] * shape[axis + 1];
  }
  return strides;
}

// Decomposes `flat` into a multi-index of `sizes` (row-major).
std::vector<int64_t> unflatten(int64_t flat, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> index(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    index[i] = flat % sizes[i];
    flat /= sizes[i];
  }
  return index;
}

int64_t product(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t size : sizes) n *= size;
  return n;
}

double max_finite_abs(const TestArray& array) {
  double worst = 0;
  for (double value : array.values) {
    if (std::isfinite(value)) worst = std::max(worst, std::fabs(value));
  }
  return worst;
}

double float_epsilon(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return 0x1p-52;
    case DType::f16:
      return 0x1p-10;
    case DType::bf16:
      return 0x1p-7;
    default:
      return 0x1p-23;
  }
}

// Values for contraction tests: small integers for ints (exact products), [-1, 1] floats.
TestArray contract_operand(DType dtype, const Shape& shape, Rng& rng) {
  return random_array(dtype, shape, rng, [&](Rng& r) {
    switch (dtype) {
      case DType::u8:
        return std::floor(uniform(r, 0, 256));
      case DType::i32:
        return std::floor(uniform(r, -3000, 3000));
      case DType::i64:
        return std::floor(uniform(r, -1e6, 1e6));
      default:
        return uniform(r, -1, 1);
    }
  });
}

// NaN, infinities, signed zeros and subnormals at a few places. (The largest finite value
// is left out: whether a sum near it overflows depends on the summation order.)
void insert_contract_specials(TestArray& array, int salt) {
  if (!is_floating(array.aval.dtype) || array.values.empty()) return;
  std::vector<double> specials = special_values(array.aval.dtype);
  std::vector<double> chosen;
  for (double value : specials) {
    if (!std::isfinite(value) || std::fabs(value) < 1e-30) chosen.push_back(value);
  }
  size_t n = array.values.size();
  for (size_t i = 0; i < chosen.size() && i < n; ++i) {
    array.values[(i * 7919 + static_cast<size_t>(salt) * 31) % n] = chosen[i];
  }
}

Tolerance contract_tolerance(DType out_dtype, DType compute, int64_t k, double max_a,
                             double max_b) {
  double atol =
      2.0 * static_cast<double>(std::max<int64_t>(k, 1)) * float_epsilon(compute) * max_a * max_b;
  Tolerance ulps = ulp_tolerance(out_dtype, 2);
  return {ulps.rtol, ulps.atol + atol};
}

// ----- dot_general -------------------------------------------------------------------------

struct DotSpec {
  std::string label;
  Shape lhs, rhs;
  DotGeneralParams params;
  bool large = false;
  bool specials = true;
};

DotGeneralParams dims(Dims lc, Dims rc, Dims lb = {}, Dims rb = {}) {
  return DotGeneralParams{std::move(lc), std::move(rc), std::move(lb), std::move(rb), {}};
}

std::vector<DotSpec> dot_specs() {
  return {
      {"matmul", Shape{5, 7}, Shape{7, 3}, dims({1}, {0})},
      {"lhs transposed", Shape{7, 5}, Shape{7, 3}, dims({0}, {0})},
      {"rhs transposed", Shape{5, 7}, Shape{3, 7}, dims({1}, {1})},
      {"both transposed", Shape{7, 5}, Shape{3, 7}, dims({0}, {1})},
      {"batched", Shape{3, 5, 7}, Shape{3, 7, 4}, dims({2}, {1}, {0}, {0})},
      {"batch in the middle", Shape{5, 3, 7}, Shape{7, 3, 4}, dims({2}, {0}, {1}, {1})},
      {"two batch axes", Shape{2, 3, 4, 5}, Shape{2, 3, 5, 6}, dims({3}, {2}, {0, 1}, {0, 1})},
      {"batch axes swapped", Shape{2, 3, 4, 5}, Shape{3, 2, 5, 6}, dims({3}, {2}, {0, 1}, {1, 0})},
      {"two contracting axes", Shape{2, 3, 4}, Shape{4, 3, 5}, dims({1, 2}, {1, 0})},
      {"contract non-trailing", Shape{3, 4, 5}, Shape{4, 2}, dims({1}, {0})},
      {"contract leading, rhs trailing", Shape{4, 3, 5}, Shape{2, 4}, dims({0}, {1})},
      {"vector dot", Shape{9}, Shape{9}, dims({0}, {0})},
      {"matrix vector", Shape{5, 7}, Shape{7}, dims({1}, {0})},
      {"outer product", Shape{3}, Shape{4}, dims({}, {})},
      {"K=0", Shape{3, 0}, Shape{0, 4}, dims({1}, {0})},
      {"M=0", Shape{0, 5}, Shape{5, 3}, dims({1}, {0})},
      {"batch 0", Shape{0, 2, 3}, Shape{0, 3, 2}, dims({2}, {1}, {0}, {0})},
      {"1x1", Shape{1, 1}, Shape{1, 1}, dims({1}, {0})},
      {"row times column", Shape{1, 7}, Shape{7, 1}, dims({1}, {0})},
      {"size-1 free axes", Shape{1, 4, 1, 6}, Shape{6, 1, 3}, dims({3}, {0})},
      {"large", Shape{130, 257}, Shape{257, 67}, dims({1}, {0}), true},
      {"large batched transposed", Shape{2, 150, 200}, Shape{2, 90, 150}, dims({1}, {2}, {0}, {0}),
       true},
      {"large wide", Shape{20, 300}, Shape{300, 700}, dims({1}, {0}), true},
      {"large tall", Shape{600, 64}, Shape{64, 40}, dims({1}, {0}), true},
      {"large deep", Shape{3, 5000}, Shape{5000, 4}, dims({1}, {0}), true},
  };
}

// The dot products of the definition: out[batch, lhs free, rhs free] = sum over the
// contracting multi-index of lhs * rhs.
std::vector<TestArray> dot_oracle(const OpCase& c) {
  const auto& p = std::get<DotGeneralParams>(c.params);
  const TestArray& lhs = c.inputs[0];
  const TestArray& rhs = c.inputs[1];
  auto free_axes = [](int64_t rank, const Dims& a, const Dims& b) {
    std::vector<int64_t> axes;
    for (int64_t axis = 0; axis < rank; ++axis) {
      if (std::find(a.begin(), a.end(), axis) == a.end() &&
          std::find(b.begin(), b.end(), axis) == b.end()) {
        axes.push_back(axis);
      }
    }
    return axes;
  };
  std::vector<int64_t> lhs_free = free_axes(lhs.aval.shape.rank(), p.lhs_batch, p.lhs_contracting);
  std::vector<int64_t> rhs_free = free_axes(rhs.aval.shape.rank(), p.rhs_batch, p.rhs_contracting);
  std::vector<int64_t> out_sizes, sum_sizes;
  for (int64_t axis : p.lhs_batch) out_sizes.push_back(lhs.aval.shape[axis]);
  for (int64_t axis : lhs_free) out_sizes.push_back(lhs.aval.shape[axis]);
  for (int64_t axis : rhs_free) out_sizes.push_back(rhs.aval.shape[axis]);
  for (int64_t axis : p.lhs_contracting) sum_sizes.push_back(lhs.aval.shape[axis]);
  DType out_dtype = p.preferred_element_type.value_or(lhs.aval.dtype);
  bool exact_ints = !is_floating(lhs.aval.dtype);
  std::vector<int64_t> ls = row_major_strides(lhs.aval.shape),
                       rs = row_major_strides(rhs.aval.shape);
  TestArray out{AbstractValue(Shape(std::span<const int64_t>(out_sizes)), out_dtype), {}};
  // Offsets of every contracting multi-index in both operands, computed once.
  std::vector<int64_t> lhs_sum_offsets, rhs_sum_offsets;
  for (int64_t k = 0; k < product(sum_sizes); ++k) {
    std::vector<int64_t> kk = unflatten(k, sum_sizes);
    int64_t li = 0, ri = 0;
    for (size_t i = 0; i < kk.size(); ++i) {
      li += kk[i] * ls[static_cast<size_t>(p.lhs_contracting[i])];
      ri += kk[i] * rs[static_cast<size_t>(p.rhs_contracting[i])];
    }
    lhs_sum_offsets.push_back(li);
    rhs_sum_offsets.push_back(ri);
  }
  size_t nb = p.lhs_batch.size();
  for (int64_t flat = 0; flat < product(out_sizes); ++flat) {
    std::vector<int64_t> at = unflatten(flat, out_sizes);
    int64_t lhs_base = 0, rhs_base = 0;
    for (size_t i = 0; i < nb; ++i) {
      lhs_base += at[i] * ls[static_cast<size_t>(p.lhs_batch[i])];
      rhs_base += at[i] * rs[static_cast<size_t>(p.rhs_batch[i])];
    }
    for (size_t i = 0; i < lhs_free.size(); ++i) {
      lhs_base += at[nb + i] * ls[static_cast<size_t>(lhs_free[i])];
    }
    for (size_t i = 0; i < rhs_free.size(); ++i) {
      rhs_base += at[nb + lhs_free.size() + i] * rs[static_cast<size_t>(rhs_free[i])];
    }
    double sum = 0;
    __int128 exact = 0;
    for (size_t k = 0; k < lhs_sum_offsets.size(); ++k) {
      double a = lhs.values[static_cast<size_t>(lhs_base + lhs_sum_offsets[k])];
      double b = rhs.values[static_cast<size_t>(rhs_base + rhs_sum_offsets[k])];
      if (exact_ints) {
        exact += static_cast<__int128>(a) * static_cast<__int128>(b);
      } else {
        sum += a * b;
      }
    }
    out.values.push_back(exact_ints ? (is_floating(out_dtype) ? static_cast<double>(exact)
                                                              : wrap_to(out_dtype, exact))
                                    : sum);
  }
  return {out};
}

std::vector<OpCase> dot_cases() {
  std::vector<OpCase> cases;
  Rng rng(2024);
  struct Typing {
    DType dtype;
    std::optional<DType> preferred;
  };
  std::vector<Typing> typings{
      {DType::f32, {}},          {DType::f64, {}},         {DType::f16, {}}, {DType::bf16, {}},
      {DType::bf16, DType::f32}, {DType::f16, DType::f32}, {DType::i32, {}}, {DType::u8, {}}};
  for (const Typing& typing : typings) {
    for (const DotSpec& spec : dot_specs()) {
      if (spec.large && !wants_large_cases(typing.dtype)) continue;
      OpCase c{fmt::format("{}{} {} {}x{}", dtype_name(typing.dtype),
                           typing.preferred ? fmt::format("->{}", dtype_name(*typing.preferred))
                                            : std::string(),
                           spec.label, spec.lhs.to_string(), spec.rhs.to_string()),
               {contract_operand(typing.dtype, spec.lhs, rng),
                contract_operand(typing.dtype, spec.rhs, rng)},
               spec.params};
      std::get<DotGeneralParams>(c.params).preferred_element_type = typing.preferred;
      if (spec.specials && !spec.large) {
        insert_contract_specials(c.inputs[0], 0);
        insert_contract_specials(c.inputs[1], 1);
      }
      cases.push_back(std::move(c));
    }
  }
  // Integer wrapping: products and sums past the i32 range.
  OpCase wrap{"i32 wrapping", {}, dims({1}, {0})};
  wrap.inputs.push_back(make_array(DType::i32, Shape{2, 3},
                                   {2147483647.0, 2147483647.0, -2147483648.0, 65536, 65536, -1}));
  wrap.inputs.push_back(make_array(DType::i32, Shape{3, 2}, {2, 3, 65536, -1, 7, 2147483647.0}));
  cases.push_back(std::move(wrap));
  return cases;
}

int64_t contracted_length(const OpCase& c) {
  const auto& p = std::get<DotGeneralParams>(c.params);
  int64_t k = 1;
  for (int64_t axis : p.lhs_contracting) k *= c.inputs[0].aval.shape[axis];
  return k;
}

Tolerance dot_fast_tolerance(const OpCase& c, DType out_dtype) {
  DType in = c.inputs[0].aval.dtype;
  DType compute = in == DType::f64 || out_dtype == DType::f64 ? DType::f64 : DType::f32;
  return contract_tolerance(out_dtype, compute, contracted_length(c), max_finite_abs(c.inputs[0]),
                            max_finite_abs(c.inputs[1]));
}

// ----- conv_general_dilated -----------------------------------------------------------------

struct ConvSpec {
  std::string label;
  Shape x, w;
  ConvParams params;
  bool large = false;
};

ConvParams conv(Dims strides = {1, 1}, Dims low = {0, 0}, Dims high = {0, 0},
                Dims lhs_dilation = {1, 1}, Dims rhs_dilation = {1, 1}, int64_t groups = 1) {
  return ConvParams{std::move(strides),      std::move(low),          std::move(high),
                    std::move(lhs_dilation), std::move(rhs_dilation), groups};
}

std::vector<ConvSpec> conv_specs() {
  return {
      {"3x3 valid", Shape{2, 7, 6, 3}, Shape{3, 3, 3, 4}, conv()},
      {"stride 2", Shape{2, 9, 8, 3}, Shape{3, 3, 3, 5}, conv({2, 2})},
      {"stride 2x3", Shape{1, 9, 10, 2}, Shape{2, 3, 2, 3}, conv({2, 3})},
      {"same 3x3", Shape{1, 7, 7, 2}, Shape{3, 3, 2, 3}, conv({1, 1}, {1, 1}, {1, 1})},
      {"same stride 2", Shape{1, 8, 8, 2}, Shape{3, 3, 2, 3}, conv({2, 2}, {0, 0}, {1, 1})},
      {"negative padding", Shape{1, 9, 9, 2}, Shape{3, 3, 2, 2}, conv({1, 1}, {-1, -2}, {0, -1})},
      {"rhs dilation 2", Shape{1, 9, 10, 2}, Shape{3, 3, 2, 3},
       conv({1, 1}, {0, 0}, {0, 0}, {1, 1}, {2, 2})},
      {"lhs dilation 2", Shape{1, 4, 5, 2}, Shape{3, 3, 2, 3},
       conv({1, 1}, {2, 2}, {2, 2}, {2, 2}, {1, 1})},
      {"lhs dilation, stride", Shape{2, 5, 4, 3}, Shape{3, 2, 3, 2},
       conv({2, 1}, {1, 0}, {2, 1}, {3, 2}, {1, 2})},
      {"groups 2", Shape{2, 6, 6, 4}, Shape{3, 3, 2, 6},
       conv({1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2)},
      {"groups 2 wide", Shape{1, 6, 6, 16}, Shape{3, 3, 8, 16},
       conv({1, 1}, {0, 1}, {1, 0}, {1, 1}, {1, 1}, 2)},
      // vmap's per-example kernel gradient: one input channel and many outputs per group,
      // few output pixels (a GEMM per group, the groups spread over the threads).
      {"per-example weight grad", Shape{3, 6, 6, 4}, Shape{4, 4, 1, 32},
       conv({1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 4)},
      {"per-example weight grad 16 groups", Shape{8, 9, 9, 16}, Shape{7, 7, 1, 128},
       conv({1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 16)},
      {"depthwise", Shape{2, 7, 7, 5}, Shape{3, 3, 1, 5},
       conv({1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 5)},
      {"depthwise x2", Shape{1, 6, 5, 3}, Shape{3, 3, 1, 6},
       conv({2, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 3)},
      {"N=1 C=1", Shape{1, 5, 5, 1}, Shape{2, 2, 1, 1}, conv()},
      {"1x1", Shape{2, 5, 5, 8}, Shape{1, 1, 8, 6}, conv()},
      {"1x1 stride 2", Shape{2, 5, 5, 8}, Shape{1, 1, 8, 6}, conv({2, 2})},
      {"kernel = input", Shape{3, 4, 4, 2}, Shape{4, 4, 2, 3}, conv()},
      {"N=0", Shape{0, 5, 5, 2}, Shape{3, 3, 2, 3}, conv()},
      {"O=0", Shape{1, 5, 5, 2}, Shape{3, 3, 2, 0}, conv()},
      {"C=0", Shape{1, 5, 5, 0}, Shape{3, 3, 0, 4}, conv()},
      {"large cnn conv1", Shape{8, 28, 28, 1}, Shape{3, 3, 1, 32}, conv(), true},
      {"large cnn conv2", Shape{4, 13, 13, 32}, Shape{3, 3, 32, 64}, conv(), true},
      {"large same stride 2", Shape{2, 17, 15, 24}, Shape{5, 3, 24, 20},
       conv({2, 2}, {2, 1}, {2, 1}), true},
  };
}

std::vector<OpCase> conv_cases() {
  std::vector<OpCase> cases;
  Rng rng(77);
  for (DType dtype : kFloatDTypes) {
    for (const ConvSpec& spec : conv_specs()) {
      if (spec.large && !wants_large_cases(dtype)) continue;
      OpCase c{fmt::format("{} {} {}x{}", dtype_name(dtype), spec.label, spec.x.to_string(),
                           spec.w.to_string()),
               {contract_operand(dtype, spec.x, rng), contract_operand(dtype, spec.w, rng)},
               spec.params};
      if (!spec.large) {
        insert_contract_specials(c.inputs[0], 0);
        if (spec.label == "3x3 valid" || spec.label == "same 3x3" || spec.label == "depthwise") {
          insert_contract_specials(c.inputs[1], 1);  // inf in the kernel meets padding zeros
        }
      }
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// Direct evaluation of the definition on the zero-padded, dilated input.
std::vector<TestArray> conv_oracle(const OpCase& c) {
  const auto& p = std::get<ConvParams>(c.params);
  const TestArray& x = c.inputs[0];
  const TestArray& w = c.inputs[1];
  const Shape& xs = x.aval.shape;
  const Shape& ws = w.aval.shape;
  int64_t groups = p.feature_group_count;
  int64_t ipg = ws[2], opg = ws[3] / groups;
  int64_t out_hw[2];
  for (size_t i = 0; i < 2; ++i) {
    int64_t in = xs[static_cast<int64_t>(i) + 1];
    int64_t dilated_in = in == 0 ? 0 : (in - 1) * p.lhs_dilation[i] + 1;
    int64_t padded = dilated_in + p.padding_low[i] + p.padding_high[i];
    int64_t window = (ws[static_cast<int64_t>(i)] - 1) * p.rhs_dilation[i] + 1;
    out_hw[i] = (padded - window) / p.window_strides[i] + 1;
  }
  Shape out_shape{xs[0], out_hw[0], out_hw[1], ws[3]};
  TestArray out{AbstractValue(out_shape, x.aval.dtype), {}};
  // Value of the padded, dilated input at padded coordinates (ph, pw).
  auto input_at = [&](int64_t n, int64_t ph, int64_t pw, int64_t ch) {
    int64_t dh = ph - p.padding_low[0], dw = pw - p.padding_low[1];
    if (dh < 0 || dw < 0 || dh % p.lhs_dilation[0] != 0 || dw % p.lhs_dilation[1] != 0) return 0.0;
    int64_t ih = dh / p.lhs_dilation[0], iw = dw / p.lhs_dilation[1];
    if (ih >= xs[1] || iw >= xs[2]) return 0.0;
    return x.values[static_cast<size_t>(((n * xs[1] + ih) * xs[2] + iw) * xs[3] + ch)];
  };
  for (int64_t n = 0; n < out_shape[0]; ++n) {
    for (int64_t oh = 0; oh < out_shape[1]; ++oh) {
      for (int64_t ow = 0; ow < out_shape[2]; ++ow) {
        for (int64_t o = 0; o < out_shape[3]; ++o) {
          double sum = 0;
          for (int64_t kh = 0; kh < ws[0]; ++kh) {
            for (int64_t kw = 0; kw < ws[1]; ++kw) {
              for (int64_t i = 0; i < ipg; ++i) {
                double xv =
                    input_at(n, oh * p.window_strides[0] + kh * p.rhs_dilation[0],
                             ow * p.window_strides[1] + kw * p.rhs_dilation[1], o / opg * ipg + i);
                sum +=
                    xv * w.values[static_cast<size_t>(((kh * ws[1] + kw) * ws[2] + i) * ws[3] + o)];
              }
            }
          }
          out.values.push_back(sum);
        }
      }
    }
  }
  return {out};
}

Tolerance conv_fast_tolerance(const OpCase& c, DType out_dtype) {
  const Shape& ws = c.inputs[1].aval.shape;
  DType compute = out_dtype == DType::f64 ? DType::f64 : DType::f32;
  return contract_tolerance(out_dtype, compute, ws[0] * ws[1] * ws[2], max_finite_abs(c.inputs[0]),
                            max_finite_abs(c.inputs[1]));
}

// ----- gradient cases ---------------------------------------------------------------------
// Both primitives are bilinear (no kinks), so f64 values in [-1, 1] suit finite differences.

std::vector<OpCase> dot_grad_cases() {
  std::vector<DotSpec> specs;
  for (const DotSpec& spec : dot_specs()) {
    if (!spec.large) specs.push_back(spec);
  }
  // Dimension numbers whose operand cotangents need a non-trivial transpose back.
  specs.push_back({"contracting axes out of order", Shape{2, 3, 4, 5}, Shape{5, 2, 4, 6},
                   dims({3, 2}, {0, 2}, {0}, {1})});
  specs.push_back(
      {"batch last, free first", Shape{4, 5, 3}, Shape{3, 2, 5}, dims({1}, {2}, {2}, {0})});
  specs.push_back({"free axes on both sides of contracting", Shape{2, 3, 4, 2}, Shape{3, 4},
                   dims({2, 1}, {1, 0})});
  std::vector<OpCase> cases;
  Rng rng(404);
  for (const DotSpec& spec : specs) {
    OpCase c{
        fmt::format("f64 {} {}x{}", spec.label, spec.lhs.to_string(), spec.rhs.to_string()),
        {contract_operand(DType::f64, spec.lhs, rng), contract_operand(DType::f64, spec.rhs, rng)},
        spec.params};
    cases.push_back(c);
    if (spec.label == "batched" || spec.label == "two contracting axes") {
      c.label += " preferred f64";
      std::get<DotGeneralParams>(c.params).preferred_element_type = DType::f64;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<OpCase> conv_grad_cases() {
  std::vector<ConvSpec> specs;
  for (const ConvSpec& spec : conv_specs()) {
    if (!spec.large) specs.push_back(spec);
  }
  // Strides that do not divide the input (the transposed convolutions crop), asymmetric and
  // negative padding with strides, and groups combined with both dilations.
  specs.push_back({"stride 2 odd input, asymmetric padding", Shape{2, 8, 7, 3}, Shape{3, 2, 3, 4},
                   conv({2, 2}, {0, 1}, {2, 0})});
  specs.push_back({"negative padding, stride 2", Shape{1, 9, 8, 2}, Shape{2, 3, 2, 3},
                   conv({2, 2}, {-1, 1}, {-2, 0})});
  specs.push_back({"stride 3 larger than kernel", Shape{1, 10, 8, 2}, Shape{2, 2, 2, 2},
                   conv({3, 3}, {0, 0}, {0, 0})});
  specs.push_back({"groups 2, both dilations, stride", Shape{2, 5, 6, 4}, Shape{2, 3, 2, 4},
                   conv({2, 1}, {1, 2}, {0, 1}, {2, 1}, {1, 2}, 2)});
  specs.push_back({"depthwise, rhs dilation 2, stride 2", Shape{1, 9, 9, 3}, Shape{3, 3, 1, 3},
                   conv({2, 2}, {2, 2}, {2, 2}, {1, 1}, {2, 2}, 3)});
  std::vector<OpCase> cases;
  Rng rng(505);
  for (const ConvSpec& spec : specs) {
    cases.push_back(
        {fmt::format("f64 {} {}x{}", spec.label, spec.x.to_string(), spec.w.to_string()),
         {contract_operand(DType::f64, spec.x, rng), contract_operand(DType::f64, spec.w, rng)},
         spec.params});
  }
  return cases;
}

}  // namespace

std::vector<OpRow> contract_rows() {
  std::vector<OpRow> rows;
  rows.push_back(OpRow{.prim = prim::dot_general,
                       .cases = dot_cases,
                       .oracle = dot_oracle,
                       .fast_tolerance = dot_fast_tolerance,
                       .grad_cases = dot_grad_cases,
                       .second_order = true});
  rows.push_back(OpRow{.prim = prim::conv_general_dilated,
                       .cases = conv_cases,
                       .oracle = conv_oracle,
                       .fast_tolerance = conv_fast_tolerance,
                       .grad_cases = conv_grad_cases,
                       .second_order = true});
  return rows;
}

}  // namespace kiln::testing
