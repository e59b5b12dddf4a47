// The public types of kiln::jit (kiln/jit.h): options, statistics, the memory plan's
// report and a compiled executable's handle.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/sharding.h"
#include "kiln/tracing.h"

namespace kiln {

struct JitOptions {
  // Arguments that are static (their value is part of the signature). Arguments that are
  // not Arrays or pytrees are static whether listed or not; listing one checks that it is
  // (an Array listed here is an error: Arrays are not hashable values).
  std::vector<int> static_argnums;
  // Arguments whose buffers the call may reuse for its results. A donated Array is
  // deleted by the call (using it afterwards is an error), unless another reference to its
  // buffer keeps it alive, in which case the call allocates instead and counts it in
  // JitStats::donations_unusable.
  std::vector<int> donate_argnums;
  // Shown in logs and in KILN_DUMP_IR file names.
  std::string name = "jit";
  // Run the compiled program with subnormal floats flushed to zero (inputs read as 0,
  // results written as 0) instead of IEEE gradual underflow: faster wherever values
  // underflow (x86 spends ~100 cycles on each operation that meets a subnormal), and as
  // deterministic. Eager ops and the reference kernels always run IEEE.
  bool flush_denormals = false;
  // Partition the program over a mesh (docs/sharding.md, *jit with shardings*): array leaf
  // i of the flattened arguments split by in_shardings[i] (all on one mesh), result leaf j
  // by out_shardings[j] (empty: the shardings propagation gives). The program is traced on
  // whole arrays; each primitive's sharding rule says how it runs on blocks, and the
  // collectives that join the blocks (all_gather, psum, psum_scatter) are inserted where
  // needed. Empty in_shardings: the program runs on one device.
  std::vector<NamedSharding> in_shardings;
  std::vector<NamedSharding> out_shardings;

  // Chainable setters, for code built with -Wextra (which warns about designated
  // initializers that skip fields): jit(f, JitOptions().named("step").donating({0})).
  JitOptions static_args(std::vector<int> argnums) const {
    JitOptions copy = *this;
    copy.static_argnums = std::move(argnums);
    return copy;
  }
  JitOptions donating(std::vector<int> argnums) const {
    JitOptions copy = *this;
    copy.donate_argnums = std::move(argnums);
    return copy;
  }
  JitOptions named(std::string text) const {
    JitOptions copy = *this;
    copy.name = std::move(text);
    return copy;
  }
  JitOptions sharded(std::vector<NamedSharding> in, std::vector<NamedSharding> out = {}) const {
    JitOptions copy = *this;
    copy.in_shardings = std::move(in);
    copy.out_shardings = std::move(out);
    return copy;
  }
  JitOptions flushing_denormals(bool flush = true) const {
    JitOptions copy = *this;
    copy.flush_denormals = flush;
    return copy;
  }
};

struct JitStats {
  int64_t calls = 0;
  int64_t compiles = 0;             // the first compilation and every recompilation
  int64_t cache_hits = 0;           // calls that reused an executable
  double compile_seconds = 0;       // tracing + passes + planning, all compilations
  double last_compile_seconds = 0;  // the most recent compilation
  int64_t donations_used = 0;
  int64_t donations_unusable = 0;
  // One line per compilation: "first call" or which argument changed, from what to what.
  std::vector<std::string> compile_reasons;
};

// What the memory planner decided for one executable. Bytes are for the whole run.
struct MemoryPlanReport {
  int64_t argument_bytes = 0;        // the inputs, owned by the caller
  int64_t constant_bytes = 0;        // closed-over arrays and folded constants
  int64_t output_bytes = 0;          // results, allocated per call (less what donation reuses)
  int64_t temp_bytes = 0;            // one arena for every intermediate, reused by liveness
  int64_t temp_bytes_unplanned = 0;  // the intermediates' total size without reuse
  int64_t peak_bytes = 0;            // arguments + constants + outputs + temps
  int64_t num_buffers = 0;           // intermediate values that live in the arena
  int64_t in_place = 0;              // results written over an operand that died there
  int64_t donated_outputs = 0;       // results planned into a donated argument's buffer
  std::string to_string() const;
};

namespace detail {
class Executable;
}  // namespace detail

// One compiled executable: its optimised program and its memory plan.
class Compiled {
 public:
  explicit Compiled(std::shared_ptr<const detail::Executable> executable)
      : executable_(std::move(executable)) {}
  // The program after every pass, before fusion (as cost_analysis sees it).
  TracedProgram program() const;
  // The steps the executable runs, fused groups shown nested.
  std::string steps_text() const;
  const MemoryPlanReport& memory_plan() const;
  double compile_seconds() const;
  // What kiln's own profiler reads (the steps, their costs and the memory plan): not API.
  const std::shared_ptr<const detail::Executable>& executable() const { return executable_; }

 private:
  std::shared_ptr<const detail::Executable> executable_;
};

}  // namespace kiln
