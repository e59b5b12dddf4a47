// Chrome trace event JSON from a recording (see chrome_trace.h).
#include "profile/chrome_trace.h"

#include <set>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"

namespace kiln::profile {
namespace {

constexpr int kPid = 1;

// Microseconds with nanosecond resolution: Perfetto rounds a fractional ts to the ns.
double micros(int64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}

nlohmann::json event_json(const trace::Event& event) {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& [key, value] : event.args) args[key] = value;
  nlohmann::json json = {{"name", event.name},
                         {"cat", event.category},
                         {"ph", std::string(1, static_cast<char>(event.phase))},
                         {"ts", micros(event.start_ns)},
                         {"pid", kPid},
                         {"tid", static_cast<int32_t>(event.track)},
                         {"args", std::move(args)}};
  switch (event.phase) {
    case trace::Event::Phase::kComplete:
      json["dur"] = micros(event.duration_ns);
      break;
    case trace::Event::Phase::kInstant:
      json["s"] = "t";
      break;
    case trace::Event::Phase::kCounter:
      json.erase("tid");  // counters are the process's, one track per series
      break;
  }
  return json;
}

}  // namespace

nlohmann::json chrome_trace(const trace::Recording& recording, nlohmann::json metadata,
                            const std::string& process_name) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"ph", "M"}, {"pid", kPid}, {"name", "process_name"}, {"args", {{"name", process_name}}}});
  // Tracks in their enum order (training loop first, devices last), named once each.
  std::set<int32_t> tracks;
  for (const trace::Event& event : recording.events) {
    if (event.phase != trace::Event::Phase::kCounter) {
      tracks.insert(static_cast<int32_t>(event.track));
    }
  }
  for (int32_t track : tracks) {
    events.push_back({{"ph", "M"},
                      {"pid", kPid},
                      {"tid", track},
                      {"name", "thread_name"},
                      {"args", {{"name", trace::track_name(static_cast<trace::Track>(track))}}}});
    events.push_back({{"ph", "M"},
                      {"pid", kPid},
                      {"tid", track},
                      {"name", "thread_sort_index"},
                      {"args", {{"sort_index", track}}}});
  }
  for (const trace::Event& event : recording.events) events.push_back(event_json(event));
  if (!metadata.is_object()) metadata = nlohmann::json::object();
  metadata["dropped_events"] = recording.dropped;
  metadata["recorded_seconds"] = static_cast<double>(recording.duration_ns) / 1e9;
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"metadata", std::move(metadata)}};
}

void write_chrome_trace(const std::filesystem::path& path, const trace::Recording& recording,
                        nlohmann::json metadata, const std::string& process_name) {
  io::write_file_atomically(path,
                            chrome_trace(recording, std::move(metadata), process_name).dump());
}

}  // namespace kiln::profile
