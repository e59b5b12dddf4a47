// Completion of one queued kernel: pending, done, or failed with the error to rethrow at
// the next synchronization.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "base/spin_wait.h"
#include "kiln/error.h"

namespace kiln {

class Completion {
 public:
  bool ready() const { return state_.load(std::memory_order_acquire) != kPending; }
  void wait() const {
    spin_until([this] { return ready(); });
    while (state_.load(std::memory_order_acquire) == kPending) {
      state_.wait(kPending, std::memory_order_acquire);
    }
  }
  void set_done() { finish(kDone); }
  void set_failed(std::shared_ptr<const Error> error) {
    error_ = std::move(error);
    finish(kFailed);
  }
  // Valid once ready(); null when the kernel succeeded.
  const std::shared_ptr<const Error>& error() const { return error_; }

  static std::shared_ptr<Completion> done() {
    auto completion = std::make_shared<Completion>();
    completion->set_done();
    return completion;
  }

 private:
  static constexpr uint32_t kPending = 0, kDone = 1, kFailed = 2;
  void finish(uint32_t state) {
    state_.store(state, std::memory_order_release);
    state_.notify_all();
  }
  std::atomic<uint32_t> state_{kPending};
  std::shared_ptr<const Error> error_;
};

}  // namespace kiln
