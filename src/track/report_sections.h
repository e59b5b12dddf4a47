// The sections of `kiln report`'s page (report.h), each an HTML fragment.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "track/report.h"

namespace kiln::track::report {

// The number at run.json's info[object][key] (info[key] when `object` is null), or NaN
// when it is absent or not a number.
double number_at(const nlohmann::json& info, const char* object, const char* key);

// The color of run `index` in every chart and legend.
std::string run_color(size_t index);

// The curves: train loss and learning rate per step, accuracy and loss per epoch.
std::string curves_section(const std::vector<RunData>& runs);
// [telemetry]'s per-layer curves; "" when no run has telemetry lines.
std::string telemetry_section(const std::vector<RunData>& runs);

// The distribution of train step times (step 1 has no predecessor to be timed from).
std::string step_time_section(const std::vector<RunData>& runs);

// One run's tables: the run, where its time went, identity, environment, data, the
// optional timing / roofline / memory objects, what else run.json holds, and the config.
std::string run_section(const RunData& run, size_t index, bool several);

// The profile's charts: the roofline of run.json's "roofline" and the memory breakdown of
// its "memory" (either may be absent: nullptr).
std::string profile_charts(const nlohmann::json* roofline, const nlohmann::json* memory);

// The tables beside them: the roofline's summary and top kernels; the memory estimate by
// part against the observed peak. A value of an unexpected shape is shown as it is.
std::string roofline_tables(const nlohmann::json& roofline);
std::string memory_tables(const nlohmann::json& memory);

}  // namespace kiln::track::report
