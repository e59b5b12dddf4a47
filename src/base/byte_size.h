// Sizes in bytes as people write them ("2GiB", "1.5 GB", "800MiB", "4096") and as kiln
// prints them. A memory budget is a number a user types, so both unit systems are read:
// KiB/MiB/GiB/TiB are powers of 1024, kB/KB/MB/GB/TB powers of 1000 (as `free -h` and
// nvidia-smi differ, people write both).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// The size `text` names, or nullopt when it is not a size: a non-negative number (a
// fraction allowed with a unit), optional blanks, an optional unit (B, kB, KB, MB, GB, TB,
// KiB, MiB, GiB, TiB; case-sensitive, since "mb" could mean millibits). Sizes of 2^63
// bytes or more are nullopt.
std::optional<int64_t> parse_byte_size(std::string_view text);

// "512 B", "1.5 KiB", "12.3 MiB", "2.00 GiB": powers of 1024, three significant digits.
std::string format_byte_size(int64_t bytes);

}  // namespace kiln
