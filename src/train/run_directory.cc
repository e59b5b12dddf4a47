// Creating a run directory and keeping its run.json and metrics.jsonl up to date.
#include "train/run_directory.h"

#include <ctime>
#include <system_error>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "io/sha256.h"
#include "kiln/error.h"

namespace kiln::train {
namespace fs = std::filesystem;

namespace {

// The current UTC time formatted with strftime's `format`.
std::string utc_now(const char* format) {
  std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, format, &parts);
  return text;
}

void write_text(const fs::path& path, const std::string& text) {
  io::write_file_atomically(path, text);
}

}  // namespace

std::string utc_timestamp() {
  return utc_now("%Y-%m-%dT%H:%M:%SZ");
}

RunDirectory RunDirectory::create(const fs::path& runs_dir, const std::string& experiment,
                                  const std::string& resolved_config, nlohmann::json run_info) {
  fs::path parent = runs_dir / experiment;
  std::error_code error;
  fs::create_directories(parent, error);
  if (error) {
    fail(kUnknownSite,
         fmt::format("cannot create the run directory {}: {}", parent.string(), error.message()),
         "set experiment.runs_dir to a writable directory");
  }
  std::string config_hash = io::sha256_hex(resolved_config);
  std::string base = fmt::format("{}-{}", utc_now("%Y%m%d-%H%M%S"), config_hash.substr(0, 8));
  // create_directory is the atomic test: two processes never get the same directory.
  std::string run_id = base;
  for (int suffix = 2; !fs::create_directory(parent / run_id, error); ++suffix) {
    if (error) {
      fail(kUnknownSite, fmt::format("cannot create the run directory {}: {}",
                                     (parent / run_id).string(), error.message()));
    }
    run_id = fmt::format("{}-{}", base, suffix);
  }
  run_info["experiment"] = experiment;
  run_info["run_id"] = run_id;
  run_info["config_sha256"] = config_hash;
  run_info["status"] = "running";
  run_info["started_at"] = utc_timestamp();
  RunDirectory run(parent / run_id, run_id, std::move(run_info));
  write_text(run.path_ / "config.toml", resolved_config);
  run.write_info();
  return run;
}

RunDirectory::RunDirectory(fs::path path, std::string run_id, nlohmann::json info)
    : path_(std::move(path)), run_id_(std::move(run_id)), info_(std::move(info)) {
  fs::path metrics_path = path_ / "metrics.jsonl";
  metrics_ = std::fopen(metrics_path.c_str(), "w");
  if (metrics_ == nullptr) {
    fail(kUnknownSite, fmt::format("cannot create {}", metrics_path.string()));
  }
}

RunDirectory::RunDirectory(RunDirectory&& other) noexcept
    : path_(std::move(other.path_)),
      run_id_(std::move(other.run_id_)),
      info_(std::move(other.info_)),
      metrics_(other.metrics_) {
  other.metrics_ = nullptr;
}

RunDirectory::~RunDirectory() {
  if (metrics_ != nullptr) std::fclose(metrics_);
}

void RunDirectory::append_metrics(const nlohmann::json& record) {
  std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), metrics_) != line.size() ||
      std::fflush(metrics_) != 0) {
    fail(kUnknownSite, fmt::format("cannot write {}", (path_ / "metrics.jsonl").string()));
  }
}

void RunDirectory::write_info() {
  write_text(path_ / "run.json", info_.dump(2) + "\n");
}

void RunDirectory::finish_completed() {
  info_["status"] = "completed";
  info_["finished_at"] = utc_timestamp();
  write_info();
}

void RunDirectory::finish_failed(const std::string& error) {
  info_["status"] = "failed";
  info_["error"] = error;
  info_["finished_at"] = utc_timestamp();
  write_info();
}

}  // namespace kiln::train
