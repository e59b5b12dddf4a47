// Creating a run directory and keeping its run.json and metrics.jsonl up to date.
#include "train/run_directory.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "base/host_name.h"
#include "base/wall_clock.h"
#include "io/atomic_file.h"
#include "io/bounded_read.h"
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

// The fields of /proc/<pid>/stat after the command name's closing parenthesis (the name
// may hold spaces and parentheses), from field 3 (the state) on; empty when unknown.
std::string process_stat_fields(int64_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 > text.size()) return {};
  return text.substr(close + 2);
}

// A process that has exited but was not reaped yet: its id still answers kill(pid, 0).
// Under mpirun a rank killed with its job lingers like this until someone reaps it.
bool process_is_zombie(int64_t pid) {
  std::string fields = process_stat_fields(pid);
  return !fields.empty() && (fields[0] == 'Z' || fields[0] == 'X');
}

// A process's start time (clock ticks since boot, field 22 of /proc/<pid>/stat), which
// tells a live process from a later one that reused its id; -1 when unknown.
int64_t process_start_ticks(int64_t pid) {
  std::string text = process_stat_fields(pid);
  if (text.empty()) return -1;
  std::istringstream fields(text);
  std::string field;
  // starttime is the 20th field after the command name's closing parenthesis.
  for (int i = 0; i < 20 && fields >> field; ++i) {
  }
  try {
    return std::stoll(field);
  } catch (...) {
    return -1;
  }
}

// Whether the process that wrote a "running" run.json is gone. Only a run of this host can
// be judged; one without a pid (older kiln) is left alone.
bool owner_is_gone(const track::RunInfo& info, const std::string& host) {
  if (!info.pid || info.host != host) return false;
  int64_t pid = *info.pid;
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  if (process_is_zombie(pid)) return true;
  int64_t recorded = info.pid_start_ticks.value_or(-1);
  int64_t now = process_start_ticks(pid);
  return recorded >= 0 && now >= 0 && recorded != now;  // the id was reused
}

}  // namespace

std::string utc_timestamp() {
  return utc_now("%Y-%m-%dT%H:%M:%SZ");
}

std::vector<fs::path> mark_crashed_runs(const fs::path& experiment_dir) {
  std::vector<fs::path> crashed;
  std::error_code error;
  std::string host = host_name();
  for (const fs::directory_entry& entry : fs::directory_iterator(experiment_dir, error)) {
    fs::path run_json = entry.path() / "run.json";
    if (!entry.is_directory(error) || !fs::exists(run_json, error)) continue;
    track::RunInfo info;
    try {
      info = track::parse_run_info(io::read_regular_file(run_json, io::kMaxRecordBytes),
                                   run_json.string());
    } catch (const std::exception&) {
      continue;  // not ours to judge
    }
    if (info.status != "running") continue;
    if (!owner_is_gone(info, host)) continue;
    info.status = "crashed";
    info.error = fmt::format(
        "the process (pid {} on {}) ended without recording a final state: it was killed "
        "(SIGKILL, out of memory) or the machine stopped",
        *info.pid, host);
    info.crash_detected_at = utc_timestamp();
    try {
      write_text(run_json, track::run_info_text(info) + "\n");
      crashed.push_back(entry.path());
    } catch (const std::exception&) {
      // A read-only or full disk: the run stays "running", as before.
    }
  }
  std::sort(crashed.begin(), crashed.end());
  return crashed;
}

RunDirectory RunDirectory::create(const fs::path& runs_dir, const std::string& experiment,
                                  const std::string& resolved_config,
                                  const std::string& config_sha256, track::RunInfo run_info) {
  fs::path parent = runs_dir / experiment;
  std::error_code error;
  fs::create_directories(parent, error);
  if (error) {
    fail(kUnknownSite,
         fmt::format("cannot create the run directory {}: {}", parent.string(), error.message()),
         "set experiment.runs_dir to a writable directory");
  }
  std::vector<fs::path> crashed = mark_crashed_runs(parent);
  std::string base = fmt::format("{}-{}", utc_now("%Y%m%d-%H%M%S"), config_sha256.substr(0, 8));
  // create_directory is the atomic test: two processes never get the same directory.
  std::string run_id = base;
  for (int suffix = 2; !fs::create_directory(parent / run_id, error); ++suffix) {
    if (error) {
      fail(kUnknownSite, fmt::format("cannot create the run directory {}: {}",
                                     (parent / run_id).string(), error.message()));
    }
    run_id = fmt::format("{}-{}", base, suffix);
  }
  fs::path path = parent / run_id;
  // Before the first write: a `kiln resume` of this directory started now waits its turn.
  RunLock lock = RunLock::acquire(path, "train");
  run_info.experiment = experiment;
  run_info.run_id = run_id;
  run_info.config_sha256 = config_sha256;
  run_info.status = "running";
  run_info.started_at = utc_timestamp();
  run_info.pid = static_cast<int64_t>(::getpid());
  run_info.host = host_name();
  run_info.pid_start_ticks = process_start_ticks(::getpid());
  // run.json first: once the directory exists, it says what the run is, even when the disk
  // fills up before anything else fits.
  try {
    write_text(path / "run.json", track::run_info_text(run_info) + "\n");
  } catch (const std::exception&) {
    fs::remove_all(path, error);  // an empty directory without a record helps no one
    throw;
  }
  RunDirectory run(path, run_id, std::move(run_info));
  run.lock_ = std::move(lock);
  run.crashed_runs_ = std::move(crashed);
  try {
    write_text(run.path_ / "config.toml", resolved_config);
    run.open_metrics("w", 0);
  } catch (const std::exception& failure) {
    (void)run.finish_failed(failure.what());
    throw;
  }
  return run;
}

