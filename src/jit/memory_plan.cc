// The memory planner (see memory_plan.h).
#include "jit/memory_plan.h"
#include "base/check.h"

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

// Inputs and constants live where the caller's arrays are.
void place_arguments(const Program& program, MemoryPlan& plan) {
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
}

// The state of buffer assignment as it walks the steps: the arena, the donated inputs
// already taken, and the arena blocks already given back or taken over.
class BufferAssigner {
 public:
  BufferAssigner(const Program& program, const Liveness& live, const std::vector<bool>& donated,
                 MemoryPlan& plan)
      : program_(program),
        live_(live),
        donated_(donated),
        plan_(plan),
        donor_taken_(program.inputs.size(), false),
        released_(program.num_vars(), false) {}

  void assign_step(const StepPlan& step, int64_t s) {
    const bool elementwise = elementwise_step(program_, step);
    std::vector<VarId> dying = dying_operands(step, s);
    for (size_t e : step.equations) {
      const Equation& equation = program_.equations[e];
      if (prim_def(equation.prim).has_flag(kAliasesOperand)) continue;
      for (VarId out : equation.outputs) {
        auto v = static_cast<size_t>(out);
        // A fused value nobody else reads lives only in the loop's tiles; a kernel's result
        // needs memory even when nothing reads it (it is freed at once).
        if (step.fused() && !live_.read_outside_step[v] && !live_.escapes[v]) continue;
        place_value(out, s, elementwise, dying);
      }
    }
    for (size_t e : step.equations) {
      for (VarId in : program_.equations[e].inputs) release_if_dead(in, s);
      for (VarId out : program_.equations[e].outputs) release_if_dead(out, s);
    }
  }

  int64_t arena_bytes() const { return arena_.peak(); }

 private:
  size_t root(VarId var) const { return static_cast<size_t>(plan_.root[static_cast<size_t>(var)]); }

  // The arena roots that step s reads for the last time, each once.
  std::vector<VarId> dying_operands(const StepPlan& step, int64_t s) const {
    std::vector<VarId> dying;
    for (size_t e : step.equations) {
      for (VarId in : program_.equations[e].inputs) {
        const size_t r = root(in);
        if (plan_.storage[r].kind != Storage::Kind::kArena || live_.last_use[r] != s) continue;
        if (std::find(dying.begin(), dying.end(), static_cast<VarId>(r)) == dying.end())
          dying.push_back(static_cast<VarId>(r));
      }
    }
    return dying;
  }

  void place_value(VarId out, int64_t s, bool elementwise, std::vector<VarId>& dying) {
    auto v = static_cast<size_t>(out);
    const AbstractValue& aval = program_.aval(out);
    const int64_t bytes = aval.size_bytes();
    if (live_.escapes[v]) {
      ResultBuffer buffer{bytes, find_donor(aval, s, elementwise)};
      if (buffer.donor >= 0) ++plan_.report.donated_outputs;
      plan_.storage[v] = {Storage::Kind::kResult, static_cast<int64_t>(plan_.results.size())};
      plan_.results.push_back(buffer);
      return;
    }
    plan_.report.temp_bytes_unplanned += aligned(bytes);
    ++plan_.report.num_buffers;
    if (elementwise && take_over_dying_operand(out, dying)) return;
    plan_.storage[v] = {Storage::Kind::kArena, arena_.allocate(bytes)};
  }

  // An elementwise step reads element i of an operand of its own shape only to write
  // element i of its results, so a result may take over such an operand's block when the
  // operand dies here: in place, with no new memory.
  bool take_over_dying_operand(VarId out, std::vector<VarId>& dying) {
    const AbstractValue& aval = program_.aval(out);
    auto reusable = std::find_if(dying.begin(), dying.end(), [&](VarId d) {
      const AbstractValue& operand = program_.aval(d);
      return operand.size_bytes() == aval.size_bytes() &&
             operand.num_elements() == aval.num_elements();
    });
    if (reusable == dying.end()) return false;
    plan_.storage[static_cast<size_t>(out)] = plan_.storage[static_cast<size_t>(*reusable)];
    released_[static_cast<size_t>(*reusable)] = true;  // its block now belongs to `out`
    dying.erase(reusable);
    ++plan_.report.in_place;
    return true;
  }

