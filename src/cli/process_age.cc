// process_age_seconds (process_age.h), from /proc/self/stat.
#include "cli/process_age.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace kiln::cli {

// The start time is field 22 of /proc/self/stat, in clock ticks since boot.
double process_age_seconds() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  // Field 22 (starttime) is the 20th after the command name's closing parenthesis.
  for (int i = 0; i < 20 && fields >> field; ++i) {
  }
  double start_ticks = 0;
  try {
    start_ticks = std::stod(field);
  } catch (...) {
    return 0;
  }
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  double age = static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec) -
               start_ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  return age > 0 ? age : 0;
}

}  // namespace kiln::cli