std::string final_weights_problem(const fs::path& run_dir, const track::RunInfo& info) {
  fs::path params = run_dir / "params.safetensors";
  std::error_code error;
  if (!fs::is_regular_file(params, error)) return "params.safetensors is missing";
  const std::string& recorded = info.params_sha256;
  if (std::string actual = io::sha256_file(params); actual != recorded) {
    return fmt::format("the SHA-256 of params.safetensors is {}, run.json records {}", actual,
                       recorded.empty() ? "none" : recorded);
  }
  return "";
}

bool run_may_be_running(const track::RunInfo& info) {
  return info.status == "running" && !owner_is_gone(info, host_name());
}

RunDirectory RunDirectory::reopen(const fs::path& path, track::RunInfo run_info,
                                  int64_t metrics_lines) {
  fs::path metrics_path = path / "metrics.jsonl";
  std::string kept;
  int64_t lines = 0;
  {
    std::istringstream in(
        io::read_regular_file_if_present(metrics_path, io::kMaxMetricsBytes).value_or(""));
    for (std::string line; lines < metrics_lines && std::getline(in, line); ++lines) {
      kept += line + "\n";
    }
  }
  if (lines < metrics_lines) {
    fail(kUnknownSite, fmt::format("cannot resume: {} has {} lines, the savepoint recorded {} "
                                   "(was it edited or truncated?)",
                                   metrics_path.string(), lines, metrics_lines));
  }
  write_text(metrics_path, kept);
  run_info.status = "running";
  run_info.pid = static_cast<int64_t>(::getpid());
  run_info.host = host_name();
  run_info.pid_start_ticks = process_start_ticks(::getpid());
  run_info.error.clear();
  run_info.signal.clear();
  run_info.finished_at.clear();
  run_info.crash_detected_at.clear();
  std::string run_id = run_info.run_id.empty() ? path.filename().string() : run_info.run_id;
  RunDirectory run(path, run_id, std::move(run_info));
  run.write_info();
  run.open_metrics("a", lines);
  return run;
}

RunDirectory::RunDirectory(fs::path path, std::string run_id, track::RunInfo info)
    : path_(std::move(path)), run_id_(std::move(run_id)), info_(std::move(info)) {}

void RunDirectory::open_metrics(const char* mode, int64_t lines) {
  fs::path metrics_path = path_ / "metrics.jsonl";
  std::FILE* file = std::fopen(metrics_path.c_str(), mode);
  if (file == nullptr) {
    fail(kUnknownSite, fmt::format("cannot {} {}: {}", mode[0] == 'w' ? "create" : "open",
                                   metrics_path.string(), std::strerror(errno)));
  }
  metrics_ = std::make_unique<MetricsLog>(metrics_path, file, lines);
}

RunDirectory RunDirectory::follower(const fs::path& path, track::RunInfo run_info,
                                    int64_t metrics_lines) {
  RunDirectory run(path, path.filename().string(), std::move(run_info));
  run.writes_ = false;
  run.follower_lines_ = metrics_lines;
  return run;
}

RunDirectory::RunDirectory(RunDirectory&& other) noexcept
    : lock_(std::move(other.lock_)),
      path_(std::move(other.path_)),
      run_id_(std::move(other.run_id_)),
      info_(std::move(other.info_)),
      metrics_(std::move(other.metrics_)),
      crashed_runs_(std::move(other.crashed_runs_)),
      observer_(other.observer_),
      writes_(other.writes_),
      follower_lines_(other.follower_lines_) {}

void RunDirectory::observe(RunObserver* observer) {
  if (!writes_) return;
  observer_ = observer;
  if (observer_) observer_->info_written(path_, info_);
  metrics_->observe(observer);
}

// The metrics writer finishes its queue before the file closes.
RunDirectory::~RunDirectory() = default;

void RunDirectory::append_metrics(track::MetricsLine line) {
  if (!writes_) {
    ++follower_lines_;
    return;
  }
  line.time = std::round(unix_seconds_now() * 1e3) / 1e3;
  metrics_->append(std::move(line));
}

void RunDirectory::write_info() {
  if (!writes_) return;
  if (metrics_) metrics_->flush();
  write_run_json();
}

void RunDirectory::write_run_json() {
  std::string text = track::run_info_text(info_) + "\n";
  try {
    write_text(path_ / "run.json", text);
  } catch (const std::exception&) {
    // A full disk has no room for the temporary; the existing run.json's blocks still take
    // the new record, which is what matters most at the end of a run.
    io::overwrite_file_in_place(path_ / "run.json", text);
  }
  if (observer_) observer_->info_written(path_, info_);
}

void RunDirectory::finish_completed() {
  // write_info writes the queued metrics first: a line that cannot be written throws
  // there, and the run is recorded as failed instead.
  info_.status = "completed";
  info_.finished_at = utc_timestamp();
  write_info();
}

std::string RunDirectory::finish_failed(const std::string& error) noexcept {
  info_.status = "failed";
  info_.error = error;
  return finish_unfinished();
}

std::string RunDirectory::finish_interrupted(const std::string& signal_name,
                                             int64_t steps) noexcept {
  info_.status = "interrupted";
  info_.signal = signal_name;
  info_.steps = steps;
  return finish_unfinished();
}

std::string RunDirectory::finish_unfinished() noexcept {
  if (!writes_) return "";
  try {
    // The lines that can still be written go first; one that cannot is already part of
    // the error being recorded, or matters less than recording it.
    if (metrics_) metrics_->flush();
  } catch (const std::exception&) {
  }
  try {
    info_.finished_at = utc_timestamp();
    write_run_json();
    return "";
  } catch (const std::exception& error) {
    return error.what();
  }
}

}  // namespace kiln::train
