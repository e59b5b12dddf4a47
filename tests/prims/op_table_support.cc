// Building, running and comparing op_table cases (see op_table.h).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "base/check.h"
#include "core/element_convert.h"
#include "kiln/ops.h"
#include "prims/bind.h"
#include "prims/op_table.h"

namespace kiln::testing {

Tolerance ulp_tolerance(DType dtype, double ulps, double atol) {
  // In the subnormal range an ulp is the smallest subnormal, not epsilon * |x|.
  double epsilon = 0, smallest = 0;
  switch (dtype) {
    case DType::f64:
      epsilon = 0x1p-52, smallest = 0x1p-1074;
      break;
    case DType::f32:
      epsilon = 0x1p-23, smallest = 0x1p-149;
      break;
    case DType::f16:
      epsilon = 0x1p-10, smallest = 0x1p-24;
      break;
    case DType::bf16:
      epsilon = 0x1p-7, smallest = 0x1p-133;
      break;
    default:
      return {0, 0};
  }
  return {ulps * epsilon, atol + ulps * smallest};
}

void PrintTo(const OpRow& row, std::ostream* out) {
  *out << prim_name(row.prim);
}

std::string row_name(const ::testing::TestParamInfo<OpRow>& info) {
  return std::string(prim_name(info.param.prim));
}

Shape broadcast_of(const std::vector<TestArray>& inputs) {
  Shape out;
  for (const TestArray& input : inputs) {
    if (input.aval.shape.rank() > out.rank()) out = input.aval.shape;
  }
  for (const TestArray& input : inputs) {
    if (input.aval.shape.rank() == 0) continue;
    for (int64_t axis = 0; axis < out.rank(); ++axis) {
      if (input.aval.shape[axis] != 1) out[axis] = input.aval.shape[axis];
    }
  }
  return out;
}

int64_t source_index(const Shape& out, const Shape& in, int64_t index) {
  if (in.rank() == 0) return 0;  // a scalar operand
  int64_t source = 0, stride = 1;
  for (int64_t axis = out.rank() - 1; axis >= 0; --axis) {
    int64_t coordinate = index % out[axis];
    index /= out[axis];
    if (in[axis] != 1) source += coordinate * stride;
    stride *= in[axis];
  }
  return source;
}

namespace {

// Every column runs on the same cases, so each row's are generated once per test binary:
// making them (the large arrays that reach the fast kernels' chunking, the random inputs)
// took longer than most columns' checks, and the op table made them once per column.
CaseGenerator generated_once(CaseGenerator generate) {
  struct Memo {
    std::once_flag once;
    std::vector<OpCase> cases;
  };
  auto memo = std::make_shared<Memo>();
  return [memo, generate = std::move(generate)] {
    std::call_once(memo->once, [&] { memo->cases = generate(); });
    return memo->cases;
  };
}

}  // namespace

std::vector<OpRow> all_rows() {
  static const std::vector<OpRow> rows = [] {
    std::vector<OpRow> all;
    for (auto family :
         {elementwise_rows, shape_rows, index_rows, reduce_rows, contract_rows, window_rows,
          random_rows, sort_rows, custom_rows, remat_rows, control_flow_rows}) {
      for (OpRow& row : family()) {
        row.cases = generated_once(std::move(row.cases));
        if (row.grad_cases) row.grad_cases = generated_once(std::move(row.grad_cases));
        all.push_back(std::move(row));
      }
    }
    return all;
  }();
  return rows;
}

namespace {

// Rounds a double to what `dtype` stores, returned as double.
double round_to(DType dtype, double value) {
  return visit_dtype(dtype, [&](auto tag) -> double {
    using S = storage_t<decltype(tag)::value>;
    S stored = convert_element<S>(value);
    return static_cast<double>(widen(stored));
  });
}

}  // namespace

TestArray make_array(DType dtype, Shape shape, std::vector<double> values) {
  KILN_CHECK(static_cast<int64_t>(values.size()) == shape.num_elements(),
             "make_array: {} values for shape {}", values.size(), shape.to_string());
  for (double& value : values) value = round_to(dtype, value);
  return TestArray{AbstractValue{std::move(shape), dtype}, std::move(values)};
}

double uniform(Rng& rng, double low, double high) {
  return std::uniform_real_distribution<double>(low, high)(rng);
}

TestArray random_array(DType dtype, Shape shape, Rng& rng, const std::function<double(Rng&)>& gen) {
  std::vector<double> values(static_cast<size_t>(shape.num_elements()));
  for (double& value : values) value = gen(rng);
  return make_array(dtype, std::move(shape), std::move(values));
}

std::vector<double> special_values(DType dtype) {
  double inf = std::numeric_limits<double>::infinity();
  double subnormal = 0, largest = 0;
  switch (dtype) {
    case DType::f64:
      subnormal = std::numeric_limits<double>::denorm_min();
      largest = std::numeric_limits<double>::max();
      break;
    case DType::f32:
      subnormal = std::numeric_limits<float>::denorm_min();
      largest = std::numeric_limits<float>::max();
      break;
    case DType::f16:
      subnormal = 0x1p-24;
      largest = 65504;
      break;
    case DType::bf16:
      subnormal = 0x1p-133;
      largest = bf16::from_bits(0x7f7f).to_float();
      break;
    default:
      return {};
  }
  return {std::nan(""), inf, -inf, 0.0, -0.0, subnormal, -subnormal, largest, -largest};
}

void insert_specials(TestArray& array) {
  std::vector<double> specials = special_values(array.aval.dtype);
  for (size_t i = 0; i < specials.size() && i < array.values.size(); ++i) {
    // Spread them out so broadcasting pairs them with different partners.
    size_t at = (i * 7919) % array.values.size();
    array.values[at] = specials[i];
  }
}

bool wants_large_cases(DType dtype) {
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::i32;
}

std::vector<Shape> standard_shapes(DType dtype) {
  std::vector<Shape> shapes{Shape{},     Shape{0},       Shape{1},       Shape{7},
                            Shape{3, 5}, Shape{2, 3, 4}, Shape{2, 0, 3}, Shape{33, 17}};
  if (wants_large_cases(dtype)) shapes.push_back(Shape{300007});
  return shapes;
}

std::vector<std::pair<Shape, Shape>> broadcast_shape_pairs(DType dtype) {
  std::vector<std::pair<Shape, Shape>> pairs{
      {Shape{3, 1}, Shape{1, 4}},
      {Shape{1}, Shape{5}},
      {Shape{2, 3, 4}, Shape{1, 3, 1}},
      {Shape{1, 1}, Shape{2, 3}},
      {Shape{4, 0}, Shape{1, 0}},
      {Shape{1, 37}, Shape{19, 37}},
      // Rank-0 operands broadcast to any rank (literals in programs need no reshape).
      {Shape{}, Shape{3, 4}},
      {Shape{2, 0}, Shape{}}};
  if (wants_large_cases(dtype)) {
    pairs.push_back({Shape{1000, 301}, Shape{}});
    pairs.push_back({Shape{1000, 301}, Shape{1000, 1}});
    pairs.push_back({Shape{1, 301}, Shape{1000, 301}});
  }
  return pairs;
}

double wrap_to(DType dtype, __int128 value) {
  switch (dtype) {
    case DType::u8:
      return static_cast<double>(static_cast<uint8_t>(value));
    case DType::u32:
      return static_cast<double>(static_cast<uint32_t>(value));
    case DType::i32:
      return static_cast<double>(static_cast<int32_t>(value));
    case DType::i64:
      return static_cast<double>(static_cast<int64_t>(value));
    case DType::bool_:
      return value != 0 ? 1.0 : 0.0;
    default:
      return static_cast<double>(value);
  }
}

std::vector<std::byte> encode(const TestArray& array) {
  std::vector<std::byte> bytes(static_cast<size_t>(array.aval.size_bytes()));
  visit_dtype(array.aval.dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    S* out = reinterpret_cast<S*>(bytes.data());
    for (size_t i = 0; i < array.values.size(); ++i) out[i] = convert_element<S>(array.values[i]);
  });
  return bytes;
}

