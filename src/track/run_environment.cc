// The run environment (run_environment.h). code_identity.h is generated at build time by
// cmake/code_identity.cmake; KILN_BUILD_TYPE and KILN_BUILD_FLAGS come from CMakeLists.txt.
#include "track/run_environment.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>
#include <nlohmann/json.hpp>

#include <code_identity.h>  // generated in the build tree
#include "base/trimmed.h"
#include "io/bounded_read.h"
#include "io/json_fields.h"
#include "kernels/cpu/elementwise_simd.h"
#include "kiln/device.h"
#include "kiln/version.h"
#include "profile/machine.h"

namespace kiln::track {
namespace {

using nlohmann::json;

std::string compiler() {
#if defined(__clang__)
  return fmt::format("clang {}", __clang_version__);
#elif defined(__GNUC__)
  return fmt::format("GCC {}", __VERSION__);
#else
  return "unknown";
#endif
}

json code_identity() {
  std::string commit = KILN_GIT_COMMIT;
  if (commit == "unknown") {
    return {{"source", "version"}, {"version", kVersion}};
  }
  return {{"source", "git"}, {"commit", commit}, {"dirty", KILN_GIT_DIRTY != 0}};
}

json operating_system() {
  utsname name{};
  if (uname(&name) != 0) return "unknown";
  return fmt::format("{} {} {}", name.sysname, name.release, name.machine);
}

}  // namespace

RecordedCode recorded_code(const RunInfo& info) {
  RecordedCode code;
  std::optional<json> environment = io::parse_json_if_valid(info.section("environment"));
  if (!environment || !environment->is_object() || !environment->contains("code")) return code;
  const json& recorded = (*environment)["code"];
  if (!recorded.is_object()) return code;
  code.commit = io::string_field(recorded, "commit");
  if (auto dirty = recorded.find("dirty"); dirty != recorded.end()) {
    code.dirty_text = dirty->is_string() ? dirty->get<std::string>() : dirty->dump();
  }
  return code;
}

json run_environment() {
  const dnnl_version_t* dnnl = dnnl_version();
  return {
      {"kiln_version", kVersion},
      {"code", code_identity()},
      {"build",
       {{"compiler", compiler()},
        {"build_type", KILN_BUILD_TYPE},
        {"flags", trimmed(KILN_BUILD_FLAGS)}}},
      {"gemm",
       {{"library", "oneDNN"},
        {"version",
         fmt::format("{}.{}.{} ({})", dnnl->major, dnnl->minor, dnnl->patch, dnnl->hash)}}},
      {"cpu",
       {{"model", profile::cpu_model()},
        {"simd_target", simd::target_name()},
        {"cores", static_cast<int64_t>(std::thread::hardware_concurrency())}}},
      {"devices", static_cast<int64_t>(devices().size())},
      {"compute_threads", default_device().compute_threads()},
      {"os", operating_system()},
  };
}

}  // namespace kiln::track
