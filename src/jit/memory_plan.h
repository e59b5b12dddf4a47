// Memory planning for an executable: where every value lives while it runs.
//
// Values that alias their operand (reshape, stop_gradient) share its storage. Inputs and
// constants live where the caller's arrays are. Values that escape as results get their
// own buffer per call (or a donated input's). Every other value gets an offset in one
// arena, reused as soon as the value is dead: a first-fit allocator over the steps in
// order, which frees the operands that die at an elementwise step *before* placing its
// results, so such a step writes in place over a dead operand (the arena is the sole
// owner of that memory, so nobody else can see it change).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/program.h"
#include "jit/step_plan.h"
#include "kiln/jit.h"

namespace kiln::detail {

struct Storage {
  enum class Kind : uint8_t { kNone, kInput, kConstant, kArena, kResult };
  Kind kind = Kind::kNone;  // kNone: lives only inside a fused step's tiles
  int64_t index = 0;        // input / constant / result-buffer index; arena byte offset
};

struct ResultBuffer {
  int64_t bytes = 0;
  int64_t donor = -1;  // the donated input whose buffer it may take, or -1
};

struct MemoryPlan {
  std::vector<VarId> root;       // per variable: the variable whose storage it shares
  std::vector<Storage> storage;  // per root variable
  std::vector<ResultBuffer> results;
  int64_t arena_bytes = 0;
  MemoryPlanReport report;
};

// `donated[i]`: whether input i's buffer may be reused. Runs the steps below in order.
MemoryPlan plan_memory(const Program& program, const std::vector<StepPlan>& steps,
                       const std::vector<bool>& donated);

// The steps of plan_memory, each a function of the earlier ones' results (declared here so
// that tests can check each on its own).

// Per variable: the variable whose storage it shares (itself, unless it aliases an operand).
std::vector<VarId> storage_roots(const Program& program, const std::vector<StepPlan>& steps);

// When each value is live, counted in steps of the schedule.
struct Liveness {
  static constexpr int64_t kNever = -1;
  std::vector<int64_t> defined_at;  // per variable: the step that defines it, or kNever
  std::vector<int64_t> last_use;    // per root: the last step that reads it, or kNever
  // Per variable: read by a step other than the one that defines it, or returned; a fused
  // value that is neither lives only in its loop's tiles.
  std::vector<bool> read_outside_step;
  std::vector<bool> escapes;  // per root: returned by the program
};
Liveness compute_liveness(const Program& program, const std::vector<StepPlan>& steps,
                          const std::vector<VarId>& root);

// Gives every value the steps define its storage, walking the steps in order: results a
// buffer of their own (or a donated input's), every other value in memory an arena block,
// in place over an operand that dies at an elementwise step. `plan` already holds the
// roots and the inputs' and constants' storage; sets its arena size and counts.
void assign_buffers(const Program& program, const std::vector<StepPlan>& steps,
                    const Liveness& live, const std::vector<bool>& donated, MemoryPlan& plan);

}  // namespace kiln::detail