TestArray decode(const AbstractValue& aval, const void* data) {
  TestArray array{aval, std::vector<double>(static_cast<size_t>(aval.num_elements()))};
  visit_dtype(aval.dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    const S* in = static_cast<const S*>(data);
    for (size_t i = 0; i < array.values.size(); ++i) {
      array.values[i] = static_cast<double>(widen(in[i]));
    }
  });
  return array;
}

std::vector<AbstractValue> out_avals_of(const OpRow& row, const OpCase& c) {
  std::vector<AbstractValue> in_avals;
  for (const TestArray& input : c.inputs) in_avals.push_back(input.aval);
  return abstract_eval(row.prim, in_avals, c.params, CallSite());
}

namespace {

// 64-byte aligned storage, like the runtime's allocator gives kernels.
struct AlignedBytes {
  explicit AlignedBytes(size_t size)
      : data(static_cast<std::byte*>(std::aligned_alloc(64, (size + 64) / 64 * 64))) {}
  ~AlignedBytes() { std::free(data); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes(AlignedBytes&& other) noexcept : data(other.data) { other.data = nullptr; }
  std::byte* data;
};

}  // namespace

Array to_array(const TestArray& input) {
  std::vector<std::byte> bytes = encode(input);
  return from_host_bytes(bytes.data(), input.aval, nullptr, CallSite());
}

std::vector<TestArray> run_kernel(KernelFn kernel, const OpCase& c,
                                  const std::vector<AbstractValue>& out_avals, ComputePool& pool) {
  std::vector<AlignedBytes> in_storage;
  std::vector<KernelInput> inputs;
  for (const TestArray& input : c.inputs) {
    std::vector<std::byte> bytes = encode(input);
    in_storage.emplace_back(bytes.size());
    if (!bytes.empty()) std::memcpy(in_storage.back().data, bytes.data(), bytes.size());
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back({in_storage[i].data, &c.inputs[i].aval});
  }
  std::vector<AlignedBytes> out_storage;
  std::vector<KernelOutput> outputs;
  for (const AbstractValue& aval : out_avals) {
    out_storage.emplace_back(static_cast<size_t>(aval.size_bytes()));
    // Poison the output so a kernel that skips elements is caught.
    std::memset(out_storage.back().data, 0x7f, static_cast<size_t>(aval.size_bytes()));
  }
  for (size_t i = 0; i < out_avals.size(); ++i)
    outputs.push_back({out_storage[i].data, &out_avals[i]});
  kernel(KernelCall{inputs, outputs, c.params, pool});
  std::vector<TestArray> results;
  for (size_t i = 0; i < out_avals.size(); ++i)
    results.push_back(decode(out_avals[i], outputs[i].data));
  return results;
}

std::vector<TestArray> run_eager(const OpRow& row, const OpCase& c) {
  std::vector<Array> inputs;
  for (const TestArray& input : c.inputs) {
    std::vector<std::byte> bytes = encode(input);
    inputs.push_back(from_host_bytes(bytes.data(), input.aval, nullptr, CallSite()));
  }
  std::vector<Array> outputs = bind(row.prim, inputs, c.params, CallSite());
  std::vector<TestArray> results;
  for (const Array& output : outputs) {
    HostArray host = output.to_host();
    results.push_back(decode(host.aval, host.bytes.data()));
  }
  return results;
}

std::string compare(const TestArray& actual, const TestArray& expected, Tolerance tolerance) {
  if (!(actual.aval == expected.aval)) {
    return fmt::format("type {} but expected {}", actual.aval.to_string(),
                       expected.aval.to_string());
  }
  bool floating = is_floating(expected.aval.dtype);
  std::string report;
  int mismatches = 0;
  for (size_t i = 0; i < expected.values.size(); ++i) {
    double a = actual.values[i];
    double e = floating ? round_to(expected.aval.dtype, expected.values[i]) : expected.values[i];
    bool ok;
    if (std::isnan(e) || std::isnan(a)) {
      ok = std::isnan(e) && std::isnan(a);
    } else if (std::isinf(e) || std::isinf(a) || !floating) {
      ok = a == e;
    } else {
      ok = std::fabs(a - e) <= tolerance.atol + tolerance.rtol * std::fabs(e);
    }
    if (!ok && ++mismatches <= 5) {
      report += fmt::format("\n  [{}] got {} expected {}", i, a, e);
    }
  }
  if (mismatches > 5) report += fmt::format("\n  ... {} mismatches in all", mismatches);
  return report;
}

TestArray to_test_array(const Array& array) {
  HostArray host = array.to_host();
  return decode(host.aval, host.bytes.data());
}

TestArray rotated_example(const TestArray& input, int64_t b) {
  TestArray out = input;
  if (!out.values.empty()) {
    auto shift = static_cast<ptrdiff_t>(b % static_cast<int64_t>(out.values.size()));
    std::rotate(out.values.begin(), out.values.begin() + shift, out.values.end());
  }
  return out;
}

bool small_enough(const OpCase& c) {
  int64_t elements = 0;
  for (const TestArray& input : c.inputs) elements += input.aval.num_elements();
  return elements <= 2048;
}

bool same_bits(const TestArray& a, const TestArray& b) {
  return a.aval == b.aval && a.values.size() == b.values.size() &&
         (a.values.empty() ||
          std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(double)) == 0);
}

}  // namespace kiln::testing
