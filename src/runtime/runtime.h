// Runtime start-up: how many logical CPU devices to create.
#pragma once

#include <optional>
#include <string>

namespace kiln {

inline constexpr int kMaxCpuDevices = 256;

// Parses a KILN_CPU_DEVICES value: an integer in [1, kMaxCpuDevices]. Raises a kiln::Error
// naming the variable and the accepted range otherwise.
int parse_cpu_device_count(const std::string& text);

// KILN_CPU_DEVICES if set (parsed as above), else 1.
int configured_cpu_device_count();

// Which kernels run: "fast" (the default: the fast CPU kernel where a primitive has one)
// or "ref" (KILN_KERNELS=ref: every primitive's reference kernel). Any other value of
// KILN_KERNELS raises a kiln::Error naming it: a misspelt setting must not silently run
// other kernels than the ones asked for, since they change results in the last bits.
std::string parse_kernels_setting(const char* value);  // value: nullptr when unset
std::string configured_kernels();

}  // namespace kiln
