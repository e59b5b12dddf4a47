// Reading files kiln did not write itself in one piece (a run's records after a crash or an
// edit, a config, a manifest): whatever is at the path, the read ends, within a size limit,
// or fails naming the file. A FIFO with no writer would block forever, /dev/zero would
// fill the memory, and JSON nested a hundred thousand levels deep overflows the stack of
// any recursive reader or writer (nlohmann's dump and destructor recurse per level).
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace kiln::io {

// Limits for the files kiln reads back. A run's records are kilobytes (metrics.jsonl grows
// by about 200 bytes a step: a million steps fit the limit); a limit refuses a file
// swapped for something else long before it costs memory.
inline constexpr size_t kMaxRecordBytes = size_t{16} << 20;    // run.json, manifests
inline constexpr size_t kMaxMetricsBytes = size_t{512} << 20;  // metrics.jsonl
// JSON nested deeper than this is refused: kiln writes at most 6 levels.
inline constexpr int kMaxJsonDepth = 64;

// The whole of the regular file at `path`, at most `max_bytes` of it. Refused, naming the
// path: a missing file, a directory, a FIFO, a device or socket (the file is opened
// without blocking and checked before anything is read), a file over the limit (counted
// while reading, since device and /proc files report no size), an unreadable one.
std::string read_regular_file(const std::filesystem::path& path, size_t max_bytes);

// As read_regular_file, but nothing (rather than an error) when no file is at `path`.
std::optional<std::string> read_regular_file_if_present(const std::filesystem::path& path,
                                                        size_t max_bytes);

// Parses `text`, read from `source` (a file name, or a database row), as JSON. Refused,
// naming the source and the line: text that is not JSON (invalid UTF-8 included) and
// values nested deeper than `max_depth`.
nlohmann::json parse_json(std::string_view text, std::string_view source,
                          int max_depth = kMaxJsonDepth);

// As parse_json, but nothing (rather than an error) for text that is not JSON or is nested
// too deep: for records of which one may be torn (the last line of metrics.jsonl after a
// crash) or damaged (a catalog row), which the caller skips or names itself.
std::optional<nlohmann::json> parse_json_if_valid(std::string_view text,
                                                  int max_depth = kMaxJsonDepth);

// A path as text for JSON and messages: the file name's bytes where they are UTF-8, and
// each byte that is not as \xNN, so that a name that is not UTF-8 can be written (and
// named) at all.
std::string printable_path(const std::filesystem::path& path);

}  // namespace kiln::io
