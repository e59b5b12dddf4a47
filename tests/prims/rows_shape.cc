// op_table rows for the layout family: broadcast_in_dim, reshape, transpose, concatenate
// and iota here, the slicing primitives in rows_shape_slice.cc. Each oracle maps every
// output index back to the operand element it comes from, in plain index arithmetic, so
// it shares nothing with the kernels (which mostly map forward). These are copies: the
// tolerances are exact.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "prims/ids/shape.h"
#include "prims/rows_shape.h"

namespace kiln::testing {
namespace shape_rows_util {

int64_t ravel(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t flat = 0;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    flat = flat * shape[axis] + index[static_cast<size_t>(axis)];
  }
  return flat;
}
double at(const TestArray& array, const std::vector<int64_t>& index) {
  return array.values[static_cast<size_t>(ravel(index, array.aval.shape))];
}

std::vector<DType> every_dtype() {
  return {DType::bool_, DType::u8,  DType::bf16, DType::f16, DType::f32,
          DType::f64,   DType::i32, DType::i64,  DType::u32};
}
std::vector<DType> large_dtypes() {
  std::vector<DType> dtypes;
  for (DType dtype : every_dtype()) {
    if (wants_large_cases(dtype)) dtypes.push_back(dtype);
  }
  return dtypes;
}

TestArray values_for(DType dtype, const Shape& shape, Rng& rng) {
  // Raw generator bits (not a distribution per element) keep the large cases cheap.
  auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1p-53; };
  std::vector<double> values(static_cast<size_t>(shape.num_elements()));
  for (double& value : values) {
    switch (dtype) {
      case DType::bool_:
        value = static_cast<double>(rng() & 1);
        break;
      case DType::u8:
        value = static_cast<double>(rng() & 0xff);
        break;
      case DType::u32:
        value = static_cast<double>(rng() & 0xffffffff);
        break;
      case DType::i32:
        value = static_cast<double>(static_cast<int32_t>(rng()));
        break;
      case DType::i64:
        value = static_cast<double>(static_cast<int64_t>(rng()) >> 11);  // exact in a double
        break;
      default:
        value = unit() * 2000 - 1000;
    }
  }
  TestArray array = make_array(dtype, shape, std::move(values));
  insert_specials(array);
  return array;
}

std::string label(DType dtype, const std::vector<Shape>& shapes, const std::string& what) {
  std::string text(dtype_name(dtype));
  for (const Shape& shape : shapes) text += shape.to_string();
  return text + " " + what;
}

namespace {}  // namespace

OpRow copy_row(PrimId prim, CaseGenerator cases, Oracle oracle) {
  return OpRow{.prim = prim,
               .cases = std::move(cases),
               .oracle = std::move(oracle),
               .ref_tolerance = exact,
               .fast_tolerance = exact};
}

OpRow second_order(OpRow row) {
  row.second_order = true;
  return row;
}

namespace {

// ----- broadcast_in_dim -----------------------------------------------------------------
struct BroadcastCase {
  Shape in, out;
  Dims dims;
};

std::vector<OpCase> broadcast_cases() {
  std::vector<BroadcastCase> small{
      {{}, {}, {}},
      {{}, {5}, {}},
      {{}, {0}, {}},
      {{3}, {2, 3}, {1}},
      {{3}, {3, 4}, {0}},
      {{1}, {4}, {0}},
      {{2, 1, 3}, {2, 5, 3}, {0, 1, 2}},
      {{1, 3}, {4, 2, 3}, {1, 2}},
      {{3, 1}, {3, 2, 4, 1}, {0, 3}},
      {{0, 3}, {2, 0, 3}, {1, 2}},
      {{33, 17}, {33, 5, 17}, {0, 2}},
      {{2, 3}, {2, 3}, {0, 1}},
  };
  std::vector<BroadcastCase> large{
      {{1, 701}, {700, 701}, {0, 1}}, {{}, {300007}, {}}, {{700, 1}, {700, 450}, {0, 1}}};
  std::vector<OpCase> cases;
  Rng rng(11);
  auto add = [&](DType dtype, const BroadcastCase& b) {
    cases.push_back({label(dtype, {b.in, b.out}, dims_to_string(b.dims)),
                     {values_for(dtype, b.in, rng)},
                     BroadcastInDimParams{b.out, b.dims}});
  };
  for (DType dtype : every_dtype()) {
    for (const auto& b : small) add(dtype, b);
  }
  for (DType dtype : large_dtypes()) {
    for (const auto& b : large) add(dtype, b);
  }
  return cases;
}

std::vector<TestArray> broadcast_oracle(const OpCase& c) {
  const auto& p = std::get<BroadcastInDimParams>(c.params);
  const TestArray& x = c.inputs[0];
  std::vector<int64_t> source(static_cast<size_t>(x.aval.shape.rank()));
  return build(p.shape, x.aval.dtype, [&](const std::vector<int64_t>& index) {
    for (size_t k = 0; k < source.size(); ++k) {
      bool broadcast = x.aval.shape[static_cast<int64_t>(k)] == 1;
      source[k] = broadcast ? 0 : index[static_cast<size_t>(p.broadcast_dimensions[k])];
    }
    return at(x, source);
  });
}

// ----- reshape --------------------------------------------------------------------------
std::vector<OpCase> reshape_cases() {
  std::vector<std::pair<Shape, Shape>> small{{{}, {1, 1}},     {{1}, {}},
                                             {{6}, {2, 3}},    {{2, 3, 4}, {4, 6}},
                                             {{0, 3}, {3, 0}}, {{33, 17}, {561}}};
  std::vector<OpCase> cases;
  Rng rng(12);
  for (DType dtype : every_dtype()) {
    for (const auto& [in, out] : small) {
      cases.push_back(
          {label(dtype, {in, out}, ""), {values_for(dtype, in, rng)}, ReshapeParams{out}});
    }
  }
  for (DType dtype : large_dtypes()) {
    cases.push_back({label(dtype, {Shape{700, 900}, Shape{900, 700}}, ""),
                     {values_for(dtype, Shape{700, 900}, rng)},
                     ReshapeParams{Shape{900, 700}}});
  }
  return cases;
}

std::vector<OpCase> stop_gradient_cases() {
  std::vector<OpCase> cases;
  Rng rng(13);
  for (DType dtype : every_dtype()) {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{7}, Shape{33, 17}}) {
      cases.push_back({label(dtype, {shape}, ""), {values_for(dtype, shape, rng)}, NoParams{}});
    }
  }
  return cases;
}

