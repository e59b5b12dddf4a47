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

}  // namespace kiln
