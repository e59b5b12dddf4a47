// op_table rows for the primitives behind kiln::random: threefry2x32, the integer shifts,
// bitcast_convert_type, erf and erf_inv (sort's row is in rows_sort.cc). Oracles are written
// independently of the kernels: the hash from the Threefry specification, shifts in exact
// __int128 arithmetic, erf/erf_inv in long double (erf_inv by bisection and Newton on erfl).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "core/element_convert.h"
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/random.h"
#include "prims/ids/unary.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

// ----- threefry2x32 ----------------------------------------------------------------------

// Threefry-2x32-20 as the specification states it: 20 rounds of (add, rotate, xor) with
// the rotation schedule R[r mod 8], and a key injection after every fourth round.
std::pair<uint32_t, uint32_t> threefry_spec(uint32_t k0, uint32_t k1, uint32_t x0, uint32_t x1) {
  static constexpr unsigned kR[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uint32_t key[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint32_t v[2] = {x0 + key[0], x1 + key[1]};
  for (unsigned r = 0; r < 20; ++r) {
    v[0] += v[1];
    v[1] = std::rotl(v[1], static_cast<int>(kR[r % 8]));
    v[1] ^= v[0];
    if (r % 4 == 3) {
      unsigned s = r / 4 + 1;
      v[0] += key[s % 3];
      v[1] += key[(s + 1) % 3] + s;
    }
  }
  return {v[0], v[1]};
}

std::vector<OpCase> threefry_cases() {
  std::vector<OpCase> cases;
  Rng rng(2718);
  auto words = [&](Shape shape) {
    return random_array(DType::u32, std::move(shape), rng,
                        [](Rng& r) { return std::floor(uniform(r, 0, 4294967296.0)); });
  };
  // Random123's known answers, as one case.
  cases.push_back({"kat",
                   {make_array(DType::u32, {3}, {0, 4294967295.0, 0x13198a2e}),
                    make_array(DType::u32, {3}, {0, 4294967295.0, 0x03707344}),
                    make_array(DType::u32, {3}, {0, 4294967295.0, 0x243f6a88}),
                    make_array(DType::u32, {3}, {0, 4294967295.0, 0x85a308d3})},
                   NoParams{}});
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{1}, Shape{7}, Shape{3, 5}, Shape{2, 0, 3}}) {
    cases.push_back({fmt::format("u32{}", shape.to_string()),
                     {words(shape), words(shape), words(shape), words(shape)},
                     NoParams{}});
  }
  // Broadcast keys with contiguous counters (random bits), large enough to be chunked.
  for (int64_t n : {int64_t{33}, int64_t{300007}}) {
    cases.push_back({fmt::format("keys x counters[{}]", n),
                     {words({1}), words({1}), words({n}), words({n})},
                     NoParams{}});
  }
  cases.push_back({"mixed broadcast",
                   {words({3, 1}), words({1, 1}), words({1, 4}), words({3, 4})},
                   NoParams{}});
  cases.push_back(
      {"rank-0 keys x counters", {words({}), words({}), words({}), words({2, 9})}, NoParams{}});
  cases.push_back({"zero-size broadcast",
                   {words({4, 1}), words({1, 0}), words({4, 0}), words({1, 1})},
                   NoParams{}});
  return cases;
}

std::vector<TestArray> threefry_oracle(const OpCase& c) {
  Shape out = broadcast_of(c.inputs);
  TestArray y0{AbstractValue(out, DType::u32), {}}, y1{AbstractValue(out, DType::u32), {}};
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    uint32_t w[4];
    for (size_t k = 0; k < 4; ++k) {
      w[k] = static_cast<uint32_t>(
          c.inputs[k].values[static_cast<size_t>(source_index(out, c.inputs[k].aval.shape, i))]);
    }
    auto [a, b] = threefry_spec(w[0], w[1], w[2], w[3]);
    y0.values.push_back(a);
    y1.values.push_back(b);
  }
  return {y0, y1};
}

// ----- shifts ----------------------------------------------------------------------------

enum class Shift { kLeft, kRightLogical, kRightArithmetic };

int bit_width(DType dtype) {
  return 8 * dtype_size(dtype);
}

