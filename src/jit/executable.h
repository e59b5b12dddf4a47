// An executable: an optimised program, its steps (kernels and fused loops) and its memory
// plan, run as one task on a device's queue. Running it costs one allocation for the
// arena and one per result, instead of one allocation and one queue hop per equation.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ir/program.h"
#include "jit/fused_kernel.h"
#include "jit/memory_plan.h"
#include "jit/step_plan.h"
#include "kiln/cost_types.h"
#include "kiln/jit.h"
#include "runtime/device_array.h"

namespace kiln::detail {

struct CompileOptions {
  bool fuse = true;
  bool flush_denormals = false;  // subnormal floats read and written as zero while it runs
  std::string name = "jit";      // for KILN_DUMP_IR file names
};

// The kernel an equation of `program` runs: the fast one where it supports the equation's
// types and params, else the reference (chosen_kernel, as for eager ops).
KernelFn equation_kernel(const Program& program, const Equation& equation);

// The sub-programs of a control-flow equation (scan's body; cond's branches; while's cond
// and body), or none for any other primitive.
std::vector<std::shared_ptr<const Program>> control_flow_sub_programs(const Equation& equation);

class Executable : public std::enable_shared_from_this<Executable> {
 public:
  // Optimises `program` (the passes in transforms/passes), plans steps and memory.
  // `donated[i]`: input i's buffer may be reused.
  static std::shared_ptr<const Executable> compile(const Program& program,
                                                   const std::vector<bool>& donated,
                                                   const CompileOptions& options);

  // Runs on `placement`'s device, which target_of() chose for these inputs (asynchronously,
  // like an eager op). Donated inputs whose buffer nobody else holds are consumed (their
  // arrays deleted).
  std::vector<Array> run(std::span<const Array> inputs, const TargetDevice& placement,
                         CallSite site, int64_t& donations_used, int64_t& donations_unusable) const;

  // Runs synchronously on this thread over caller-owned memory (one pointer per input and
  // output, in program order): how a control-flow step runs its sub-programs.
  // `arena`, when given, is the caller's memory of at least arena_bytes(), kept between
  // runs (never cleared): a caller running the executable many times saves an allocation
  // per run.
  void execute_into(std::span<const std::byte* const> inputs, std::span<std::byte* const> outputs,
                    ComputePool& pool, std::byte* arena = nullptr) const;
  // What execute_into's arena must hold (the plan's arena and room to align it).
  size_t arena_bytes() const { return static_cast<size_t>(plan_.arena_bytes) + 64; }

  const Program& program() const { return *program_; }
  std::shared_ptr<const Program> program_ptr() const { return program_; }
  const std::vector<StepPlan>& steps() const { return steps_; }
  const MemoryPlan& memory_plan() const { return plan_; }
  bool interpreted() const { return interpreted_; }
  double compile_seconds() const { return compile_seconds_; }
  // Names this executable's events in a trace (unique in the process, in compile order).
  int64_t trace_id() const { return trace_id_; }
  const std::string& name() const { return name_; }
  // Per step: step_trace_name, or "" for a step that does no work (an alias).
  const std::vector<std::string>& step_names() const { return step_names_; }
  // What step s costs by the cost rules, as it runs: a fused step's bytes are what its loop
  // reads from and writes to memory (its externals and exports), not its tiles' traffic.
  Cost step_cost(size_t s) const;
  // The steps; a fused group that runs as one vector program is marked "(vector program)".
  std::string steps_text() const;

 private:
  struct RunState;
  // Where a run's values live: raw pointers, so that the asynchronous run (buffers) and
  // execute_into (caller memory) share one loop over the steps.
  struct Frame {
    std::vector<const std::byte*> inputs;
    std::vector<const std::byte*> constants;
    std::byte* arena = nullptr;
    std::vector<std::byte*> results;
    ComputePool* pool = nullptr;
    std::byte* data_of(const Executable& executable, VarId var) const;
  };
  void execute(RunState& state) const;
  void execute_frame(const Frame& frame) const;
  // What run_step fills per step, kept across the steps of one run to reuse its capacity.
  struct StepScratch {
    std::vector<KernelInput> kernel_inputs;
    std::vector<KernelOutput> kernel_outputs;
    std::vector<const void*> external_data;
    std::vector<void*> export_data;
  };
  // One step of execute_frame.
  void run_step(size_t s, const Frame& frame, StepScratch& scratch) const;
  using SubExecutables = std::vector<std::shared_ptr<const Executable>>;
  // scan, cond, while_loop: their sub-programs run as compiled executables.
  static void run_control_flow(const Equation& equation, const SubExecutables& subs,
                               std::span<const std::byte* const> operands,
                               std::span<std::byte* const> results, ComputePool& pool);

  std::shared_ptr<const Program> program_;
  std::vector<StepPlan> steps_;
  std::vector<FusedLoop> fused_;     // per step: the fused loop (unused for single kernels)
  std::vector<KernelFn> kernels_;    // per equation
  std::vector<SubExecutables> sub_;  // per step: compiled sub-programs of control flow
  MemoryPlan plan_;
  std::vector<bool> donated_;
  bool interpreted_ = false;  // holds primitives without kernels: runs through eval_program
  bool flush_denormals_ = false;
  double compile_seconds_ = 0;
  int64_t trace_id_ = 0;
  std::string name_;
  std::vector<std::string> step_names_;

  // KILN_DUMP_IR: each step's time summed over the calls so far, rewritten to
  // step_timings_path_ after every call. Off (empty path) otherwise: no clock is read.
  struct StepTimings {
    std::mutex mutex;
    int64_t calls = 0;
    std::vector<int64_t> total_ns;
  };
  std::string step_timings_path_;
  std::unique_ptr<StepTimings> step_timings_;
  void record_step_timings(const std::vector<int64_t>& step_ns) const;
};

}  // namespace kiln::detail
