// A kernel call as the pallas_call primitive holds it: everything pallas::call was given,
// registered under an id in a process-wide table, so that a program names the call by
// `pallas_call[name, id]` and its rules (src/pallas/kernel_call_prim.cc) find the body,
// the grid and the specs again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kiln/array.h"
#include "kiln/pallas.h"

namespace kiln::pallas::detail {

struct PlanSlot;  // compiled_kernel.h

struct RegisteredKernel {
  KernelBody body;
  std::vector<AbstractValue> in_types;
  std::vector<AbstractValue> out_types;
  Index grid;
  std::vector<BlockSpec> in_specs;
  std::vector<BlockSpec> out_specs;
  CallOptions options;     // semantics resolved: one per grid axis
  size_t hidden_axes = 0;  // leading grid axes the body does not see (vmap's)
  // Where a compiled kernel keeps its variants between runs: set by register_kernel (a
  // kernel called eagerly, never registered, traces its variants for that one call).
  std::shared_ptr<PlanSlot> compiled = nullptr;
};

// Checks everything but the body: the grid and its semantics, each spec against its array,
// the scratch, and every block each grid point would touch (the race check included).
// Resolves the default semantics. Throws a kiln::Error naming the kernel and the spec.
void check_kernel(RegisteredKernel& kernel, CallSite site);

// Runs the kernel on `inputs` (of the kernel's in_types), compiled or in interpret mode as
// interpreted() says.
std::vector<Array> run_call(const RegisteredKernel& kernel, std::span<const Array> inputs,
                            CallSite site);

// Whether a call with these options runs in interpret mode: ForcedMode, else KILN_PALLAS,
// else the options' own (a bad KILN_PALLAS is an error).
bool interpreted(const CallOptions& options);

// Runs every pallas::call made while it lives in interpret mode (true) or compiled (false),
// whatever the call's options and KILN_PALLAS say: how `kiln kernels check` checks both
// modes of the kernels kiln ships. Process-wide; not for concurrent use.
class ForcedMode {
 public:
  explicit ForcedMode(std::optional<bool> interpret);
  ~ForcedMode();
  ForcedMode(const ForcedMode&) = delete;
  ForcedMode& operator=(const ForcedMode&) = delete;

 private:
  int previous_;
};

// Whether a compiled call double-buffers its input blocks: ForcedDoubleBuffer, else
// KILN_PALLAS_DOUBLE_BUFFER, else the options' own (a bad value is an error).
bool double_buffered(const CallOptions& options);

// Sets every compiled call's double buffering while it lives (nullopt: each call's own), as
// ForcedMode sets the mode: how `kiln kernels bench` measures both. Process-wide.
class ForcedDoubleBuffer {
 public:
  explicit ForcedDoubleBuffer(std::optional<bool> on);
  ~ForcedDoubleBuffer();
  ForcedDoubleBuffer(const ForcedDoubleBuffer&) = delete;
  ForcedDoubleBuffer& operator=(const ForcedDoubleBuffer&) = delete;

 private:
  int previous_;
};

// The process-wide table. Ids stay valid for the life of the process, so entries are never
// freed: every traced call adds one (a jitted function once per signature; a vmap called
// eagerly, whose inner call is traced each time, two per call), as custom_vjp's table does.
// A kernel registered in compiled mode has its variants traced and compiled here, where the
// call is traced (as Pallas traces a kernel when its pallas_call is), not when it runs.
int64_t register_kernel(RegisteredKernel kernel, CallSite site);
// The kernel registered under `id`; an id this process did not give out (a program text
// written by another process) is an error naming it.
const RegisteredKernel& registered_kernel(int64_t id, CallSite site);

}  // namespace kiln::pallas::detail
