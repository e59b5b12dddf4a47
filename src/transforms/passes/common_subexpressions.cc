// Common subexpression elimination (passes.h). One forward sweep in program order: an
// equation whose primitive, params and (already merged) operands equal those of an earlier
// equation is dropped and its results stand for the earlier one's, so merging one equation
// lets its users merge in turn. Constants holding the same array, or equal small values,
// merge first. Hash maps are only looked up, never iterated, so the result is deterministic.
#include <functional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/device.h"
#include "prims/ids/custom.h"
#include "prims/params_walk.h"
#include "transforms/passes/passes.h"
#include "transforms/passes/program_rewrite.h"

namespace kiln {
namespace {

// Constants up to this many elements are also merged by value (two `x * 2.0` in one
// function make two literal arrays holding 2.0); larger ones only when they are the same
// array, so that compiling never reads large arrays back.
constexpr int64_t kMaxValueComparedElements = 16;

bool may_merge(PrimId prim) {
  // Every primitive is a pure function of its operands and params (random bits too: they
  // are a function of the key and counter). An optimization barrier is never merged: it
  // is there so that a recomputation stays a recomputation (kiln/checkpoint.h).
  return prim != prim::optimization_barrier;
}

uint64_t mix(uint64_t seed, uint64_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

uint64_t equation_key(const Equation& equation) {
  uint64_t key = mix(static_cast<uint64_t>(equation.prim), hash_params(equation.params));
  for (VarId var : equation.inputs) key = mix(key, static_cast<uint64_t>(var));
  return key;
}

bool same_computation(const Equation& a, const Equation& b) {
  return a.prim == b.prim && a.inputs == b.inputs && a.params == b.params;
}

// A small concrete constant's type, device and bytes, for merging equal values.
struct ConstantContents {
  AbstractValue aval;
  const Device* device = nullptr;
  std::vector<std::byte> bytes;
  friend bool operator==(const ConstantContents&, const ConstantContents&) = default;
};

bool small_contents(const Array& value, ConstantContents& contents) {
  if (!is_concrete(value) || value.size() > kMaxValueComparedElements) return false;
  try {
    contents.device = &value.device();
    contents.bytes = value.to_host().bytes;
  } catch (const Error&) {
    return false;  // the value failed to compute; it is not merged with anything
  }
  contents.aval = value.aval();
  return true;
}

class ConstantMerger {
 public:
  explicit ConstantMerger(ProgramRewrite& rewrite) : rewrite_(rewrite) {}

  void add(size_t index) {
    const Program& source = rewrite_.source();
    VarId var = source.constants[index];
    const Array& value =
        index < source.constant_values.size() ? source.constant_values[index] : Array();
    if (value.defined()) {
      if (auto found = by_array_.find(value.impl()); found != by_array_.end()) {
        rewrite_.map(var, found->second);
        return;
      }
    }
    ConstantContents contents;
    bool small = small_contents(value, contents);
    uint64_t key = 0;
    if (small) {
      key = std::hash<std::string_view>{}(std::string_view(
          reinterpret_cast<const char*>(contents.bytes.data()), contents.bytes.size()));
      auto [first, last] = by_contents_.equal_range(key);
      for (auto it = first; it != last; ++it) {
        if (it->second.contents == contents) {
          rewrite_.map(var, it->second.var);
          return;
        }
      }
    }
    VarId kept = rewrite_.keep_constant(index);
    if (value.defined()) by_array_.emplace(value.impl(), kept);
    if (small) by_contents_.emplace(key, Entry{std::move(contents), kept});
  }

 private:
  struct Entry {
    ConstantContents contents;
    VarId var;
  };
  ProgramRewrite& rewrite_;
  std::unordered_map<const ArrayImpl*, VarId> by_array_;
  std::unordered_multimap<uint64_t, Entry> by_contents_;
};

}  // namespace

Program eliminate_common_subexpressions(const Program& program) {
  ProgramRewrite rewrite(program);
  ConstantMerger constants(rewrite);
  for (size_t i = 0; i < program.constants.size(); ++i) constants.add(i);

  // Key -> indices of earlier kept equations with that key (equal keys are compared in full).
  std::unordered_map<uint64_t, std::vector<size_t>> seen;
  for (const Equation& equation : program.equations) {
    Equation mapped{equation.prim, {}, {}, equation.params, equation.site, equation.scope};
    for (VarId var : equation.inputs) mapped.inputs.push_back(rewrite[var]);
    if (may_merge(equation.prim)) {
      uint64_t key = equation_key(mapped);
      std::vector<size_t>& candidates = seen[key];
      const Equation* earlier = nullptr;
      for (size_t index : candidates) {
        if (same_computation(rewrite.draft().equations[index], mapped)) {
          earlier = &rewrite.draft().equations[index];
          break;
        }
      }
      if (earlier != nullptr) {
        for (size_t r = 0; r < equation.outputs.size(); ++r) {
          rewrite.map(equation.outputs[r], earlier->outputs[r]);
        }
        continue;
      }
      candidates.push_back(rewrite.copy_equation(equation));
      continue;
    }
    rewrite.copy_equation(equation);
  }
  return rewrite.finish();
}

}  // namespace kiln
