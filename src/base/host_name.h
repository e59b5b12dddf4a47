// This machine's host name, as run directories, run.json and TensorBoard's file names
// record it.
#pragma once

#include <string>

namespace kiln {

// gethostname(), or "" when the system does not say.
std::string host_name();

}  // namespace kiln