// The XLA meaning in exact arithmetic: the amount is read as an unsigned number of the
// dtype's width; amounts of at least the width shift everything out.
double shift_oracle(Shift kind, DType dtype, double x_value, double amount_value) {
  int width = bit_width(dtype);
  __int128 modulus = static_cast<__int128>(1) << width;
  auto x = static_cast<__int128>(x_value);
  auto amount = static_cast<__int128>(amount_value);
  __int128 unsigned_x = ((x % modulus) + modulus) % modulus;
  __int128 unsigned_amount = ((amount % modulus) + modulus) % modulus;
  __int128 signed_x = unsigned_x >= modulus / 2 ? unsigned_x - modulus : unsigned_x;
  bool out_of_range = unsigned_amount >= width;
  __int128 result = 0;
  switch (kind) {
    case Shift::kLeft:
      result = out_of_range ? 0 : unsigned_x * (static_cast<__int128>(1) << unsigned_amount);
      break;
    case Shift::kRightLogical:
      result = out_of_range ? 0 : unsigned_x / (static_cast<__int128>(1) << unsigned_amount);
      break;
    case Shift::kRightArithmetic: {
      int shift = out_of_range ? width - 1 : static_cast<int>(unsigned_amount);
      __int128 divisor = static_cast<__int128>(1) << shift;
      // Floor division (arithmetic shifts round toward -inf).
      result = signed_x >= 0 ? signed_x / divisor : -((-signed_x + divisor - 1) / divisor);
      break;
    }
  }
  return wrap_to(dtype, result);
}

double int_value(Rng& rng, DType dtype) {
  switch (dtype) {
    case DType::u8:
      return std::floor(uniform(rng, 0, 256));
    case DType::u32:
      return std::floor(uniform(rng, 0, 4294967296.0));
    case DType::i32:
      return std::floor(uniform(rng, -2147483648.0, 2147483648.0));
    default:  // i64 values a double holds exactly
      return std::floor(uniform(rng, -9007199254740992.0, 9007199254740992.0));
  }
}

std::vector<OpCase> shift_cases() {
  std::vector<OpCase> cases;
  Rng rng(31);
  for (DType dtype : kIntDTypes) {
    int width = bit_width(dtype);
    auto values = [&](Shape shape) {
      TestArray array =
          random_array(dtype, std::move(shape), rng, [&](Rng& r) { return int_value(r, dtype); });
      double extremes[] = {0, 1,
                           dtype == DType::i32   ? -2147483648.0
                           : dtype == DType::i64 ? -9223372036854775808.0
                                                 : 255};
      for (size_t i = 0; i < std::size(extremes) && i < array.values.size(); ++i) {
        array.values[i * 5 % array.values.size()] = extremes[i];
      }
      return array;
    };
    // Amounts from -2 to width + 2 (negative ones wrap for unsigned dtypes).
    auto amounts = [&](Shape shape) {
      return random_array(dtype, std::move(shape), rng, [&](Rng& r) {
        double amount = std::floor(uniform(r, -2, width + 3));
        return is_unsigned(dtype) && amount < 0 ? amount + std::ldexp(1.0, width) : amount;
      });
    };
    for (const Shape& shape : standard_shapes(dtype)) {
      cases.push_back({fmt::format("{}{}", dtype_name(dtype), shape.to_string()),
                       {values(shape), amounts(shape)},
                       NoParams{}});
    }
    for (const auto& [a, b] : broadcast_shape_pairs(dtype)) {
      cases.push_back({fmt::format("{}{}x{}", dtype_name(dtype), a.to_string(), b.to_string()),
                       {values(a), amounts(b)},
                       NoParams{}});
    }
  }
  return cases;
}

OpRow shift_row(PrimId prim, Shift kind) {
  return OpRow{
      .prim = prim,
      .cases = shift_cases,
      .oracle =
          [kind](const OpCase& c) {
            Shape out = broadcast_of(c.inputs);
            DType dtype = c.inputs[0].aval.dtype;
            TestArray y{AbstractValue(out, dtype), {}};
            for (int64_t i = 0; i < out.num_elements(); ++i) {
              double x =
                  c.inputs[0]
                      .values[static_cast<size_t>(source_index(out, c.inputs[0].aval.shape, i))];
              double amount =
                  c.inputs[1]
                      .values[static_cast<size_t>(source_index(out, c.inputs[1].aval.shape, i))];
              y.values.push_back(shift_oracle(kind, dtype, x, amount));
            }
            return std::vector<TestArray>{y};
          },
      .ref_tolerance = exact,
      .fast_tolerance = exact};
}

