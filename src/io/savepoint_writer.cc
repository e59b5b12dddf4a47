// The background savepoint writer (see savepoint_writer.h), on a BackgroundWorker.
#include "io/savepoint_writer.h"

#include "base/trace_events.h"

#include <chrono>
#include <exception>
#include <utility>

namespace kiln::savepoint {

AsyncWriter::AsyncWriter(std::filesystem::path dir, Retention retention)
    : dir_(std::move(dir)),
      retention_(retention),
      worker_([this](std::vector<Snapshot>& snapshots) { return save(snapshots); },
              {.capacity = 1}) {}

AsyncWriter::~AsyncWriter() = default;  // the worker finishes the save in flight

void AsyncWriter::start(Snapshot snapshot) {
  worker_.push(std::move(snapshot));
}

void AsyncWriter::wait() {
  worker_.flush();
}

bool AsyncWriter::busy() const {
  return worker_.busy();
}

std::vector<Outcome> AsyncWriter::take_outcomes() {
  std::lock_guard lock(outcomes_mutex_);
  return std::exchange(outcomes_, {});
}

BatchProgress AsyncWriter::save(std::vector<Snapshot>& snapshots) {
  trace::set_thread_track(trace::Track::kSavepointWriter);
  for (const Snapshot& snapshot : snapshots) {
    auto began = std::chrono::steady_clock::now();
    Outcome outcome;
    outcome.step = snapshot.step;
    try {
      trace::Span span("savepoint", "write savepoint");
      span.arg("step", static_cast<double>(snapshot.step));
      outcome.path = write(dir_, snapshot);
      outcome.removed_steps = apply_retention(dir_, retention_);
    } catch (const std::exception& error) {
      outcome.error = error.what();
    }
    outcome.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    std::lock_guard lock(outcomes_mutex_);
    outcomes_.push_back(std::move(outcome));
  }
  // The worker releases the copies of the state before the trainer may take the next one.
  return {snapshots.size()};
}

}  // namespace kiln::savepoint
