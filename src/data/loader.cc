// The loader's ring (loader.h). Batch t lives in slot t % prefetch; a worker takes the
// next ticket only when its slot is free (ticket t - prefetch handed back), so the ring
// bounds the memory; next() hands back the batch it returned before, and takes a ready
// batch without locking.
#include "data/loader.h"

#include <chrono>

#include <fmt/format.h>

#include "base/trace_events.h"
#include "kiln/error.h"

namespace kiln::data {

Loader::Loader(const BatchAssembler& assembler, const LoaderOptions& options,
               const IteratorState& start_state)
    : assembler_(assembler), options_(options), batches_per_epoch_(assembler.batches_per_epoch()) {
  if (options.workers < 1 || options.prefetch < 1) {
    fail(kUnknownSite, fmt::format("loader: workers ({}) and prefetch ({}) must be >= 1",
                                   options.workers, options.prefetch));
  }
  if (batches_per_epoch_ < 1) {
    fail(kUnknownSite,
         "loader: an epoch holds no batch (fewer examples than one batch with "
         "drop_remainder, or none at all)");
  }
  start(start_state);
}

Loader::~Loader() {
  stop();
}

void Loader::start(const IteratorState& state) {
  int64_t size = assembler_.batch_size();
  int64_t length = assembler_.sampler().epoch_length();
  if (state.epoch < 0 || state.position < 0 || state.position % size != 0 ||
      state.position > length) {
    fail(kUnknownSite,
         fmt::format("loader: cannot resume at epoch {} position {}: expected epoch >= 0 and a "
                     "position in [0, {}] that is a multiple of the batch size {}",
                     state.epoch, state.position, length, size),
         "resume from a state that Loader::state() returned with the same batch size");
  }
  start_epoch_ = state.epoch;
  start_index_ = state.position / size;
  slots_ = std::vector<Slot>(static_cast<size_t>(options_.prefetch));
  next_ticket_ = consumer_ticket_ = 0;
  released_.store(0);
  held_ticket_ = -1;
  stopping_ = false;
  for (int i = 0; i < options_.workers; ++i) {
    workers_.emplace_back([this, i] {
      trace::set_thread_track(trace::data_loader_track(i));
      work();
    });
  }
}

void Loader::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

std::pair<int64_t, int64_t> Loader::batch_of(int64_t ticket) const {
  int64_t absolute = start_index_ + ticket;
  return {start_epoch_ + absolute / batches_per_epoch_, absolute % batches_per_epoch_};
}

void Loader::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    // Ticket t may fill slot t % prefetch once ticket t - prefetch was handed back.
    auto can_take = [&] {
      return stopping_ || next_ticket_ < released_.load() + options_.prefetch;
    };
    if (!can_take()) {
      // Announced before the predicate is checked again under the lock, so that next(),
      // which hands a batch back and then reads this count, cannot miss a sleeping worker.
      waiting_workers_.fetch_add(1);
      changed_.wait(lock, can_take);
      waiting_workers_.fetch_sub(1);
    }
    if (stopping_) return;
    int64_t ticket = next_ticket_++;
    lock.unlock();
    Slot& slot = slots_[static_cast<size_t>(ticket % options_.prefetch)];
    auto [epoch, index] = batch_of(ticket);
    slot.error = nullptr;
    try {
      trace::Span span("data", "assemble batch");
      span.arg("epoch", static_cast<double>(epoch));
      span.arg("batch", static_cast<double>(index));
      assembler_.assemble(epoch, index, slot.batch);
    } catch (...) {
      slot.error = std::current_exception();
    }
    lock.lock();
    slot.ready_ticket.store(ticket, std::memory_order_release);
    changed_.notify_all();
  }
}

void Loader::hand_back() {
  if (held_ticket_ < 0) return;
  released_.store(held_ticket_ + 1);
  held_ticket_ = -1;
  if (waiting_workers_.load() > 0) {
    { std::lock_guard lock(mutex_); }
    changed_.notify_all();
  }
}

const HostBatch& Loader::next() {
  auto begin = std::chrono::steady_clock::now();
  Slot& slot = slots_[static_cast<size_t>(consumer_ticket_ % options_.prefetch)];
  auto ready = [&] {
    return slot.ready_ticket.load(std::memory_order_acquire) == consumer_ticket_;
  };
  if (!ready()) {
    trace::Span span("data", "wait for batch");
    ++starved_calls_;
    // With prefetch 1 the batch needs the held one's slot: hand it back first.
    hand_back();
    std::unique_lock lock(mutex_);
    changed_.wait(lock, ready);
  }
  last_wait_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  total_wait_seconds_ += last_wait_seconds_;
  // Only now, after the wait is measured: waking the workers may deschedule this thread,
  // which is the step's time, not the data's.
  hand_back();
  held_ticket_ = consumer_ticket_++;
  if (slot.error) std::rethrow_exception(slot.error);
  return slot.batch;
}

IteratorState Loader::state() const {
  auto [epoch, index] = batch_of(consumer_ticket_);
  return IteratorState{epoch, index * assembler_.batch_size()};
}

void Loader::restore(const IteratorState& state) {
  stop();
  start(state);
}

}  // namespace kiln::data