// ----- bitcast_convert_type --------------------------------------------------------------

// The element's bytes in its dtype's storage (how the harness encodes it), as an integer.
uint64_t storage_bits(DType dtype, double value) {
  uint64_t bits = 0;
  visit_dtype(dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    S stored = convert_element<S>(value);
    std::memcpy(&bits, &stored, sizeof(S));
  });
  return bits;
}

// The value whose storage in `dtype` is `bits`.
double value_of_bits(DType dtype, uint64_t bits) {
  switch (dtype) {
    case DType::f32:
      return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DType::f64:
      return std::bit_cast<double>(bits);
    case DType::f16:
      return f16::from_bits(static_cast<uint16_t>(bits)).to_float();
    case DType::bf16:
      return bf16::from_bits(static_cast<uint16_t>(bits)).to_float();
    case DType::i32:
      return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case DType::i64:
      return static_cast<double>(static_cast<int64_t>(bits));
    case DType::u32:
      return static_cast<uint32_t>(bits);
    default:
      return static_cast<double>(bits & 0xFF);
  }
}

std::vector<OpCase> bitcast_cases() {
  std::vector<OpCase> cases;
  Rng rng(77);
  const std::pair<DType, DType> pairs[] = {
      {DType::f32, DType::u32},  {DType::f32, DType::i32}, {DType::u32, DType::f32},
      {DType::i32, DType::f32},  {DType::u32, DType::i32}, {DType::i32, DType::u32},
      {DType::f64, DType::i64},  {DType::i64, DType::f64}, {DType::f16, DType::bf16},
      {DType::bf16, DType::f16}, {DType::u8, DType::u8},   {DType::f32, DType::f32}};
  for (const auto& [from, to] : pairs) {
    std::vector<Shape> shapes{Shape{}, Shape{0}, Shape{2, 3}, Shape{257}};
    if (from == DType::f32 && to == DType::u32) shapes.push_back(Shape{300007});
    for (const Shape& shape : shapes) {
      TestArray input = random_array(from, shape, rng, [&](Rng& r) {
        if (from == DType::i64) {
          // Patterns of doubles with the low 11 bits clear: exact as doubles, and every
          // kind of double (normal, NaN, inf) among them.
          auto bits = std::bit_cast<int64_t>(uniform(r, -1e300, 1e300)) & ~int64_t{0x7FF};
          if (uniform(r, 0, 1) < 0.1) bits = int64_t{0x7FF8} << 48;
          return static_cast<double>(bits);
        }
        if (is_floating(from)) return uniform(r, -1e4, 1e4);
        return int_value(r, from);
      });
      insert_specials(input);
      cases.push_back({fmt::format("{}->{}{}", dtype_name(from), dtype_name(to), shape.to_string()),
                       {input},
                       ConvertParams{to}});
    }
  }
  return cases;
}

std::vector<TestArray> bitcast_oracle(const OpCase& c) {
  DType from = c.inputs[0].aval.dtype;
  DType to = std::get<ConvertParams>(c.params).new_dtype;
  TestArray y{AbstractValue(c.inputs[0].aval.shape, to), {}};
  for (double x : c.inputs[0].values) y.values.push_back(value_of_bits(to, storage_bits(from, x)));
  return {y};
}

// ----- erf and erf_inv -------------------------------------------------------------------

long double erf_inv_oracle(long double x) {
  if (std::isnan(x) || x < -1 || x > 1) return NAN;
  if (x == 0) return x;
  long double a = std::fabs(x);
  if (a == 1) return x > 0 ? INFINITY : -INFINITY;
  constexpr long double kPi = 3.141592653589793238462643383279502884L;
  long double t;
  if (a < 1e-4L) {
    t = std::sqrt(kPi) / 2 * a * (1 + a * a * (kPi / 12 + a * a * 7 * kPi * kPi / 480));
  } else {
    // Bisection on erf (or erfc in the upper half, where 1 - a is exact) to ~1e-2, then
    // Newton steps: erf is concave (erfc convex) on t > 0, so they converge monotonically,
    // quadratically, below long double precision.
    long double lo = 0, hi = 30;
    for (int i = 0; i < 12; ++i) {
      long double mid = (lo + hi) / 2;
      bool below = a > 0.5L ? std::erfc(mid) > 1 - a : std::erf(mid) < a;
      (below ? lo : hi) = mid;
    }
    t = (lo + hi) / 2;
  }
  for (int i = 0; i < 7; ++i) {
    long double slope = 2 / std::sqrt(kPi) * std::exp(-t * t);
    t -= (a > 0.5L ? (1 - a) - std::erfc(t) : std::erf(t) - a) / slope;
  }
  return x < 0 ? -t : t;
}

