// op_table rows for the rematerialization primitives, optimization_barrier (variadic) and
// checkpoint_name: identities, so the oracle returns the operands and every comparison is
// exact (NaN, infinities and -0 included). The gradient column checks that their VJPs
// pass cotangents through; the batching column that each batch axis stays where it was.
#include "prims/ids/custom.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

TestArray values(DType dtype, Shape shape, Rng& rng) {
  TestArray array = random_array(dtype, std::move(shape), rng, [dtype](Rng& r) {
    return is_floating(dtype) ? uniform(r, -4, 4) : std::floor(uniform(r, 0, 200));
  });
  insert_specials(array);
  return array;
}

// Operand lists: one to three operands of mixed dtypes and shapes (rank 0, empty, odd).
std::vector<std::vector<std::pair<DType, Shape>>> operand_lists() {
  return {
      {{DType::f32, Shape{}}},
      {{DType::f32, Shape{0}}},
      {{DType::f32, Shape{7}}, {DType::i32, Shape{3, 2}}},
      {{DType::f32, Shape{5, 3}}, {DType::f32, Shape{}}, {DType::u8, Shape{4}}},
      {{DType::f64, Shape{9}}, {DType::f16, Shape{2, 3}}, {DType::bf16, Shape{1}}},
      {{DType::i64, Shape{6}}, {DType::u32, Shape{2}}, {DType::bool_, Shape{3}}},
  };
}

std::vector<OpCase> barrier_cases() {
  std::vector<OpCase> cases;
  Rng rng(71);
  for (const auto& list : operand_lists()) {
    OpCase c{"", {}, NoParams{}};
    for (const auto& [dtype, shape] : list) {
      c.label += (c.label.empty() ? "" : ", ") + AbstractValue(shape, dtype).to_string();
      c.inputs.push_back(values(dtype, shape, rng));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<OpCase> name_cases() {
  std::vector<OpCase> cases;
  Rng rng(72);
  for (const auto& list : operand_lists()) {
    for (const auto& [dtype, shape] : list) {
      cases.push_back({AbstractValue(shape, dtype).to_string(),
                       {values(dtype, shape, rng)},
                       CheckpointNameParams{"layer_1/out"}});
    }
  }
  return cases;
}

std::vector<TestArray> identity_oracle(const OpCase& c) {
  return c.inputs;
}

}  // namespace

std::vector<OpRow> remat_rows() {
  OpRow barrier{.prim = prim::optimization_barrier,
                .cases = barrier_cases,
                .oracle = identity_oracle,
                .ref_tolerance = exact,
                .fast_tolerance = exact};
  barrier.second_order = true;
  OpRow name{.prim = prim::checkpoint_name,
             .cases = name_cases,
             .oracle = identity_oracle,
             .ref_tolerance = exact,
             .fast_tolerance = exact};
  name.second_order = true;
  return {barrier, name};
}

}  // namespace kiln::testing