std::vector<TestArray> identity_oracle(const OpCase& c) {
  return {c.inputs[0]};
}

std::vector<TestArray> reshape_oracle(const OpCase& c) {
  TestArray out = c.inputs[0];
  out.aval.shape = std::get<ReshapeParams>(c.params).new_sizes;
  return {out};
}

// ----- transpose ------------------------------------------------------------------------
std::vector<OpCase> transpose_cases() {
  std::vector<std::pair<Shape, Dims>> small{
      {{}, {}},
      {{5}, {0}},
      {{3, 4}, {1, 0}},
      {{3, 4}, {0, 1}},
      {{33, 17}, {1, 0}},
      {{65, 31}, {1, 0}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {1, 0, 2}},
      {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {2, 1, 0}},
      {{0, 3}, {1, 0}},
      {{1, 5, 1}, {2, 1, 0}},
      {{2, 3, 4, 5}, {3, 1, 2, 0}},
      {{2, 3, 4, 5}, {1, 3, 0, 2}},
      {{3, 1, 4, 2, 5}, {4, 2, 0, 3, 1}},
      {{7, 70, 3}, {2, 1, 0}},
      {{40, 3, 70}, {2, 1, 0}},
      // The vector path of 4-byte elements: exact bands, tails of both axes, batches.
      {{16, 8}, {1, 0}},
      {{17, 9}, {1, 0}},
      {{3, 35, 21}, {0, 2, 1}},
      {{21, 4, 35}, {2, 1, 0}},
  };
  std::vector<std::pair<Shape, Dims>> large{{{700, 900}, {1, 0}},
                                            {{32, 64, 130}, {2, 0, 1}},
                                            {{3, 5000, 3}, {2, 1, 0}},
                                            {{40, 2100}, {1, 0}}};
  std::vector<OpCase> cases;
  Rng rng(13);
  for (DType dtype : every_dtype()) {
    for (const auto& [shape, perm] : small) {
      cases.push_back({label(dtype, {shape}, dims_to_string(perm)),
                       {values_for(dtype, shape, rng)},
                       TransposeParams{perm}});
    }
  }
  for (DType dtype : large_dtypes()) {
    for (const auto& [shape, perm] : large) {
      cases.push_back({label(dtype, {shape}, dims_to_string(perm)),
                       {values_for(dtype, shape, rng)},
                       TransposeParams{perm}});
    }
  }
  return cases;
}

