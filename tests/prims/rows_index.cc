// op_table rows for the indexing family: gather, scatter, scatter_add. Cases cover
// batch_dims 0 and 1 (and 2), axis 0/1/2, rank-0 and empty indices, empty operands, index
// dtypes i32/i64/u8/u32, modes clip and fill with out-of-range and negative indices, mode
// error with valid ones (the failing case is in tests/ops/indexing_test.cc), and repeated
// indices for the scatters. The oracles map each output (or update) multi-index to the
// operand's directly, independently of the kernels' flattened [batch, pre, n, post] view.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "prims/ids/index.h"
#include "prims/rows_reduce_index_util.h"

namespace kiln::testing {
namespace {

struct IndexGeometry {
  Shape operand;
  Shape indices;
  int64_t axis;
  int64_t batch_dims;
};

std::vector<IndexGeometry> geometries(bool large) {
  std::vector<IndexGeometry> list{
      {Shape{5}, Shape{3}, 0, 0},          {Shape{5}, Shape{}, 0, 0},
      {Shape{4, 3}, Shape{2, 2}, 0, 0},    {Shape{4, 3}, Shape{5}, 1, 0},
      {Shape{2, 3, 4}, Shape{6}, 2, 0},    {Shape{2, 3, 4}, Shape{2, 5}, 1, 1},
      {Shape{2, 3, 4}, Shape{2, 3}, 2, 1}, {Shape{3, 4}, Shape{3}, 1, 1},
      {Shape{2, 3, 4}, Shape{2, 3}, 2, 2}, {Shape{2, 3, 4}, Shape{2, 2, 2}, 1, 0},
      {Shape{0, 3}, Shape{2}, 1, 0},       {Shape{3, 0}, Shape{2}, 0, 0},
      {Shape{4}, Shape{0}, 0, 0},          {Shape{1, 1}, Shape{3}, 1, 0},
      {Shape{3, 4}, Shape{10}, 0, 0},      {Shape{2, 3, 4}, Shape{2, 9}, 1, 1},
      {Shape{2, 0}, Shape{3}, 1, 0},       {Shape{0}, Shape{0}, 0, 0},
  };
  if (large) {
    list.push_back({Shape{1000, 64}, Shape{5000}, 0, 0});
    list.push_back({Shape{64, 1000}, Shape{64, 300}, 1, 1});
  }
  return list;
}

Shape gather_shape(const IndexGeometry& g) {
  Shape out;
  for (int64_t d = 0; d < g.axis; ++d) out.dims().push_back(g.operand[d]);
  for (int64_t d = g.batch_dims; d < g.indices.rank(); ++d) out.dims().push_back(g.indices[d]);
  for (int64_t d = g.axis + 1; d < g.operand.rank(); ++d) out.dims().push_back(g.operand[d]);
  return out;
}

// Index values: in range for mode error; a few beyond either end for clip and fill
// (unsigned index dtypes cannot be negative; u8 cannot exceed 255).
TestArray make_indices(Rng& rng, DType index_dtype, const Shape& shape, int64_t size,
                       IndexMode mode) {
  double low = 0, high = static_cast<double>(size);
  if (mode != IndexMode::kError) {
    high += 3;
    if (!is_unsigned(index_dtype)) low -= 3;
  }
  if (index_dtype == DType::u8) high = std::min(high, 256.0);
  return random_array(index_dtype, shape, rng,
                      [&](Rng& r) { return std::floor(uniform(r, low, high)); });
}

TestArray make_values(Rng& rng, DType dtype, const Shape& shape) {
  TestArray array = random_array(dtype, shape, rng, [&](Rng& r) { return random_value(r, dtype); });
  if (array.values.size() >= 9) insert_specials(array);
  return array;
}

std::vector<DType> all_test_dtypes() {
  // Listed rather than appended: GCC 12 at -O1 (the sanitizer builds) warns falsely about
  // the reallocation of a push_back here.
  return {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32,
          DType::i64, DType::u8,  DType::u32, DType::bool_};
}

enum class Which { kGather, kScatter, kScatterAdd };

std::vector<OpCase> index_cases(Which which) {
  std::vector<DType> dtypes =
      which == Which::kScatterAdd ? numeric_test_dtypes() : all_test_dtypes();
  constexpr DType kIndexDTypes[] = {DType::i32, DType::i64, DType::u8, DType::u32};
  constexpr IndexMode kModes[] = {IndexMode::kError, IndexMode::kClip, IndexMode::kFill};
  std::vector<OpCase> cases;
  Rng rng(static_cast<uint64_t>(which) + 5);
  size_t counter = 0;
  for (DType dtype : dtypes) {
    for (const IndexGeometry& g : geometries(wants_large_cases(dtype))) {
      int64_t size = g.operand[g.axis];
      for (IndexMode mode : kModes) {
        // An empty axis has nothing to clip to, and any index is out of range for it.
        if (size == 0 && g.indices.num_elements() > 0 && mode != IndexMode::kFill) continue;
        DType index_dtype = kIndexDTypes[counter++ % std::size(kIndexDTypes)];
        OpCase c{fmt::format("{}{} {}{} axis {} batch_dims {} mode {}", dtype_name(dtype),
                             g.operand.to_string(), dtype_name(index_dtype), g.indices.to_string(),
                             g.axis, g.batch_dims, index_mode_name(mode)),
                 {make_values(rng, dtype, g.operand),
                  make_indices(rng, index_dtype, g.indices, size, mode)},
                 Params{}};
        if (which == Which::kGather) {
          c.params = GatherParams{g.axis, g.batch_dims, mode};
        } else {
          c.inputs.push_back(make_values(rng, dtype, gather_shape(g)));
          c.params = ScatterParams{g.axis, g.batch_dims, mode};
        }
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

int64_t resolve(double value, int64_t size, IndexMode mode) {
  auto index = static_cast<int64_t>(value);
  if (index >= 0 && index < size) return index;
  if (mode == IndexMode::kClip) return std::clamp<int64_t>(index, 0, size - 1);
  return -1;  // mode fill (mode error cases only hold valid indices)
}

// For element `i` of gather's output (= scatter's updates): the operand element it maps
// to, or -1 when its index is dropped.
int64_t operand_element(const Shape& out_shape, int64_t i, const TestArray& operand,
                        const TestArray& indices, int64_t axis, int64_t batch_dims,
                        IndexMode mode) {
  Dims out = unravel(out_shape, i);
  int64_t index_rank = indices.aval.shape.rank() - batch_dims;
  Dims index_coords;
  for (int64_t d = 0; d < batch_dims; ++d) index_coords.push_back(out[static_cast<size_t>(d)]);
  for (int64_t d = 0; d < index_rank; ++d) {
    index_coords.push_back(out[static_cast<size_t>(axis + d)]);
  }
  double value = indices.values[static_cast<size_t>(ravel(indices.aval.shape, index_coords))];
  int64_t position = resolve(value, operand.aval.shape[axis], mode);
  if (position < 0) return -1;
  Dims coords;
  for (int64_t d = 0; d < axis; ++d) coords.push_back(out[static_cast<size_t>(d)]);
  coords.push_back(position);
  for (int64_t d = axis + index_rank; d < out_shape.rank(); ++d) {
    coords.push_back(out[static_cast<size_t>(d)]);
  }
  return ravel(operand.aval.shape, coords);
}

std::vector<TestArray> gather_oracle(const OpCase& c) {
  const auto& p = std::get<GatherParams>(c.params);
  const TestArray& operand = c.inputs[0];
  IndexGeometry g{operand.aval.shape, c.inputs[1].aval.shape, p.axis, p.batch_dims};
  TestArray out{AbstractValue(gather_shape(g), operand.aval.dtype), {}};
  for (int64_t i = 0; i < out.aval.num_elements(); ++i) {
    int64_t source =
        operand_element(out.aval.shape, i, operand, c.inputs[1], p.axis, p.batch_dims, p.mode);
    out.values.push_back(source < 0 ? 0.0 : operand.values[static_cast<size_t>(source)]);
  }
  return {out};
}

Oracle scatter_oracle(bool add) {
  return [add](const OpCase& c) {
    const auto& p = std::get<ScatterParams>(c.params);
    const TestArray& operand = c.inputs[0];
    const TestArray& updates = c.inputs[2];
    DType dtype = operand.aval.dtype;
    std::vector<long double> float_acc(operand.values.begin(), operand.values.end());
    bool floating = is_floating(dtype);
    std::vector<__int128> int_acc;
    for (double v : operand.values) int_acc.push_back(floating ? 0 : static_cast<__int128>(v));
    std::vector<double> set = operand.values;
    // Row-major order over the updates: for one target, later indices come later.
    for (int64_t i = 0; i < updates.aval.num_elements(); ++i) {
      int64_t target = operand_element(updates.aval.shape, i, operand, c.inputs[1], p.axis,
                                       p.batch_dims, p.mode);
      if (target < 0) continue;
      auto t = static_cast<size_t>(target);
      double u = updates.values[static_cast<size_t>(i)];
      set[t] = u;
      float_acc[t] += u;
      if (!floating) int_acc[t] += static_cast<__int128>(u);
    }
    TestArray out{operand.aval, set};
    if (add) {
      for (size_t t = 0; t < out.values.size(); ++t) {
        out.values[t] = floating ? static_cast<double>(float_acc[t]) : wrap_to(dtype, int_acc[t]);
      }
    }
    return std::vector<TestArray>{out};
  };
}

// scatter_add sums in double and rounds once: bound by the number of updates and their
// magnitudes (plus the operand's).
Tolerance scatter_add_tolerance(const OpCase& c, DType dtype) {
  double abs_sum = 0, max_operand = 0;
  for (double v : c.inputs[2].values) {
    if (std::isfinite(v)) abs_sum += std::fabs(v);
  }
  for (double v : c.inputs[0].values) {
    if (std::isfinite(v)) max_operand = std::max(max_operand, std::fabs(v));
  }
  return double_sum_tolerance(dtype, static_cast<double>(c.inputs[2].values.size() + 1),
                              abs_sum + max_operand);
}

}  // namespace

std::vector<OpRow> index_rows() {
  auto exact = [](const OpCase&, DType) { return Tolerance{0, 0}; };
  OpRow gather_row{.prim = prim::gather,
                   .cases = [] { return index_cases(Which::kGather); },
                   .oracle = gather_oracle,
                   .ref_tolerance = exact,
                   .fast_tolerance = exact};
  gather_row.second_order = true;
  return {
      gather_row,
      OpRow{.prim = prim::scatter,
            .cases = [] { return index_cases(Which::kScatter); },
            .oracle = scatter_oracle(false),
            .ref_tolerance = exact,
            .fast_tolerance = exact},
      OpRow{.prim = prim::scatter_add,
            .cases = [] { return index_cases(Which::kScatterAdd); },
            .oracle = scatter_oracle(true),
            .ref_tolerance = scatter_add_tolerance,
            // The fast kernel makes the reference's additions in the reference's order.
            .fast_tolerance = exact},
  };
}

}  // namespace kiln::testing
