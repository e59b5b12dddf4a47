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

// `donated[i]`: whether input i's buffer may be reused.
MemoryPlan plan_memory(const Program& program, const std::vector<StepPlan>& steps,
                       const std::vector<bool>& donated);

}  // namespace kiln::detail
