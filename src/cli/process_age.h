// How long this process has existed, for "time to first step" figures that include loading
// the binary and its libraries, not only what main() did.
#pragma once

namespace kiln::cli {

// Seconds since the kernel started this process (0 when /proc cannot tell).
double process_age_seconds();

}  // namespace kiln::cli
