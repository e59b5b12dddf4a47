// Atomic file replacement: the content goes to a temporary file in the destination's
// directory, which is fsynced, renamed over the destination, and the directory fsynced.
// A reader (or a crash) sees the old file or the complete new one, never a part; a write
// that fails, or whose producer throws, leaves neither the destination nor a temporary.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string_view>

namespace kiln::io {

// Appends bytes to the file being written.
using ByteSink = std::function<void(std::span<const std::byte>)>;

// Calls `produce` with a sink for the content, then commits the file. Whatever `produce`
// throws is rethrown after the temporary file is removed (the destination is untouched).
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(const ByteSink&)>& produce);
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace kiln::io
