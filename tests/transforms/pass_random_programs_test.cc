// The passes on many small random programs (f32, f16 and i32; constants that are 0,
// -0, 1, NaN...; chains of elementwise, layout and select equations with repeats): each
// pass alone and the passes in two pipeline orders, twice over, must verify and give the
// original program's bits (or its error) on random inputs full of special values.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/program.h"
#include "kiln/ops.h"
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/select.h"
#include "prims/ids/shape.h"
#include "prims/ids/unary.h"
#include "transforms/pass_test_support.h"
#include "transforms/passes/passes.h"

namespace kiln {
namespace {

using testing::same_results;

constexpr int64_t kSize = 16;

class RandomProgram {
 public:
  RandomProgram(DType dtype, std::mt19937& rng) : dtype_(dtype), rng_(rng) {}

  Program build(int num_equations) {
    for (int i = 0; i < 2; ++i) values_.push_back(builder_.add_input(vector_type()));
    for (int i = 0; i < num_equations; ++i) add_random_equation();
    // The last values and a few others, so that most rewrites reach an output.
    std::vector<VarId> outputs{pick(), pick()};
    for (size_t i = values_.size() > 4 ? values_.size() - 4 : 0; i < values_.size(); ++i)
      outputs.push_back(values_[i]);
    builder_.set_outputs(outputs);
    return builder_.take();
  }

