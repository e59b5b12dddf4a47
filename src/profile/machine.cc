// Peak GEMM throughput and memory bandwidth, measured and cached (machine.h).
#include "profile/machine.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/compute_pool.h"
#include "base/trimmed.h"
#include "io/atomic_file.h"
#include "kernels/cpu/elementwise_simd.h"
#include "kernels/cpu/gemm.h"
#include "kiln/profile.h"
#include "profile/bandwidth.h"

namespace kiln::profile {
namespace {

namespace fs = std::filesystem;

// The best of `repeats` timings: peaks are what the machine can reach, and every slower
// sample was disturbed by something else (the machine is shared and noisy).
template <typename Fn>
double best_seconds(int repeats, Fn&& fn) {
  fn();  // warm-up: page faults, library initialisation
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    double start = now_seconds();
    fn();
    best = std::min(best, now_seconds() - start);
  }
  return best;
}

double gemm_gflops(bool quick) {
  int64_t n = quick ? 256 : 1536;
  std::vector<float> a(static_cast<size_t>(n * n), 0.5f), b(a.size(), 0.25f), c(a.size());
  GemmDims dims{.m = n, .n = n, .k = n, .lda = n, .ldb = n, .ldc = n};
  double seconds =
      best_seconds(quick ? 2 : 5, [&] { sgemm_direct(dims, a.data(), b.data(), c.data()); });
  return 2.0 * static_cast<double>(n * n * n) / seconds / 1e9;
}

double triad_gbs(bool quick) {
  // 3 arrays of 32 Mi floats (384 MiB): far past any last-level cache.
  int64_t n = quick ? int64_t{1} << 20 : int64_t{1} << 25;
  std::vector<float> a(static_cast<size_t>(n)), b(a.size(), 1.0f), c(a.size(), 2.0f);
  ComputePool& pool = compute_pool();
  double seconds = best_seconds(quick ? 2 : 5,
                                [&] { stream_triad(a.data(), b.data(), c.data(), 3.0f, n, pool); });
  return 3.0 * 4 * static_cast<double>(n) / seconds / 1e9;
}

fs::path cache_file() {
  return cache_dir() / "machine.json";
}

// The key a cached entry must match: another CPU, thread count or SIMD target is another
// machine as far as the peaks go.
std::string machine_key() {
  return fmt::format("{} | {} threads | {}", cpu_model(), compute_pool().num_threads(),
                     simd::target_name());
}

}  // namespace

nlohmann::json MachinePeaks::to_json() const {
  return {{"gemm_gflops", gemm_gflops}, {"bandwidth_gbs", bandwidth_gbs},
          {"cpu_model", cpu_model},     {"simd_target", simd_target},
          {"threads", threads},         {"how", how}};
}

MachinePeaks MachinePeaks::from_json(const nlohmann::json& json) {
  MachinePeaks peaks;
  peaks.gemm_gflops = json.at("gemm_gflops").get<double>();
  peaks.bandwidth_gbs = json.at("bandwidth_gbs").get<double>();
  peaks.cpu_model = json.at("cpu_model").get<std::string>();
  peaks.simd_target = json.at("simd_target").get<std::string>();
  peaks.threads = json.at("threads").get<int64_t>();
  peaks.how = json.at("how").get<std::string>();
  return peaks;
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("model name")) continue;
    size_t colon = line.find(':');
    if (colon != std::string::npos) return trimmed(line.substr(colon + 1));
  }
  return "unknown";
}

fs::path cache_dir() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "kiln";
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".cache" / "kiln";
  }
  return "/tmp/kiln-cache";
}

MachinePeaks measure_machine_peaks(bool quick) {
  MachinePeaks peaks;
  peaks.gemm_gflops = gemm_gflops(quick);
  peaks.bandwidth_gbs = triad_gbs(quick);
  peaks.cpu_model = cpu_model();
  peaks.simd_target = simd::target_name();
  peaks.threads = compute_pool().num_threads();
  int64_t n = quick ? 256 : 1536;
  peaks.how = fmt::format(
      "best of repeats: sgemm {}x{}x{} (oneDNN, {} threads); triad a = b + s*c over {} f32 "
      "per array, 12 bytes per element",
      n, n, n, peaks.threads, quick ? int64_t{1} << 20 : int64_t{1} << 25);
  return peaks;
}

MachinePeaks machine_peaks(bool refresh, bool* from_cache, bool quick) {
  nlohmann::json cache = nlohmann::json::object();
  {
    std::ifstream in(cache_file());
    if (in) cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!cache.is_object()) cache = nlohmann::json::object();  // unreadable: start afresh
  }
  std::string key = machine_key();
  if (!refresh && cache.contains(key)) {
    try {
      MachinePeaks peaks = MachinePeaks::from_json(cache[key]);
      if (from_cache) *from_cache = true;
      return peaks;
    } catch (const std::exception&) {
      // A damaged entry: measure again.
    }
  }
  MachinePeaks peaks = measure_machine_peaks(quick);
  cache[key] = peaks.to_json();
  try {
    fs::create_directories(cache_dir());
    io::write_file_atomically(cache_file(), cache.dump(2) + "\n");
  } catch (const std::exception&) {
    // No cache: the next report measures again, which costs time, not correctness.
  }
  if (from_cache) *from_cache = false;
  return peaks;
}

}  // namespace kiln::profile
