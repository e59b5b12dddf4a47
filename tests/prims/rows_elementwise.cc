// op_table rows for the elementwise primitives (unary, binary, select, convert).
// Oracles compute in double (integers exactly, wrapped to the dtype's width).
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/select.h"
#include "prims/ids/unary.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

using ValueGen = std::function<double(Rng&, DType, int operand)>;
using ScalarOracle = std::function<double(std::span<const double> args, DType dtype)>;

double default_value(Rng& rng, DType dtype, int) {
  switch (dtype) {
    case DType::bool_:
      return uniform(rng, 0, 1) < 0.5 ? 0 : 1;
    case DType::u8:
      return std::floor(uniform(rng, 0, 256));
    case DType::u32:
      return std::floor(uniform(rng, 0, 4294967296.0));
    case DType::i32:
      return std::floor(uniform(rng, -100000, 100000));
    case DType::i64:
      return std::floor(uniform(rng, -1048576, 1048576));
    default:
      return uniform(rng, -3, 3);
  }
}

// Integer extremes, placed to exercise wrapping.
void insert_int_extremes(TestArray& array) {
  std::vector<double> extremes;
  switch (array.aval.dtype) {
    case DType::i32:
      extremes = {-2147483648.0, 2147483647.0, -1, 0};
      break;
    case DType::u8:
      extremes = {0, 255, 1};
      break;
    case DType::u32:
      extremes = {0, 4294967295.0, 1};
      break;
    case DType::i64:
      extremes = {-9223372036854775808.0, -1, 0};
      break;
    default:
      return;
  }
  for (size_t i = 0; i < extremes.size() && i < array.values.size(); ++i) {
    array.values[(i * 104729 + 3) % array.values.size()] = extremes[i];
  }
}

