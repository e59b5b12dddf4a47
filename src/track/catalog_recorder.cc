// The background catalog writer (catalog_recorder.h), on a BackgroundWorker.
#include "track/catalog_recorder.h"

#include <fmt/format.h>

namespace kiln::track {
namespace {

using namespace std::chrono_literals;

// How long the worker lets records accumulate before a commit: one transaction per half
// second costs nothing beside a training step, one per record would.
constexpr auto kBatchWindow = 500ms;
// How long it waits after a failure before trying again.
constexpr auto kRetryDelay = 1s;

}  // namespace

CatalogRecorder::CatalogRecorder(std::filesystem::path path, int busy_timeout_ms)
    : path_(std::move(path)),
      busy_timeout_ms_(busy_timeout_ms),
      worker_([this](std::vector<Op>& ops) { return apply(ops); }, {.batch_window = kBatchWindow}) {
}

CatalogRecorder::~CatalogRecorder() {
  if (!finished_) finish(1s);
}

void CatalogRecorder::push(Op op) {
  // Dropped once finish() has stopped the worker: the run reports what it had by then.
  worker_.push(std::move(op));
}

void CatalogRecorder::record_run(RunRecord run) {
  push(std::move(run));
}

void CatalogRecorder::add_metrics(std::string run_key, std::vector<MetricPoint> points) {
  push(Metrics{std::move(run_key), std::move(points), false});
}

void CatalogRecorder::replace_metrics(std::string run_key, std::vector<MetricPoint> points) {
  push(Metrics{std::move(run_key), std::move(points), true});
}

BatchProgress CatalogRecorder::apply(std::vector<Op>& ops) {
  size_t applied = 0;
  try {
    if (!catalog_) catalog_.emplace(path_, SqliteDb::Mode::kReadWrite, busy_timeout_ms_);
    for (Op& op : ops) {
      if (auto* run = std::get_if<RunRecord>(&op)) {
        catalog_->record_run(*run);
      } else {
        auto& metrics = std::get<Metrics>(op);
        if (metrics.replace) {
          catalog_->replace_metrics(metrics.run_key, metrics.points);
        } else {
          catalog_->add_metrics(metrics.run_key, metrics.points);
        }
      }
      ++applied;
    }
    problem_.clear();
  } catch (const std::exception& error) {
    // A catalog that failed to open is opened afresh next time (it may have been replaced).
    if (applied == 0) catalog_.reset();
    problem_ = error.what();
  }
  return {applied, kRetryDelay};
}

std::string CatalogRecorder::finish(std::chrono::milliseconds max_wait) {
  if (finished_) return {};
  finished_ = true;
  // The worker retries on its own until the deadline, then stops after its current attempt;
  // what it gives back was not recorded.
  std::vector<Op> left = worker_.drain(std::chrono::steady_clock::now() + max_wait);
  size_t records = 0;
  size_t points = 0;
  for (const Op& op : left) {
    if (const auto* metrics = std::get_if<Metrics>(&op)) {
      points += metrics->points.size();
    } else {
      ++records;
    }
  }
  if (records == 0 && points == 0) return {};
  return fmt::format(
      "{}; {} run record(s) and {} metric point(s) not recorded",
      problem_.empty() ? "run catalog " + path_.string() + ": not reached in time" : problem_,
      records, points);
}

}  // namespace kiln::track
