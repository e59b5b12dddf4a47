// Where and from what a run ran: the code (git commit and uncommitted changes, or the version
// when built outside a checkout), how it was built (compiler, build type, flags), the GEMM
// library, the CPU (model, SIMD target in use, cores), the devices and the operating system.
// run.json records it as "environment"; `kiln runs compare` lists its differences, since two
// runs of one config on different machines or builds need not give the same bits.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "track/run_info.h"

namespace kiln::track {

nlohmann::json run_environment();

// The code a run was built from, as its run.json's environment recorded it.
struct RecordedCode {
  std::string commit;      // "" when not recorded
  std::string dirty_text;  // the "dirty" value as text ("true", "false"), "" when absent
  bool dirty() const { return dirty_text == "true"; }
};
RecordedCode recorded_code(const RunInfo& info);

}  // namespace kiln::track
