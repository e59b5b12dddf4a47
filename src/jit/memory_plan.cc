// The memory planner (see memory_plan.h).
#include "jit/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

namespace kiln::detail {
namespace {

constexpr int64_t kAlignment = 64;

int64_t aligned(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// First-fit allocation in an arena that grows at its end. Free blocks are kept by offset
// (coalesced), so the same program always gets the same offsets.
class ArenaAllocator {
 public:
  int64_t allocate(int64_t bytes) {
    bytes = std::max<int64_t>(aligned(bytes), kAlignment);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      int64_t offset = it->first;
      int64_t rest = it->second - bytes;
      free_.erase(it);
      if (rest > 0) free_.emplace(offset + bytes, rest);
      return offset;
    }
    // Grow, taking over a free block that ends the arena.
    int64_t offset = end_;
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == end_) {
        offset = last->first;
        free_.erase(last);
      }
    }
    end_ = offset + bytes;
    peak_ = std::max(peak_, end_);
    return offset;
  }
  void release(int64_t offset, int64_t bytes) {
    bytes = std::max<int64_t>(aligned(bytes), kAlignment);
    auto [it, inserted] = free_.emplace(offset, bytes);
    KILN_CHECK(inserted, "arena block at {} released twice", offset);
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto previous = std::prev(it);
      if (previous->first + previous->second == it->first) {
        previous->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t peak() const { return peak_; }

 private:
  std::map<int64_t, int64_t> free_;  // offset -> size
  int64_t end_ = 0;
  int64_t peak_ = 0;
};

bool elementwise_step(const Program& program, const StepPlan& step) {
  if (step.fused()) return true;
  const PrimDef& prim = prim_def(program.equations[step.equations[0]].prim);
  return prim.has_flag(kElementwise) && !prim.has_flag(kAliasesOperand);
}

}  // namespace

MemoryPlan plan_memory(const Program& program, const std::vector<StepPlan>& steps,
                       const std::vector<bool>& donated) {
  const size_t num_vars = program.num_vars();
  MemoryPlan plan;
  plan.root.resize(num_vars);
  for (size_t v = 0; v < num_vars; ++v) plan.root[v] = static_cast<VarId>(v);
  plan.storage.resize(num_vars);
  auto root = [&](VarId var) { return plan.root[static_cast<size_t>(var)]; };

  for (size_t i = 0; i < program.inputs.size(); ++i) {
    plan.storage[static_cast<size_t>(program.inputs[i])] = {Storage::Kind::kInput,
                                                            static_cast<int64_t>(i)};
    plan.report.argument_bytes += program.aval(program.inputs[i]).size_bytes();
  }
  for (size_t i = 0; i < program.constants.size(); ++i) {
    plan.storage[static_cast<size_t>(program.constants[i])] = {Storage::Kind::kConstant,
                                                               static_cast<int64_t>(i)};
    plan.report.constant_bytes += program.aval(program.constants[i]).size_bytes();
  }

  // Which step defines each variable, and the last step that reads each root.
  constexpr int64_t kNever = -1;
  const auto num_steps = static_cast<int64_t>(steps.size());
  std::vector<int64_t> defined_at(num_vars, kNever);
  std::vector<int64_t> last_use(num_vars, kNever);
  std::vector<bool> read_outside_step(num_vars, false);  // materialised, not tile-only
  std::vector<int64_t> step_of_equation(program.equations.size(), kNever);
  for (int64_t s = 0; s < num_steps; ++s) {
    for (size_t e : steps[static_cast<size_t>(s)].equations) step_of_equation[e] = s;
  }
  for (int64_t s = 0; s < num_steps; ++s) {
    for (size_t e : steps[static_cast<size_t>(s)].equations) {
      const Equation& equation = program.equations[e];
      if (prim_def(equation.prim).has_flag(kAliasesOperand)) {
        // Result i is operand i's bytes (variadic identities have several).
        for (size_t i = 0; i < equation.outputs.size(); ++i) {
          plan.root[static_cast<size_t>(equation.outputs[i])] = root(equation.inputs[i]);
        }
      }
      for (VarId out : equation.outputs) defined_at[static_cast<size_t>(out)] = s;
      for (VarId in : equation.inputs) {
        auto r = static_cast<size_t>(root(in));
        last_use[r] = std::max(last_use[r], s);
        if (defined_at[static_cast<size_t>(in)] != s)
          read_outside_step[static_cast<size_t>(in)] = true;
      }
    }
  }
  // Results escape: their roots live in result buffers (unless an input or constant).
  std::vector<bool> escapes(num_vars, false);
  for (VarId out : program.outputs) {
    escapes[static_cast<size_t>(root(out))] = true;
    read_outside_step[static_cast<size_t>(out)] = true;
  }

  // Donation: an input's buffer may become a result buffer of the same size defined at or
  // after the input's last read (at it only for elementwise steps, which read each
  // element before writing it).
  std::vector<bool> donor_taken(program.inputs.size(), false);
  auto find_donor = [&](const AbstractValue& result, int64_t step, bool elementwise) -> int64_t {
    for (size_t i = 0; i < program.inputs.size(); ++i) {
      if (i >= donated.size() || !donated[i] || donor_taken[i]) continue;
      auto input_root = static_cast<size_t>(program.inputs[i]);
      if (escapes[input_root]) continue;  // returned as it is: cannot be overwritten
      const AbstractValue& input = program.aval(program.inputs[i]);
      if (input.size_bytes() != result.size_bytes()) continue;
      // Read and written at the same step: only element by element, at the same positions.
      bool same_positions = input.num_elements() == result.num_elements();
      int64_t last = last_use[input_root];
      if (last < step || (last == step && elementwise && same_positions)) {
        donor_taken[i] = true;
        return static_cast<int64_t>(i);
      }
    }
    return -1;
  };

  ArenaAllocator arena;
  auto is_dying_arena_root = [&](VarId var, int64_t s) {
    auto r = static_cast<size_t>(root(var));
    return plan.storage[r].kind == Storage::Kind::kArena && last_use[r] == s;
  };
  for (int64_t s = 0; s < num_steps; ++s) {
    const StepPlan& step = steps[static_cast<size_t>(s)];
    const bool elementwise = elementwise_step(program, step);
    // An elementwise step reads element i of an operand of its own shape only to write
    // element i of its results, so a result may take over such an operand's block when
    // the operand dies here: in place, with no new memory.
    std::vector<VarId> dying;
    for (size_t e : step.equations) {
      for (VarId in : program.equations[e].inputs) {
        VarId r = root(in);
        if (is_dying_arena_root(in, s) && std::find(dying.begin(), dying.end(), r) == dying.end()) {
          dying.push_back(r);
        }
      }
    }
    for (size_t e : step.equations) {
      const Equation& equation = program.equations[e];
      if (prim_def(equation.prim).has_flag(kAliasesOperand)) continue;
      for (VarId out : equation.outputs) {
        auto v = static_cast<size_t>(out);
        // A fused value nobody else reads lives only in the loop's tiles; a kernel's result
        // needs memory even when nothing reads it (it is freed at once).
        if (step.fused() && !read_outside_step[v] && !escapes[v]) continue;
        const AbstractValue& aval = program.aval(out);
        int64_t bytes = aval.size_bytes();
        if (escapes[v]) {
          ResultBuffer buffer{bytes, find_donor(aval, s, elementwise)};
          if (buffer.donor >= 0) ++plan.report.donated_outputs;
          plan.storage[v] = {Storage::Kind::kResult, static_cast<int64_t>(plan.results.size())};
          plan.results.push_back(buffer);
          continue;
        }
        plan.report.temp_bytes_unplanned += aligned(bytes);
        ++plan.report.num_buffers;
        auto reusable = std::find_if(dying.begin(), dying.end(), [&](VarId d) {
          const AbstractValue& operand = program.aval(d);
          return elementwise && operand.size_bytes() == bytes &&
                 operand.num_elements() == aval.num_elements();
        });
        if (reusable != dying.end()) {
          plan.storage[v] = plan.storage[static_cast<size_t>(*reusable)];
          last_use[static_cast<size_t>(*reusable)] = num_steps;  // its block is taken over
          dying.erase(reusable);
          ++plan.report.in_place;
          continue;
        }
        plan.storage[v] = {Storage::Kind::kArena, arena.allocate(bytes)};
      }
    }
    // Operands read for the last time here, and results nothing reads, free their blocks.
    auto release_if_dead = [&](VarId var) {
      auto r = static_cast<size_t>(root(var));
      if (plan.storage[r].kind != Storage::Kind::kArena) return;
      bool dead = last_use[r] == s || (last_use[r] == kNever && defined_at[r] == s);
      if (!dead) return;
      last_use[r] = num_steps;  // released once
      arena.release(plan.storage[r].index, program.aval(static_cast<VarId>(r)).size_bytes());
    };
    for (size_t e : step.equations) {
      for (VarId in : program.equations[e].inputs) release_if_dead(in);
      for (VarId out : program.equations[e].outputs) release_if_dead(out);
    }
  }
  plan.arena_bytes = arena.peak();
  plan.report.temp_bytes = plan.arena_bytes;
  for (const ResultBuffer& buffer : plan.results) {
    if (buffer.donor < 0) plan.report.output_bytes += buffer.bytes;
  }
  plan.report.peak_bytes = plan.report.argument_bytes + plan.report.constant_bytes +
                           plan.report.output_bytes + plan.report.temp_bytes;
  return plan;
}

}  // namespace kiln::detail

namespace kiln {

std::string MemoryPlanReport::to_string() const {
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  return fmt::format(
      "peak {:.2f} MiB = arguments {:.2f} + constants {:.2f} + outputs {:.2f} + temporaries "
      "{:.2f} MiB ({} buffers; {:.2f} MiB without reuse; {} in place; {} outputs into donated "
      "arguments)",
      mib(peak_bytes), mib(argument_bytes), mib(constant_bytes), mib(output_bytes), mib(temp_bytes),
      num_buffers, mib(temp_bytes_unplanned), in_place, donated_outputs);
}

}  // namespace kiln
