// The measured roofline (see roofline.h).
#include "profile/roofline.h"

#include <algorithm>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

namespace kiln::profile {
namespace {

// The two roofs' times for this cost: {FLOPs / peak, bytes / bandwidth}.
std::pair<double, double> roof_seconds(double flops, double bytes, const MachinePeaks& peaks) {
  return {peaks.gemm_gflops > 0 ? flops / (peaks.gemm_gflops * 1e9) : 0.0,
          peaks.bandwidth_gbs > 0 ? bytes / (peaks.bandwidth_gbs * 1e9) : 0.0};
}

double attainable_seconds(double flops, double bytes, const MachinePeaks& peaks) {
  auto [compute, memory] = roof_seconds(flops, bytes, peaks);
  return std::max(compute, memory);
}

}  // namespace

std::string roofline_bound(double flops, double bytes, double measured_s,
                           const MachinePeaks& peaks) {
  auto [compute, memory] = roof_seconds(flops, bytes, peaks);
  double attainable = std::max(compute, memory);
  if (measured_s <= 0 || attainable < kOverheadBelow * measured_s) return "overhead";
  return compute >= memory ? "compute" : "memory";
}

Roofline measure_roofline(const detail::Executable& executable, const trace::Recording& recording,
                          int64_t train_steps, double step_wall_s, const MachinePeaks& peaks) {
  return measure_roofline(std::vector<const detail::Executable*>{&executable}, recording,
                          train_steps, step_wall_s, peaks);
}

Roofline measure_roofline(const std::vector<const detail::Executable*>& executables,
                          const trace::Recording& recording, int64_t train_steps,
                          double step_wall_s, const MachinePeaks& peaks) {
  struct Measured {
    int64_t calls = 0;
    int64_t total_ns = 0;
  };
  // By (executable's position, step); ordered: rows come out the same every time.
  std::map<std::pair<size_t, int64_t>, Measured> by_step;
  std::map<double, size_t> position_of;  // trace id -> position in `executables`
  for (size_t e = 0; e < executables.size(); ++e) {
    position_of.emplace(static_cast<double>(executables[e]->trace_id()), e);
  }
  for (const trace::Event& event : recording.events) {
    if (event.category != "kernel" || event.args.size() < 2) continue;
    if (event.args[0].first != "executable") continue;
    auto found = position_of.find(event.args[0].second);
    if (found == position_of.end()) continue;
    Measured& measured = by_step[{found->second, static_cast<int64_t>(event.args[1].second)}];
    ++measured.calls;
    measured.total_ns += event.duration_ns;
  }
  Roofline roofline;
  roofline.train_steps = train_steps;
  roofline.step_wall_s = step_wall_s;
  roofline.peaks = peaks;
  const double per_step = train_steps > 0 ? 1.0 / static_cast<double>(train_steps) : 0.0;
  for (const auto& [where, measured] : by_step) {
    const auto& [position, step] = where;
    const detail::Executable& executable = *executables[position];
    if (step < 0 || static_cast<size_t>(step) >= executable.steps().size()) continue;
    Cost cost = executable.step_cost(static_cast<size_t>(step));
    RooflineRow row;
    row.name = executable.step_names()[static_cast<size_t>(step)];
    if (position > 0) row.name = executable.name() + ": " + row.name;
    row.step = step;
    row.calls = static_cast<double>(measured.calls) * per_step;
    row.measured_s = static_cast<double>(measured.total_ns) * 1e-9 * per_step;
    row.flops = cost.flops * row.calls;
    row.bytes = cost.bytes() * row.calls;
    row.attainable_s = attainable_seconds(row.flops, row.bytes, peaks);
    row.bound = roofline_bound(row.flops, row.bytes, row.measured_s, peaks);
    roofline.kernel_s += row.measured_s;
    roofline.attainable_s += row.attainable_s;
    roofline.rows.push_back(std::move(row));
  }
  std::stable_sort(
      roofline.rows.begin(), roofline.rows.end(),
      [](const RooflineRow& a, const RooflineRow& b) { return a.measured_s > b.measured_s; });
  return roofline;
}

nlohmann::json Roofline::to_json(size_t top) const {
  nlohmann::json rows_json = nlohmann::json::array();
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const RooflineRow& row = rows[i];
    rows_json.push_back(
        {{"name", row.name},
         {"step", row.step},
         {"calls_per_step", row.calls},
         {"measured_seconds", row.measured_s},
         {"share_of_step", step_wall_s > 0 ? row.measured_s / step_wall_s : 0.0},
         {"flops", row.flops},
         {"bytes", row.bytes},
         {"arithmetic_intensity", row.intensity()},
         {"attainable_seconds", row.attainable_s},
         {"achieved_gflops", row.measured_s > 0 ? row.flops / row.measured_s / 1e9 : 0.0},
         {"achieved_gbs", row.measured_s > 0 ? row.bytes / row.measured_s / 1e9 : 0.0},
         {"efficiency", row.efficiency()},
         {"bound", row.bound}});
  }
  double flops = 0, bytes = 0;
  for (const RooflineRow& row : rows) {
    flops += row.flops;
    bytes += row.bytes;
  }
  return {{"train_steps", train_steps},
          {"step_seconds", step_wall_s},
          {"kernel_seconds", kernel_s},
          {"outside_kernels_seconds", std::max(0.0, step_wall_s - kernel_s)},
          {"attainable_seconds", attainable_s},
          {"efficiency", efficiency()},
          {"flops", flops},
          {"bytes", bytes},
          {"arithmetic_intensity", bytes > 0 ? flops / bytes : 0.0},
          {"ridge_flops_per_byte",
           peaks.bandwidth_gbs > 0 ? peaks.gemm_gflops / peaks.bandwidth_gbs : 0.0},
          {"peak_gflops", peaks.gemm_gflops},
          {"bandwidth_gbs", peaks.bandwidth_gbs},
          {"peaks_measured_by", peaks.how},
          {"kernels", rows.size()},
          {"top", std::move(rows_json)}};
}

}  // namespace kiln::profile
