// pallas::call's compiled mode (CallOptions::interpret = false; docs/kernels.md). The body
// is traced into a program of kiln operations on its blocks, with the grid point's
// coordinates as constants, and that program is compiled by jit's compiler (fused loops
// over Highway vectors, the GEMM kernel for block products). A C++ body may branch on
// program_id(), so one trace does not serve every point: the trace records what the body
// asked of its point (each program_id, and the valid extent of each block it loaded), and
// serves every later point whose answers are the same. These are the kernel's *variants*;
// equal programs compile once. The grid's parallel points are then spread over the compute
// pool, each worker running its points' in-order axes in order on block buffers of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/compute_pool.h"
#include "kiln/array.h"
#include "pallas/kernel_call.h"
#include "pallas/kernel_run.h"

namespace kiln::pallas {

// The trace of the body at one grid point: the traced program's inputs are every buffer's
// block (inputs, outputs, scratch, in that order: the slots), its outputs the blocks the
// body stored.
class KernelTrace {
 public:
  struct Query {
    enum class Kind : uint8_t { kProgramId, kValidExtent };
    Kind kind = Kind::kProgramId;
    size_t which = 0;  // the grid axis, or the slot
    Index answer;
    bool operator==(const Query&) const = default;
  };

  explicit KernelTrace(std::span<const Array> blocks);

  Array load(const RefState& state, const Index& block, double fill);
  // `value` has the block's shape (Ref::store checked it).
  void store(const RefState& state, const Array& value, const std::string& name);
  void ask_program_id(size_t axis, int64_t answer);
  void ask_valid_extent(const RefState& state, const Index& extent);

  const std::vector<Query>& queries() const { return queries_; }
  // The slots the body read (their blocks must be in place before the program runs) and
  // the ones it stored, in the order the program returns them.
  const std::vector<bool>& loaded() const { return loaded_; }
  const std::vector<size_t>& stored() const { return stored_; }
  std::vector<Array> results() const;

 private:
  std::vector<Array> blocks_;   // the program's inputs
  std::vector<Array> current_;  // per slot: what the block holds now (empty: untouched)
  std::vector<bool> loaded_;
  std::vector<size_t> stored_;
  std::vector<Query> queries_;
};

namespace detail {

// The compiled variants of a registered kernel, made by its first compiled run and reused
// by every later one (a jitted step traces its kernels once).
struct CompiledPlan;
struct PlanSlot {
  std::mutex mutex;
  std::shared_ptr<const CompiledPlan> plan;
};

}  // namespace detail

namespace detail {

// The kernel's variants: its slot's, or traced and compiled now (a kernel called eagerly,
// never registered, traces them for each call).
std::shared_ptr<const CompiledPlan> compiled_plan(const RegisteredKernel& kernel, CallSite site);

// Runs `kernel` compiled: reads its inputs' memory, writes its outputs' (zeroed first, as
// outputs start), the parallel points spread over `pool`.
void run_compiled_into(const RegisteredKernel& kernel, std::span<const std::byte* const> inputs,
                       std::span<std::byte* const> outputs, ComputePool& pool, CallSite site);

// The same on arrays: the results in new buffers on the inputs' device.
std::vector<Array> run_compiled(const RegisteredKernel& kernel, std::span<const Array> inputs,
                                CallSite site);

}  // namespace detail

}  // namespace kiln::pallas