 private:
  AbstractValue vector_type() const { return AbstractValue(Shape{kSize}, dtype_); }
  bool floating() const { return is_floating(dtype_); }
  int below(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  VarId pick() { return values_[static_cast<size_t>(below(static_cast<int>(values_.size())))]; }

  // A rank-0 constant (weak or not) or a splat vector, holding a value the rewrites care
  // about; sometimes the same array twice, sometimes an equal copy.
  VarId constant() {
    if (!constants_.empty() && below(4) == 0) {
      return builder_.add_constant(
          constants_[static_cast<size_t>(below(static_cast<int>(constants_.size())))]);
    }
    // Mostly the values the rewrites look for.
    double floats[] = {0.0,
                       -0.0,
                       1.0,
                       0.0,
                       -0.0,
                       1.0,
                       2.0,
                       -1.0,
                       std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::infinity()};
    double ints[] = {0, 1, 0, 1, -1, 2, 3, 0, 1, 7};
    double value = floating() ? floats[below(10)] : ints[below(10)];
    bool weak = below(2) == 0;
    Array array =
        below(3) == 0 ? full({kSize}, value, dtype_) : astype(scalar(value, DType::f64), dtype_);
    if (weak && array.rank() == 0) {
      HostArray host = array.to_host();
      array = from_host_bytes(host.bytes.data(), AbstractValue(Shape{}, dtype_, true), nullptr,
                              CallSite());
    }
    constants_.push_back(array);
    return builder_.add_constant(array);
  }

  VarId operand() { return below(2) == 0 ? constant() : pick(); }

  VarId add(PrimId prim, std::vector<VarId> inputs, Params params = NoParams{}) {
    return builder_.add_equation(prim, std::move(inputs), std::move(params))[0];
  }

  // A [kSize] value of the program's dtype, made from earlier values and constants.
  void add_random_equation() {
    VarId x = pick();
    VarId result = -1;
    switch (below(12)) {
      case 0:
        result = add(prim::neg, {x});
        break;
      case 1:
      case 2:
      case 10:
      case 11: {
        PrimId binary[] = {prim::add, prim::sub, prim::mul, prim::div};
        PrimId prim = binary[below(floating() ? 4 : 3)];  // integer div may divide by zero
        result = below(2) == 0 ? add(prim, {x, operand()}) : add(prim, {operand(), x});
        break;
      }
      case 3: {
        VarId matrix = add(prim::reshape, {x}, ReshapeParams{Shape{4, kSize / 4}});
        if (below(2) == 0) matrix = add(prim::transpose, {matrix}, TransposeParams{{1, 0}});
        if (below(2) == 0) matrix = add(prim::transpose, {matrix}, TransposeParams{{1, 0}});
        result = add(prim::reshape, {matrix}, ReshapeParams{Shape{kSize}});
        break;
      }
      case 4: {
        VarId predicate = add(prim::gt, {x, operand()});
        result = add(prim::select, {predicate, x, below(2) == 0 ? x : pick()});
        break;
      }
      case 5:
        result = add(prim::convert_element_type, {x}, ConvertParams{dtype_});
        break;
      case 6: {
        VarId value = constant();
        if (builder_.aval(value).shape.rank() == 0) {
          result = add(prim::broadcast_in_dim, {value}, BroadcastInDimParams{Shape{kSize}, Dims{}});
        }
        break;
      }
      case 7:
        result = add(prim::iota, {}, IotaParams{dtype_, Shape{kSize}, 0});
        break;
      default: {
        // A repeat of an earlier equation, for CSE.
        const Program& so_far = builder_.program();
        if (so_far.equations.empty()) break;
        const Equation& earlier =
            so_far.equations[static_cast<size_t>(below(static_cast<int>(so_far.equations.size())))];
        if (earlier.outputs.size() != 1) break;
        Equation copy = earlier;
        result = add(copy.prim, copy.inputs, copy.params);
        break;
      }
    }
    if (result >= 0 && builder_.aval(result).shape == Shape{kSize} &&
        builder_.aval(result).dtype == dtype_) {
      values_.push_back(result);
    }
  }

  DType dtype_;
  std::mt19937& rng_;
  ProgramBuilder builder_;
  std::vector<VarId> values_;
  std::vector<Array> constants_;
};

using Pass = std::function<Program(const Program&)>;

Program pipeline(const Program& program, const std::vector<Pass>& passes) {
  Program result = program;
  for (int round = 0; round < 2; ++round) {
    for (const Pass& pass : passes) result = pass(result);
  }
  return result;
}

TEST(PassRandomPrograms, EveryPassAndPipelineKeepsTheBits) {
  Pass simplify = simplify_algebra;
  Pass fold = [](const Program& p) { return fold_constants(p); };
  Pass cse = eliminate_common_subexpressions;
  Pass dce = eliminate_dead_code;
  std::mt19937 rng(20261130);
  // How many programs each pass made smaller (dead code elimination aside), to show that
  // the generator exercises them.
  int simplified = 0, folded = 0, merged = 0;
  for (int trial = 0; trial < 200; ++trial) {
    DType dtypes[] = {DType::f32, DType::f16, DType::i32};
    RandomProgram generator(dtypes[trial % 3], rng);
    Program program = generator.build(4 + trial % 12);
    std::string text = print_program(program);
    std::vector<std::pair<std::string, Program>> results;
    results.emplace_back("simplify_algebra", dce(simplify(program)));
    results.emplace_back("fold_constants", dce(fold(program)));
    results.emplace_back("cse", dce(cse(program)));
    results.emplace_back("dce", dce(program));
    results.emplace_back("simplify fold cse dce", pipeline(program, {simplify, fold, cse, dce}));
    results.emplace_back("fold cse simplify dce", pipeline(program, {fold, cse, simplify, dce}));
    results.emplace_back("clone_broadcasts", clone_broadcasts(program));
    results.emplace_back("jit's pipeline", pipeline(program, {fold, simplify, cse, merge_scans, dce,
                                                              clone_broadcasts}));
    for (const auto& [name, result] : results) {
      ASSERT_TRUE(same_results(program, result, 3)) << name << " on\n" << text;
    }
    size_t baseline = results[3].second.equations.size();
    simplified += results[0].second.equations.size() < baseline ? 1 : 0;
    folded += results[1].second.equations.size() < baseline ? 1 : 0;
    merged += results[2].second.equations.size() < baseline ? 1 : 0;
    ASSERT_EQ(print_program(program), text) << "a pass modified its input";
  }
  EXPECT_GT(simplified, 80);
  EXPECT_GT(folded, 80);
  EXPECT_GT(merged, 80);
}

}  // namespace
}  // namespace kiln