  // Donation: an input's buffer may become a result buffer of the same size defined at or
  // after the input's last read (at it only for elementwise steps, which read each
  // element before writing it).
  int64_t find_donor(const AbstractValue& result, int64_t s, bool elementwise) {
    for (size_t i = 0; i < program_.inputs.size(); ++i) {
      if (i >= donated_.size() || !donated_[i] || donor_taken_[i]) continue;
      auto input_root = static_cast<size_t>(program_.inputs[i]);
      if (live_.escapes[input_root]) continue;  // returned as it is: cannot be overwritten
      const AbstractValue& input = program_.aval(program_.inputs[i]);
      if (input.size_bytes() != result.size_bytes()) continue;
      // Read and written at the same step: only element by element, at the same positions.
      bool same_positions = input.num_elements() == result.num_elements();
      int64_t last = live_.last_use[input_root];
      if (last < s || (last == s && elementwise && same_positions)) {
        donor_taken_[i] = true;
        return static_cast<int64_t>(i);
      }
    }
    return -1;
  }

  // Operands read for the last time at step s, and results nothing reads, free their blocks.
  void release_if_dead(VarId var, int64_t s) {
    const size_t r = root(var);
    if (plan_.storage[r].kind != Storage::Kind::kArena || released_[r]) return;
    const int64_t last = live_.last_use[r];
    if (last != s && !(last == Liveness::kNever && live_.defined_at[r] == s)) return;
    released_[r] = true;
    arena_.release(plan_.storage[r].index, program_.aval(static_cast<VarId>(r)).size_bytes());
  }

  const Program& program_;
  const Liveness& live_;
  const std::vector<bool>& donated_;
  MemoryPlan& plan_;
  ArenaAllocator arena_;
  std::vector<bool> donor_taken_;  // per input
  std::vector<bool> released_;     // per root
};

void add_totals(MemoryPlan& plan) {
  plan.report.temp_bytes = plan.arena_bytes;
  for (const ResultBuffer& buffer : plan.results) {
    if (buffer.donor < 0) plan.report.output_bytes += buffer.bytes;
  }
  plan.report.peak_bytes = plan.report.argument_bytes + plan.report.constant_bytes +
                           plan.report.output_bytes + plan.report.temp_bytes;
}

}  // namespace

std::vector<VarId> storage_roots(const Program& program, const std::vector<StepPlan>& steps) {
  std::vector<VarId> root(program.num_vars());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<VarId>(v);
  // In step order, so that an alias of an alias finds its operand's root already set.
  for (const StepPlan& step : steps) {
    for (size_t e : step.equations) {
      const Equation& equation = program.equations[e];
      if (!prim_def(equation.prim).has_flag(kAliasesOperand)) continue;
      // Result i is operand i's bytes (variadic identities have several).
      for (size_t i = 0; i < equation.outputs.size(); ++i) {
        root[static_cast<size_t>(equation.outputs[i])] =
            root[static_cast<size_t>(equation.inputs[i])];
      }
    }
  }
  return root;
}

Liveness compute_liveness(const Program& program, const std::vector<StepPlan>& steps,
                          const std::vector<VarId>& root) {
  const size_t num_vars = program.num_vars();
  Liveness live;
  live.defined_at.assign(num_vars, Liveness::kNever);
  live.last_use.assign(num_vars, Liveness::kNever);
  live.read_outside_step.assign(num_vars, false);
  live.escapes.assign(num_vars, false);
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto step = static_cast<int64_t>(s);
    for (size_t e : steps[s].equations) {
      const Equation& equation = program.equations[e];
      for (VarId out : equation.outputs) live.defined_at[static_cast<size_t>(out)] = step;
      for (VarId in : equation.inputs) {
        auto r = static_cast<size_t>(root[static_cast<size_t>(in)]);
        live.last_use[r] = std::max(live.last_use[r], step);
        if (live.defined_at[static_cast<size_t>(in)] != step)
          live.read_outside_step[static_cast<size_t>(in)] = true;
      }
    }
  }
  // Results escape: their roots live in result buffers (unless an input or constant).
  for (VarId out : program.outputs) {
    live.escapes[static_cast<size_t>(root[static_cast<size_t>(out)])] = true;
    live.read_outside_step[static_cast<size_t>(out)] = true;
  }
  return live;
}

void assign_buffers(const Program& program, const std::vector<StepPlan>& steps,
                    const Liveness& live, const std::vector<bool>& donated, MemoryPlan& plan) {
  BufferAssigner assigner(program, live, donated, plan);
  for (size_t s = 0; s < steps.size(); ++s) assigner.assign_step(steps[s], static_cast<int64_t>(s));
  plan.arena_bytes = assigner.arena_bytes();
}

MemoryPlan plan_memory(const Program& program, const std::vector<StepPlan>& steps,
                       const std::vector<bool>& donated) {
  MemoryPlan plan;
  plan.root = storage_roots(program, steps);
  plan.storage.resize(program.num_vars());
  place_arguments(program, plan);
  assign_buffers(program, steps, compute_liveness(program, steps, plan.root), donated, plan);
  add_totals(plan);
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
