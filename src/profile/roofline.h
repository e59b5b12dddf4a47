// The roofline of a compiled step, measured: each of the executable's steps (a kernel or a
// fused loop) timed over the traced train steps, set against what the machine allows for
// its cost, attainable = max(FLOPs / peak FLOP/s, bytes / bandwidth). The cost is the cost
// rules' (kiln/cost.h); the peaks are kiln bench machine's (profile/machine.h).
//
// A row's bound says which limit explains it: "compute" or "memory" (whichever term of
// the max is larger) when the kernel reaches at least kOverheadBelow of that limit,
// "overhead" when it does not, so that neither its FLOPs nor its bytes explain its time
// (threads waking, loop set-up, a size too small to stream). docs/profiling.md reads one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/trace_events.h"
#include "jit/executable.h"
#include "profile/machine.h"

namespace kiln::profile {

inline constexpr double kOverheadBelow = 0.1;

struct RooflineRow {
  std::string name;         // the step's name stack and primitive(s)
  int64_t step = 0;         // its index among the executable's steps
  double calls = 0;         // per train step (more than 1 only inside a loop body)
  double measured_s = 0;    // per train step
  double flops = 0;         // per train step
  double bytes = 0;         // per train step
  double attainable_s = 0;  // per train step
  std::string bound;        // "compute", "memory" or "overhead"
  double intensity() const { return bytes > 0 ? flops / bytes : 0.0; }
  double efficiency() const { return measured_s > 0 ? attainable_s / measured_s : 0.0; }
};

struct Roofline {
  std::vector<RooflineRow> rows;  // every step that ran, by measured time, longest first
  int64_t train_steps = 0;        // how many train steps the times are averaged over
  double step_wall_s = 0;         // a train step's synchronized wall time (median)
  double kernel_s = 0;            // the sum of the rows' measured times
  double attainable_s = 0;        // the sum of the rows' attainable times
  MachinePeaks peaks;
  // attainable / wall: how close the whole step is to the machine's limits.
  double efficiency() const { return step_wall_s > 0 ? attainable_s / step_wall_s : 0.0; }
  // The top `top` rows and the totals, as run.json's "roofline".
  nlohmann::json to_json(size_t top = 15) const;
};

// From the kernel events of `executable` (its trace_id) in `recording`, which covered
// `train_steps` calls of it. Steps that did not run in the recording are left out.
Roofline measure_roofline(const detail::Executable& executable, const trace::Recording& recording,
                          int64_t train_steps, double step_wall_s, const MachinePeaks& peaks);
// The same over several executables that a train step runs (a jit program and the segments
// of its shard_map, say): rows of every executable after the first are named
// "<executable>: <step>". A segment runs once per device of its mesh, so its rows add the
// devices' times (device seconds: on devices that run side by side, kernel_s can pass the
// wall time).
Roofline measure_roofline(const std::vector<const detail::Executable*>& executables,
                          const trace::Recording& recording, int64_t train_steps,
                          double step_wall_s, const MachinePeaks& peaks);

// Which limit a kernel of this cost and time is held by (see the header comment).
std::string roofline_bound(double flops, double bytes, double measured_s,
                           const MachinePeaks& peaks);

}  // namespace kiln::profile
