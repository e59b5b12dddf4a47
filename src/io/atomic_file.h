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

// The last resort when the file system is full: rewrites an existing file in place (open,
// write from the start, truncate, fsync), reusing its blocks, so a small status file that
// no longer fits a temporary beside it can still be updated. The space for a longer text is
// reserved first (posix_fallocate), so a full disk fails it before the old content is
// touched. Not atomic: a crash in the middle leaves a mixture; use it only after
// write_file_atomically failed.
void overwrite_file_in_place(const std::filesystem::path& path, std::string_view text);

// A test seam for write errors that a real disk gives only when full or failing: the hook
// sees each write's destination (write_file_atomically's and overwrite_file_in_place's
// `path`, and other writers that ask injected_write_fault) and returns an errno to fail
// that write with (ENOSPC, EIO), or 0. An empty hook (the default) injects nothing.
using WriteFault = std::function<int(const std::filesystem::path& destination)>;
void set_write_fault_for_testing(WriteFault fault);
int injected_write_fault(const std::filesystem::path& destination);

}  // namespace kiln::io
