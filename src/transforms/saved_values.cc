// Replaying a program with saved results (see saved_values.h).
#include "transforms/saved_values.h"

#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "base/check.h"
#include "ir/printer.h"
#include "kiln/transforms.h"
#include "prims/bind.h"
#include "transforms/trace.h"

namespace kiln::detail {
namespace {

// Per result of equation `index`: whether the program reads it (a later equation or an
// output of the program).
std::vector<bool> results_read(const Program& program, size_t index) {
  const Equation& equation = program.equations[index];
  std::vector<bool> read(equation.outputs.size(), false);
  auto mark = [&](VarId var) {
    for (size_t k = 0; k < equation.outputs.size(); ++k) {
      read[k] = read[k] || equation.outputs[k] == var;
    }
  };
  for (size_t i = index + 1; i < program.equations.size(); ++i) {
    for (VarId var : program.equations[i].inputs) mark(var);
  }
  for (VarId var : program.outputs) mark(var);
  return read;
}

// A custom function standing for equation `index` of `program` in a replay: its operands
// are the equation's operands followed by the saved results, which it returns; its backward
// is the equation's VJP rule at those operands and results, so the gradient is the one the
// equation would have given. The saved results themselves get no cotangent. A result the
// program never reads (a custom function's residuals) has none either: the custom-function
// machinery would pass zeros, and a rule given a cotangent for it does work for nothing.
int64_t register_saved_value(std::shared_ptr<const Program> program, size_t index) {
  const Equation& equation = program->equations[index];
  size_t num_operands = equation.inputs.size();
  std::vector<bool> read = results_read(*program, index);
  auto forward = [num_operands](std::span<const Array> in) {
    return CustomResult{
        std::vector<Array>(in.begin() + static_cast<std::ptrdiff_t>(num_operands), in.end()),
        std::vector<Array>(in.begin(), in.end())};
  };
  auto backward = [program, index, num_operands, read](std::span<const Array> residuals,
                                                       std::span<const Array> cts) {
    const Equation& eq = program->equations[index];
    const PrimDef& prim = prim_def(eq.prim);
    KILN_CHECK(prim.vjp != nullptr, "a saved {} has no VJP rule", prim.name);
    std::unique_ptr<bool[]> wanted(new bool[num_operands]);
    for (size_t i = 0; i < num_operands; ++i) wanted[i] = is_floating(residuals[i].dtype());
    std::vector<Array> used_cts(cts.begin(), cts.end());
    for (size_t k = 0; k < used_cts.size() && k < read.size(); ++k) {
      if (!read[k]) used_cts[k] = Array();
    }
    std::vector<Array> in_cts =
        prim.vjp(VjpArgs{residuals.first(num_operands), residuals.subspan(num_operands), used_cts,
                         eq.params, eq.site, std::span<const bool>(wanted.get(), num_operands)});
    in_cts.resize(residuals.size());
    return in_cts;
  };
  return register_custom_function(fmt::format("saved {}", prim_def(equation.prim).name), forward,
                                  backward, ForwardMode::kThroughForward);
}

// Ids by program text (with scopes) and mask, process-wide. Only looked up, never iterated.
struct SavedValueRegistry {
  std::mutex mutex;
  std::map<std::string, std::vector<int64_t>> ids;
};

SavedValueRegistry& saved_value_registry() {
  static SavedValueRegistry* instance = new SavedValueRegistry;  // ids outlive everything
  return *instance;
}

}  // namespace

std::vector<int64_t> saved_value_functions(std::shared_ptr<const Program> program,
                                           const std::vector<bool>& saved) {
  KILN_CHECK(saved.size() == program->equations.size(),
             "saved_value_functions: {} flags for {} equations", saved.size(),
             program->equations.size());
  std::string key;
  for (bool s : saved) key += s ? '1' : '0';
  key += "\n" + print_program(*program, PrintOptions{.show_scopes = true});
  SavedValueRegistry& known = saved_value_registry();
  std::lock_guard lock(known.mutex);
  auto found = known.ids.find(key);
  if (found != known.ids.end()) return found->second;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < saved.size(); ++i) {
    ids.push_back(saved[i] ? register_saved_value(program, i) : -1);
  }
  known.ids.emplace(std::move(key), ids);
  return ids;
}

std::vector<Array> saved_results(const Program& program, std::span<const int64_t> saved_ids,
                                 std::span<const Array> env) {
  std::vector<Array> results;
  for (size_t i = 0; i < program.equations.size(); ++i) {
    if (saved_ids[i] < 0) continue;
    for (VarId var : program.equations[i].outputs) results.push_back(env[static_cast<size_t>(var)]);
  }
  return results;
}

std::vector<Array> replay_with_saved(const Program& program, std::span<const int64_t> saved_ids,
                                     std::span<const Array> operands,
                                     std::span<const Array> saved) {
  std::vector<Array> env(program.num_vars());
  for (size_t i = 0; i < operands.size(); ++i) {
    env[static_cast<size_t>(program.inputs[i])] = operands[i];
  }
  for (size_t i = 0; i < program.constants.size(); ++i) {
    env[static_cast<size_t>(program.constants[i])] = program.constant_values[i];
  }
  size_t next_saved = 0;
  std::vector<Array> args;
  for (size_t i = 0; i < program.equations.size(); ++i) {
    const Equation& equation = program.equations[i];
    args.clear();
    for (VarId var : equation.inputs) args.push_back(env[static_cast<size_t>(var)]);
    ScopeOverride scope(equation.scope);
    std::vector<Array> results;
    if (saved_ids[i] >= 0) {
      args.insert(
          args.end(), saved.begin() + static_cast<std::ptrdiff_t>(next_saved),
          saved.begin() + static_cast<std::ptrdiff_t>(next_saved + equation.outputs.size()));
      next_saved += equation.outputs.size();
      results = call_custom_function(saved_ids[i], args, equation.site);
    } else {
      results = bind(equation.prim, args, equation.params, equation.site);
    }
    for (size_t k = 0; k < results.size(); ++k) {
      env[static_cast<size_t>(equation.outputs[k])] = std::move(results[k]);
    }
  }
  KILN_CHECK(next_saved == saved.size(), "replay used {} of {} saved values", next_saved,
             saved.size());
  std::vector<Array> outputs;
  for (VarId var : program.outputs) outputs.push_back(env[static_cast<size_t>(var)]);
  return outputs;
}

}  // namespace kiln::detail
