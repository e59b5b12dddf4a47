// `kiln devices`: the devices this process sees, with memory statistics and threads.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kernels/cpu/elementwise_simd.h"
#include "kiln/device.h"
#include "sharding/placement_check.h"

namespace kiln::cli {
namespace {

std::string bytes_text(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1 << 20)) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  if (bytes < (1 << 30)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

int run_placement_check(bool as_json) {
  std::vector<sharding::PlacementCheck> rows = sharding::check_placement();
  bool all_ok = true;
  for (const sharding::PlacementCheck& row : rows) all_ok = all_ok && row.problems.empty();
  if (as_json) {
    nlohmann::json out = nlohmann::json::array();
    for (const sharding::PlacementCheck& row : rows) {
      out.push_back({{"mesh", row.mesh},
                     {"spec", row.spec},
                     {"shape", row.shape},
                     {"devices", row.devices},
                     {"problems", row.problems}});
    }
    fmt::print("{}\n", out.dump(2));
    return all_ok ? 0 : 1;
  }
  fmt::print(
      "placement check on {} device(s): each device's block, its values, x * 3 + 1 on "
      "it, and the gathered array\n",
      devices().size());
  for (const sharding::PlacementCheck& row : rows) {
    fmt::print("{:<28} {:<16} {:<9} {}\n", row.mesh, row.spec, row.shape,
               row.problems.empty() ? "ok" : "FAILED");
    for (const std::string& problem : row.problems) fmt::print("    {}\n", problem);
  }
  fmt::print("{}\n", all_ok ? "all placements check out"
                            : "placement check FAILED: the lines above say where");
  return all_ok ? 0 : 1;
}

}  // namespace

Runner add_devices_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "devices", "List the devices kiln uses (set KILN_CPU_DEVICES=N for N logical CPU devices)");
  auto json = std::make_shared<bool>(false);
  auto check = std::make_shared<bool>(false);
  command->add_flag("--json", *json, "Print a JSON document instead of a table");
  command->add_flag("--check", *check,
                    "Place test arrays on the devices by several shardings and check each "
                    "device's block, its values and arithmetic on it against the unsharded "
                    "result (exit 1 on a difference; docs/sharding.md)");
  return [json, check] {
    if (*check) return run_placement_check(*json);
    auto all = devices();
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (Device* device : all) {
        MemoryStats stats = device->memory_stats();
        out.push_back({{"id", device->id()},
                       {"kind", device->kind()},
                       {"live_bytes", stats.live_bytes},
                       {"peak_bytes", stats.peak_bytes},
                       {"reserved_bytes", stats.reserved_bytes},
                       {"compute_threads", device->compute_threads()}});
      }
      fmt::print("{}\n", out.dump(2));
      return 0;
    }
    fmt::print("{} device(s); kernels share one compute pool of {} thread(s); SIMD target {}\n",
               all.size(), all.empty() ? 0 : all[0]->compute_threads(), simd::target_name());
    fmt::print("{:<8} {:<5} {:>12} {:>12} {:>12} {:>16}\n", "device", "kind", "live", "peak",
               "reserved", "compute threads");
    for (Device* device : all) {
      MemoryStats stats = device->memory_stats();
      fmt::print("{:<8} {:<5} {:>12} {:>12} {:>12} {:>16}\n", device->to_string(), device->kind(),
                 bytes_text(stats.live_bytes), bytes_text(stats.peak_bytes),
                 bytes_text(stats.reserved_bytes), device->compute_threads());
    }
    return 0;
  };
}

}  // namespace kiln::cli
