// The background catalog writer (catalog_recorder.h).
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
    : path_(std::move(path)), busy_timeout_ms_(busy_timeout_ms), worker_([this] { work(); }) {}

CatalogRecorder::~CatalogRecorder() {
  if (!finished_) finish(1s);
}

void CatalogRecorder::push(Op op) {
  bool was_empty = false;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    was_empty = queue_.empty();
    queue_.push_back(std::move(op));
  }
  // Only a worker with nothing queued waits for a record; in a batch window it waits for
  // the window, and waking it for each record would only cost a context switch.
  if (was_empty) wake_.notify_one();
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

size_t CatalogRecorder::apply(std::vector<Op>& ops) {
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
    std::lock_guard lock(mutex_);
    problem_.clear();
  } catch (const std::exception& error) {
    // A catalog that failed to open is opened afresh next time (it may have been replaced).
    if (applied == 0) catalog_.reset();
    std::lock_guard lock(mutex_);
    problem_ = error.what();
  }
  return applied;
}

void CatalogRecorder::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    // Let a batch gather, unless the run is finishing.
    wake_.wait_for(lock, kBatchWindow, [&] { return stopping_ || draining_; });
    std::vector<Op> batch(std::make_move_iterator(queue_.begin()),
                          std::make_move_iterator(queue_.end()));
    queue_.clear();
    applying_ = true;
    lock.unlock();
    size_t applied = apply(batch);
    lock.lock();
    applying_ = false;
    if (applied < batch.size()) {
      // Put back what was not recorded, ahead of what arrived meanwhile, and retry later.
      queue_.insert(queue_.begin(), std::make_move_iterator(batch.begin() + applied),
                    std::make_move_iterator(batch.end()));
      if (stopping_) return;
      wake_.wait_for(lock, kRetryDelay, [&] { return stopping_; });
    }
  }
}

std::string CatalogRecorder::finish(std::chrono::milliseconds max_wait) {
  if (finished_) return {};
  finished_ = true;
  auto deadline = std::chrono::steady_clock::now() + max_wait;
  {
    std::unique_lock lock(mutex_);
    draining_ = true;
    wake_.notify_one();
    // Let the worker drain the queue (it retries on its own) until the deadline.
    while ((!queue_.empty() || applying_) && std::chrono::steady_clock::now() < deadline) {
      lock.unlock();
      std::this_thread::sleep_for(5ms);
      lock.lock();
    }
    stopping_ = true;
  }
  wake_.notify_one();
  worker_.join();
  // The worker stops after its current attempt; anything still queued was not recorded.
  size_t records = 0;
  size_t points = 0;
  for (const Op& op : queue_) {
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
