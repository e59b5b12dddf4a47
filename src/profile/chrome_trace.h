// A trace recording as Chrome trace event JSON, the format Perfetto UI (ui.perfetto.dev)
// and chrome://tracing open: one process, one named thread per track (the training loop,
// the savepoint writer, each data loader worker, each device), a complete ("X") event per
// kernel, batch, savepoint and host synchronization, and a counter ("C") per device for
// its live bytes. Timestamps are microseconds from the start of the recording.
// docs/profiling.md says how to read it; ../shared/research/formats.md section 3 is the
// format as Perfetto accepts it.
#pragma once

#include <filesystem>

#include <nlohmann/json_fwd.hpp>

#include "base/trace_events.h"

namespace kiln::profile {

// The object form {"traceEvents": [...], "displayTimeUnit": "ms", "metadata": {...}}; the
// recording's dropped-event count joins `metadata` as "dropped_events".
nlohmann::json chrome_trace(const trace::Recording& recording, nlohmann::json metadata,
                            const std::string& process_name);

// Writes chrome_trace(...) to `path` atomically.
void write_chrome_trace(const std::filesystem::path& path, const trace::Recording& recording,
                        nlohmann::json metadata, const std::string& process_name);

}  // namespace kiln::profile
