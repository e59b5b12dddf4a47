// shard_map run fast: the body cut at its collectives into segments, each compiled once
// into an executable that every device of the mesh runs on its own queue, so the devices
// compute side by side and the per-equation dispatch of the reference run
// (spmd::shard_map_impl) disappears. The collectives between segments are the reference
// run's, so the two give the same bits (tests/sharding/compiled_shard_map_test.cc).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "ir/program.h"
#include "jit/executable.h"

namespace kiln::detail {

struct ShardMapSegment {
  // Body equations (indices) of the collectives that run, in program order, before the
  // segment's executable.
  std::vector<size_t> collectives_before;
  std::vector<VarId> inputs;   // body variables the executable reads, in its input order
  std::vector<VarId> outputs;  // body variables it defines that are read after it
  std::shared_ptr<const Executable> executable;  // null for a segment without equations
};

// A collective's results are at depth one more than its operands, other equations' at
// their operands' depth; segment k holds the non-collective equations at depth k, and the
// collectives at depth k run just before it. No equation waits on a later segment, and
// two collectives that do not depend on each other share one gap between segments.
std::vector<ShardMapSegment> plan_shard_map_segments(const Program& body);

// The segments' executables of every shard_map equation in `program` (in program order,
// then segment order): what runs on the mesh's devices when `program` does, for a profile
// to attribute their kernels (profile::measure_roofline).
std::vector<std::shared_ptr<const Executable>> shard_map_segment_executables(
    const Program& program);

// shard_map's impl rule: the compiled run (plans are cached per body program).
std::vector<Array> compiled_shard_map_impl(std::span<const Array> inputs, const Params& params,
                                           CallSite site);

}  // namespace kiln::detail
