// Where and from what a run ran: the code (git commit and uncommitted changes, or the version
// when built outside a checkout), how it was built (compiler, build type, flags), the GEMM
// library, the CPU (model, SIMD target in use, cores), the devices and the operating system.
// run.json records it as "environment"; `kiln runs compare` lists its differences, since two
// runs of one config on different machines or builds need not give the same bits.
#pragma once

#include <nlohmann/json.hpp>

namespace kiln::track {

nlohmann::json run_environment();

}  // namespace kiln::track