std::vector<OpCase> special_cases(bool inverse) {
  std::vector<OpCase> cases;
  Rng rng(inverse ? 91 : 90);
  for (DType dtype : kFloatDTypes) {
    // The standard shapes, with one large size (several chunks in the fast kernel) small
    // enough that the long double oracle stays quick.
    std::vector<Shape> shapes{Shape{},     Shape{0},       Shape{1},       Shape{7},
                              Shape{3, 5}, Shape{2, 3, 4}, Shape{2, 0, 3}, Shape{33, 17}};
    if (wants_large_cases(dtype)) shapes.push_back(Shape{70001});
    for (const Shape& shape : shapes) {
      TestArray x = random_array(dtype, shape, rng, [&](Rng& r) {
        if (!inverse) return uniform(r, -4.5, 4.5);
        double u = uniform(r, 0, 1);
        // Half the values crowd toward +-1, where erf_inv is steep.
        double v = u < 0.5
                       ? uniform(r, -1, 1)
                       : 1 - std::ldexp(uniform(r, 0.5, 1), -static_cast<int>(uniform(r, 1, 50)));
        return uniform(r, 0, 1) < 0.5 ? v : -v;
      });
      insert_specials(x);
      if (inverse && x.values.size() > 20) {
        x.values[11] = 1;
        x.values[12] = -1;
        x.values[13] = 1e-30;
        x = make_array(dtype, x.aval.shape, x.values);
      }
      cases.push_back({fmt::format("{}{}", dtype_name(dtype), shape.to_string()), {x}, NoParams{}});
    }
  }
  return cases;
}

// f64 cases for the gradient column, inside the domain (erf_inv: away from +-1).
std::vector<OpCase> special_grad_cases(bool inverse) {
  std::vector<OpCase> cases;
  Rng rng(inverse ? 93 : 92);
  double bound = inverse ? 0.9 : 2.0;
  for (const Shape& shape : {Shape{}, Shape{7}, Shape{3, 5}}) {
    cases.push_back(
        {fmt::format("f64{}", shape.to_string()),
         {random_array(DType::f64, shape, rng, [&](Rng& r) { return uniform(r, -bound, bound); })},
         NoParams{}});
  }
  return cases;
}

OpRow special_row(PrimId prim, bool inverse) {
  OpRow row{.prim = prim,
            .cases = [inverse] { return special_cases(inverse); },
            .oracle =
                [inverse](const OpCase& c) {
                  TestArray y{c.inputs[0].aval, {}};
                  for (double x : c.inputs[0].values) {
                    long double v =
                        inverse ? erf_inv_oracle(x) : std::erf(static_cast<long double>(x));
                    y.values.push_back(static_cast<double>(v));
                  }
                  return std::vector<TestArray>{y};
                }};
  row.grad_cases = [inverse] { return special_grad_cases(inverse); };
  row.second_order = true;
  return row;
}

}  // namespace

std::vector<OpRow> random_rows() {
  std::vector<OpRow> rows;
  rows.push_back(OpRow{.prim = prim::threefry2x32,
                       .cases = threefry_cases,
                       .oracle = threefry_oracle,
                       .ref_tolerance = exact,
                       .fast_tolerance = exact});
  rows.push_back(shift_row(prim::shift_left, Shift::kLeft));
  rows.push_back(shift_row(prim::shift_right_logical, Shift::kRightLogical));
  rows.push_back(shift_row(prim::shift_right_arithmetic, Shift::kRightArithmetic));
  rows.push_back(OpRow{.prim = prim::bitcast_convert_type,
                       .cases = bitcast_cases,
                       .oracle = bitcast_oracle,
                       .ref_tolerance = exact,
                       .fast_tolerance = exact});
  rows.push_back(special_row(prim::erf, false));
  rows.push_back(special_row(prim::erf_inv, true));
  return rows;
}

}  // namespace kiln::testing
