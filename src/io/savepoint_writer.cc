// The savepoint writer's thread (see savepoint_writer.h).
#include "io/savepoint_writer.h"

#include "base/trace_events.h"

#include <chrono>
#include <exception>

namespace kiln::savepoint {

AsyncWriter::AsyncWriter(std::filesystem::path dir, Retention retention)
    : dir_(std::move(dir)), retention_(retention), thread_([this] { loop(); }) {}

AsyncWriter::~AsyncWriter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void AsyncWriter::start(Snapshot snapshot) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !queued_ && !writing_; });
  queued_ = std::move(snapshot);
  lock.unlock();
  changed_.notify_all();
}

void AsyncWriter::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !queued_ && !writing_; });
}

bool AsyncWriter::busy() const {
  std::lock_guard lock(mutex_);
  return queued_.has_value() || writing_;
}

std::vector<Outcome> AsyncWriter::take_outcomes() {
  std::lock_guard lock(mutex_);
  std::vector<Outcome> taken = std::move(outcomes_);
  outcomes_.clear();
  return taken;
}

void AsyncWriter::loop() {
  trace::set_thread_track(trace::Track::kSavepointWriter);
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return queued_.has_value() || stopping_; });
    if (!queued_) return;  // stopping, nothing left to write
    Snapshot snapshot = std::move(*queued_);
    queued_.reset();
    writing_ = true;
    lock.unlock();
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
    // The copy of the state is released before the trainer may take the next one.
    snapshot = Snapshot{};
    lock.lock();
    writing_ = false;
    outcomes_.push_back(std::move(outcome));
    changed_.notify_all();
  }
}

}  // namespace kiln::savepoint