std::vector<OpCase> elementwise_cases(int arity, std::span<const DType> dtypes, const ValueGen& gen,
                                      bool specials) {
  std::vector<OpCase> cases;
  Rng rng(1234);
  auto make = [&](DType dtype, const Shape& shape, int operand) {
    TestArray array =
        random_array(dtype, shape, rng, [&](Rng& r) { return gen(r, dtype, operand); });
    if (specials) {
      insert_specials(array);
      if (operand == 0) insert_int_extremes(array);
    }
    return array;
  };
  for (DType dtype : dtypes) {
    for (const Shape& shape : standard_shapes(dtype)) {
      OpCase c{fmt::format("{}{}", dtype_name(dtype), shape.to_string()), {}, NoParams{}};
      for (int operand = 0; operand < arity; ++operand)
        c.inputs.push_back(make(dtype, shape, operand));
      cases.push_back(std::move(c));
    }
    if (arity >= 2) {
      for (const auto& [a, b] : broadcast_shape_pairs(dtype)) {
        OpCase c{fmt::format("{}{}x{}", dtype_name(dtype), a.to_string(), b.to_string()),
                 {},
                 NoParams{}};
        c.inputs.push_back(make(dtype, a, 0));
        c.inputs.push_back(make(dtype, b, 1));
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

Oracle elementwise_oracle(ScalarOracle f, bool returns_bool) {
  return [f, returns_bool](const OpCase& c) {
    Shape out_shape = broadcast_of(c.inputs);
    DType dtype = c.inputs.back().aval.dtype;  // operand dtype (select: the branches')
    TestArray out{AbstractValue(out_shape, returns_bool ? DType::bool_ : dtype), {}};
    std::vector<double> args(c.inputs.size());
    for (int64_t i = 0; i < out_shape.num_elements(); ++i) {
      for (size_t k = 0; k < c.inputs.size(); ++k) {
        args[k] =
            c.inputs[k]
                .values[static_cast<size_t>(source_index(out_shape, c.inputs[k].aval.shape, i))];
      }
      out.values.push_back(f(args, dtype));
    }
    return std::vector<TestArray>{out};
  };
}

std::vector<DType> float_dtypes() {
  return {std::begin(kFloatDTypes), std::end(kFloatDTypes)};
}
std::vector<DType> numeric_dtypes() {
  std::vector<DType> dtypes = float_dtypes();
  dtypes.insert(dtypes.end(), std::begin(kIntDTypes), std::end(kIntDTypes));
  return dtypes;
}
std::vector<DType> bitwise_dtypes() {
  std::vector<DType> dtypes{DType::bool_};
  dtypes.insert(dtypes.end(), std::begin(kIntDTypes), std::end(kIntDTypes));
  return dtypes;
}
std::vector<DType> all_dtypes() {
  std::vector<DType> dtypes = numeric_dtypes();
  dtypes.push_back(DType::bool_);
  return dtypes;
}

OpRow row(PrimId prim, int arity, std::vector<DType> dtypes, ScalarOracle f,
          bool returns_bool = false, ValueGen gen = default_value) {
  return OpRow{.prim = prim,
               .cases = [=] { return elementwise_cases(arity, dtypes, gen, true); },
               .oracle = elementwise_oracle(f, returns_bool)};
}

// Rows whose gradient column also checks the gradient of the gradient.
OpRow second_order(OpRow row) {
  row.second_order = true;
  return row;
}

__int128 as_int(double value) {
  return static_cast<__int128>(value);
}

// Float math in double; integers exactly, then wrapped.
ScalarOracle unary(double (*float_fn)(double), __int128 (*int_fn)(__int128) = nullptr) {
  return [=](std::span<const double> x, DType dtype) {
    if (is_floating(dtype) || int_fn == nullptr) return float_fn(x[0]);
    return wrap_to(dtype, int_fn(as_int(x[0])));
  };
}

ScalarOracle binary(double (*float_fn)(double, double),
                    __int128 (*int_fn)(__int128, __int128, DType) = nullptr) {
  return [=](std::span<const double> x, DType dtype) {
    if (is_floating(dtype) || int_fn == nullptr) return float_fn(x[0], x[1]);
    return wrap_to(dtype, int_fn(as_int(x[0]), as_int(x[1]), dtype));
  };
}

double nan_max(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : (a > b ? a : b);
}
double nan_min(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? a : b);
}

double int_min_of(DType dtype) {
  return dtype == DType::i32 ? -2147483648.0 : dtype == DType::i64 ? -9223372036854775808.0 : 0;
}

ValueGen nonzero_divisor = [](Rng& rng, DType dtype, int operand) {
  double value = default_value(rng, dtype, operand);
  if (operand == 1 && !is_floating(dtype)) {
    if (value == 0) value = 1;
    if (dtype == DType::i32 || dtype == DType::i64) value = std::fmod(value, 1000.0);
    if (value == 0) value = -1;
  }
  return value;
};

ValueGen positive_base = [](Rng& rng, DType dtype, int operand) {
  return operand == 0 ? uniform(rng, 0.05, 3) : default_value(rng, dtype, operand);
};

ValueGen narrow_ints = [](Rng& rng, DType dtype, int operand) {
  // Keeps bitwise and comparison tests away from i64 values doubles cannot hold.
  double value = default_value(rng, dtype, operand);
  return dtype == DType::i64 ? std::floor(uniform(rng, -1e6, 1e6)) : value;
};

}  // namespace

std::vector<OpRow> elementwise_rows() {
  std::vector<OpRow> rows;
  auto numeric = numeric_dtypes();
  auto floats = float_dtypes();
  rows.push_back(row(prim::neg, 1, numeric,
                     unary([](double x) { return -x; }, [](__int128 x) { return -x; })));
  rows.push_back(
      row(prim::abs, 1, numeric,
          unary([](double x) { return std::fabs(x); }, [](__int128 x) { return x < 0 ? -x : x; })));
  rows.push_back(row(prim::sign, 1, numeric,
                     unary([](double x) { return x > 0   ? 1.0
                                                 : x < 0 ? -1.0
                                                         : x; },
                           [](__int128 x) -> __int128 { return x > 0   ? 1
                                                               : x < 0 ? -1
                                                                       : 0; })));
  rows.push_back(
      second_order(row(prim::exp, 1, floats, unary([](double x) { return std::exp(x); }))));
  rows.push_back(row(prim::expm1, 1, floats, unary([](double x) { return std::expm1(x); })));
  rows.push_back(
      second_order(row(prim::log, 1, floats, unary([](double x) { return std::log(x); }))));
  rows.push_back(row(prim::log1p, 1, floats, unary([](double x) { return std::log1p(x); })));
  rows.push_back(
      second_order(row(prim::sqrt, 1, floats, unary([](double x) { return std::sqrt(x); }))));
  rows.push_back(row(prim::rsqrt, 1, floats, unary([](double x) { return 1 / std::sqrt(x); })));
  rows.push_back(
      second_order(row(prim::tanh, 1, floats, unary([](double x) { return std::tanh(x); }))));
  rows.push_back(second_order(
      row(prim::logistic, 1, floats, unary([](double x) { return 1 / (1 + std::exp(-x)); }))));
  rows.push_back(row(prim::sin, 1, floats, unary([](double x) { return std::sin(x); })));
  rows.push_back(row(prim::cos, 1, floats, unary([](double x) { return std::cos(x); })));
  rows.push_back(row(prim::floor, 1, floats, unary([](double x) { return std::floor(x); })));
  rows.push_back(row(prim::ceil, 1, floats, unary([](double x) { return std::ceil(x); })));
  rows.push_back(row(prim::round, 1, floats, unary([](double x) { return std::nearbyint(x); })));
  rows.push_back(row(prim::is_finite, 1, floats,
                     unary([](double x) { return std::isfinite(x) ? 1.0 : 0.0; }), true));
  rows.push_back(row(
      prim::not_, 1, bitwise_dtypes(),
      [](std::span<const double> x, DType dtype) {
        if (dtype == DType::bool_) return x[0] == 0 ? 1.0 : 0.0;
        return wrap_to(dtype, ~as_int(x[0]));
      },
      false, narrow_ints));

  rows.push_back(row(prim::add, 2, numeric,
                     binary([](double a, double b) { return a + b; },
                            [](__int128 a, __int128 b, DType) { return a + b; })));
  rows.push_back(row(prim::sub, 2, numeric,
                     binary([](double a, double b) { return a - b; },
                            [](__int128 a, __int128 b, DType) { return a - b; })));
  rows.push_back(second_order(row(prim::mul, 2, numeric,
                                  binary([](double a, double b) { return a * b; },
                                         [](__int128 a, __int128 b, DType) { return a * b; }))));
  rows.push_back(second_order(row(prim::div, 2, numeric,
                                  binary([](double a, double b) { return a / b; },
                                         [](__int128 a, __int128 b, DType) { return a / b; }),
                                  false, nonzero_divisor)));
  rows.push_back(row(prim::rem, 2, numeric,
                     binary([](double a, double b) { return std::fmod(a, b); },
                            [](__int128 a, __int128 b, DType) { return a % b; }),
                     false, nonzero_divisor));
  rows.push_back(second_order(row(prim::pow, 2, floats,
                                  binary([](double a, double b) { return std::pow(a, b); }), false,
                                  positive_base)));
  rows.push_back(row(prim::max, 2, numeric,
                     binary(nan_max, [](__int128 a, __int128 b, DType) { return a > b ? a : b; })));
  rows.push_back(row(prim::min, 2, numeric,
                     binary(nan_min, [](__int128 a, __int128 b, DType) { return a < b ? a : b; })));
  auto bitwise = [](__int128 (*fn)(__int128, __int128)) -> ScalarOracle {
    return [fn](std::span<const double> x, DType dtype) {
      if (dtype == DType::bool_) return fn(x[0] != 0, x[1] != 0) != 0 ? 1.0 : 0.0;
      return wrap_to(dtype, fn(as_int(x[0]), as_int(x[1])));
    };
  };
  rows.push_back(row(prim::and_, 2, bitwise_dtypes(),
                     bitwise([](__int128 a, __int128 b) { return a & b; }), false, narrow_ints));
  rows.push_back(row(prim::or_, 2, bitwise_dtypes(),
                     bitwise([](__int128 a, __int128 b) { return a | b; }), false, narrow_ints));
  rows.push_back(row(prim::xor_, 2, bitwise_dtypes(),
                     bitwise([](__int128 a, __int128 b) { return a ^ b; }), false, narrow_ints));
  auto compare_row = [&](PrimId prim, bool (*fn)(double, double)) {
    return row(
        prim, 2, all_dtypes(),
        [fn](std::span<const double> x, DType) { return fn(x[0], x[1]) ? 1.0 : 0.0; }, true,
        narrow_ints);
  };
  rows.push_back(compare_row(prim::eq, [](double a, double b) { return a == b; }));
  rows.push_back(compare_row(prim::ne, [](double a, double b) { return a != b; }));
  rows.push_back(compare_row(prim::lt, [](double a, double b) { return a < b; }));
  rows.push_back(compare_row(prim::le, [](double a, double b) { return a <= b; }));
  rows.push_back(compare_row(prim::gt, [](double a, double b) { return a > b; }));
  rows.push_back(compare_row(prim::ge, [](double a, double b) { return a >= b; }));

  // select(pred, on_true, on_false): the predicate is bool, the branches share a dtype.
  rows.push_back(second_order(OpRow{
      .prim = prim::select,
      .cases =
          [] {
            std::vector<OpCase> cases;
            Rng rng(99);
            auto bits = [](Rng& r) { return uniform(r, 0, 1) < 0.5 ? 0.0 : 1.0; };
            for (DType dtype : all_dtypes()) {
              auto branch = [&](const Shape& shape) {
                TestArray array = random_array(dtype, shape, rng,
                                               [&](Rng& r) { return default_value(r, dtype, 0); });
                insert_specials(array);
                return array;
              };
              for (const Shape& shape : standard_shapes(dtype)) {
                cases.push_back(
                    {fmt::format("{}{}", dtype_name(dtype), shape.to_string()),
                     {random_array(DType::bool_, shape, rng, bits), branch(shape), branch(shape)},
                     NoParams{}});
              }
              cases.push_back({fmt::format("{} broadcast", dtype_name(dtype)),
                               {random_array(DType::bool_, Shape{3, 1}, rng, bits),
                                branch(Shape{1, 4}), branch(Shape{3, 4})},
                               NoParams{}});
            }
            return cases;
          },
      .oracle = elementwise_oracle(
          [](std::span<const double> x, DType) { return x[0] != 0 ? x[1] : x[2]; }, false)}));

  // convert_element_type between every pair of dtypes, including specials and extremes.
  rows.push_back(OpRow{
      .prim = prim::convert_element_type,
      .cases =
          [] {
            std::vector<OpCase> cases;
            Rng rng(7);
            for (DType from : all_dtypes()) {
              for (DType to : all_dtypes()) {
                for (const Shape& shape : {Shape{}, Shape{0}, Shape{257}}) {
                  TestArray input = random_array(from, shape, rng, [&](Rng& r) {
                    return is_floating(from) ? uniform(r, -70000, 70000)
                                             : default_value(r, from, 0);
                  });
                  insert_specials(input);
                  insert_int_extremes(input);
                  if (is_floating(from) && input.values.size() > 40) {
                    // Values that sit exactly at or near rounding ties of the narrow formats.
                    double probes[] = {1.0 + 0x1p-11, 1.0 + 0x1p-8, 1.0 + 3 * 0x1p-11, 2.5,  -2.5,
                                       65519.99,      65520,        4294967296.0,      -1.5, 0.5,
                                       300,           -129};
                    for (size_t i = 0; i < std::size(probes); ++i) input.values[20 + i] = probes[i];
                    input = make_array(from, input.aval.shape, input.values);
                  }
                  cases.push_back(
                      {fmt::format("{}->{}{}", dtype_name(from), dtype_name(to), shape.to_string()),
                       {input},
                       ConvertParams{to}});
                }
              }
            }
            return cases;
          },
      .oracle =
          [](const OpCase& c) {
            DType to = std::get<ConvertParams>(c.params).new_dtype;
            TestArray out{AbstractValue(c.inputs[0].aval.shape, to), {}};
            for (double x : c.inputs[0].values) {
              double y;
              if (to == DType::bool_) {
                y = x != 0 ? 1 : 0;
              } else if (is_floating(to)) {
                y = x;  // compare() rounds to the target dtype
              } else if (is_floating(c.inputs[0].aval.dtype)) {
                double lo = to == DType::i32   ? -2147483648.0
                            : to == DType::i64 ? -9223372036854775808.0
                                               : 0;
                double hi = to == DType::i32   ? 2147483647.0
                            : to == DType::i64 ? 9223372036854775807.0
                            : to == DType::u8  ? 255.0
                                               : 4294967295.0;
                y = std::isnan(x) ? 0 : x <= lo ? lo : x >= hi ? hi : std::trunc(x);
              } else {
                y = wrap_to(to, as_int(x));
              }
              out.values.push_back(y);
            }
            return std::vector<TestArray>{out};
          },
      .ref_tolerance =
          [](const OpCase&, DType) {
            return Tolerance{0, 0};
          },
      .fast_tolerance =
          [](const OpCase&, DType) {
            return Tolerance{0, 0};
          }});
  (void)int_min_of;
  return rows;
}

}  // namespace kiln::testing
