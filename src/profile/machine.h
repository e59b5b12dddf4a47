// The machine's limits that reports divide by: peak f32 GEMM throughput (an sgemm of the
// GEMM library kiln uses, on all compute threads) and memory bandwidth (a STREAM triad over
// arrays far larger than the caches). Measured, not taken from a datasheet: what this
// machine reaches with this build is the honest denominator for "how far from the limit".
// Measuring takes seconds, so the figures are cached per CPU model, thread count and SIMD
// target (~/.cache/kiln/machine.json) and re-measured on request.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace kiln::profile {

struct MachinePeaks {
  double gemm_gflops = 0;    // f32, the best of the timed repeats
  double bandwidth_gbs = 0;  // triad, bytes counted as STREAM counts them (3 x 4 per element)
  std::string cpu_model;
  std::string simd_target;
  int64_t threads = 0;
  std::string how;  // what was timed, for the reports that quote the figures
  nlohmann::json to_json() const;
  static MachinePeaks from_json(const nlohmann::json& json);
};

// The first "model name" of /proc/cpuinfo ("unknown" when there is none).
std::string cpu_model();

// Times both yardsticks now (about 2 s; `quick`: smaller and fewer, for tests).
MachinePeaks measure_machine_peaks(bool quick = false);

// The cached figures for this machine, measured (and cached) when there are none or
// `refresh`. A cache that cannot be read or written is re-measured or left alone, never an
// error. `*from_cache` says which it was.
// (`quick` measures as measure_machine_peaks(true) does: for tests.)
MachinePeaks machine_peaks(bool refresh = false, bool* from_cache = nullptr, bool quick = false);

// $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln, else /tmp/kiln-cache.
std::filesystem::path cache_dir();

}  // namespace kiln::profile
