#include "base/host_name.h"

#include <unistd.h>

namespace kiln {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

}  // namespace kiln