std::vector<TestArray> transpose_oracle(const OpCase& c) {
  const Dims& perm = std::get<TransposeParams>(c.params).permutation;
  const TestArray& x = c.inputs[0];
  Shape out;
  for (int64_t axis : perm) out.dims().push_back(x.aval.shape[axis]);
  std::vector<int64_t> source(perm.size());
  return build(out, x.aval.dtype, [&](const std::vector<int64_t>& index) {
    for (size_t k = 0; k < perm.size(); ++k) source[static_cast<size_t>(perm[k])] = index[k];
    return at(x, source);
  });
}
// ----- concatenate ----------------------------------------------------------------------
std::vector<OpCase> concatenate_cases() {
  std::vector<std::pair<std::vector<Shape>, int64_t>> small{
      {{{3}, {4}}, 0},
      {{{3}}, 0},
      {{{0}, {2}, {0}}, 0},
      {{{2, 3}, {2, 1}, {2, 0}, {2, 4}}, 1},
      {{{1, 3}, {4, 3}}, 0},
      {{{2, 3, 4}, {2, 5, 4}}, 1},
      {{{2, 3, 1}, {2, 3, 2}}, 2},
      {{{33, 17}, {33, 5}, {33, 1}}, 1},
      {{{0, 4}, {0, 2}}, 1},
  };
  std::vector<std::pair<std::vector<Shape>, int64_t>> large{{{{300, 701}, {400, 701}}, 0},
                                                            {{{700, 300}, {700, 451}}, 1}};
  std::vector<OpCase> cases;
  Rng rng(17);
  auto add = [&](DType dtype, const std::vector<Shape>& shapes, int64_t dimension) {
    OpCase c{
        label(dtype, shapes, fmt::format("dim {}", dimension)), {}, ConcatenateParams{dimension}};
    for (const Shape& shape : shapes) c.inputs.push_back(values_for(dtype, shape, rng));
    cases.push_back(std::move(c));
  };
  for (DType dtype : every_dtype()) {
    for (const auto& [shapes, dimension] : small) add(dtype, shapes, dimension);
  }
  for (DType dtype : large_dtypes()) {
    for (const auto& [shapes, dimension] : large) add(dtype, shapes, dimension);
  }
  return cases;
}

std::vector<TestArray> concatenate_oracle(const OpCase& c) {
  int64_t dimension = std::get<ConcatenateParams>(c.params).dimension;
  Shape out = c.inputs[0].aval.shape;
  out[dimension] = 0;
  for (const TestArray& input : c.inputs) out[dimension] += input.aval.shape[dimension];
  std::vector<int64_t> source;
  return build(out, c.inputs[0].aval.dtype, [&](const std::vector<int64_t>& index) {
    source = index;
    auto d = static_cast<size_t>(dimension);
    for (const TestArray& input : c.inputs) {
      if (source[d] < input.aval.shape[dimension]) return at(input, source);
      source[d] -= input.aval.shape[dimension];
    }
    return std::nan("");  // unreachable for a valid index
  });
}
// ----- iota -----------------------------------------------------------------------------
std::vector<OpCase> iota_cases() {
  std::vector<std::pair<Shape, int64_t>> small{{{5}, 0},       {{0}, 0},     {{1}, 0},
                                               {{3, 4}, 1},    {{3, 4}, 0},  {{2, 0, 3}, 2},
                                               {{2, 3, 4}, 1}, {{33, 17}, 0}};
  std::vector<OpCase> cases;
  for (DType dtype : every_dtype()) {
    if (dtype == DType::bool_) continue;
    for (const auto& [shape, dimension] : small) {
      cases.push_back({label(dtype, {shape}, fmt::format("dim {}", dimension)),
                       {},
                       IotaParams{dtype, shape, dimension}});
    }
    // Long enough to wrap u8 and to round f16 (above 2048) and bf16 (above 256).
    cases.push_back({label(dtype, {Shape{3001}}, "long"), {}, IotaParams{dtype, Shape{3001}, 0}});
  }
  for (DType dtype : large_dtypes()) {
    cases.push_back(
        {label(dtype, {Shape{300007}}, "large"), {}, IotaParams{dtype, Shape{300007}, 0}});
  }
  return cases;
}

std::vector<TestArray> iota_oracle(const OpCase& c) {
  const auto& p = std::get<IotaParams>(c.params);
  return build(p.shape, p.dtype, [&](const std::vector<int64_t>& index) {
    auto count = static_cast<double>(index[static_cast<size_t>(p.dimension)]);
    return p.dtype == DType::u8 ? std::fmod(count, 256) : count;  // compare() rounds floats
  });
}
}  // namespace
}  // namespace shape_rows_util

std::vector<OpRow> shape_rows() {
  namespace u = shape_rows_util;
  std::vector<OpRow> rows{
      u::second_order(u::copy_row(prim::broadcast_in_dim, u::broadcast_cases, u::broadcast_oracle)),
      u::copy_row(prim::reshape, u::reshape_cases, u::reshape_oracle),
      u::second_order(u::copy_row(prim::transpose, u::transpose_cases, u::transpose_oracle)),
      u::second_order(u::copy_row(prim::concatenate, u::concatenate_cases, u::concatenate_oracle)),
      u::copy_row(prim::iota, u::iota_cases, u::iota_oracle),
      u::copy_row(prim::stop_gradient, u::stop_gradient_cases, u::identity_oracle),
  };
  for (OpRow& row : shape_slice_rows()) rows.push_back(std::move(row));
  return rows;
}

}  // namespace kiln::testing
