// The background worker behind the metrics, catalog and savepoint writers: items reach the
// handler in order and in batches, flush() waits for the batch in hand, a handler's error
// is thrown once on the producer's thread, a full queue makes push() wait, unhandled items
// are retried ahead of newer ones, hurry() ends a batching window, drain() gives up at its
// deadline (interrupting a handler still busy) and says what was left, and destruction
// finishes the work in hand. Also run under TSan (.ci/run).
#include "base/background_worker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kiln {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the handler was given, batch by batch, readable from the test's thread.
class BatchLog {
 public:
  void add(const std::vector<int>& batch) {
    std::lock_guard lock(mutex_);
    batches_.push_back(batch);
    threads_.push_back(std::this_thread::get_id());
  }
  std::vector<std::vector<int>> batches() const {
    std::lock_guard lock(mutex_);
    return batches_;
  }
  std::vector<int> items() const {
    std::vector<int> all;
    for (const std::vector<int>& batch : batches())
      all.insert(all.end(), batch.begin(), batch.end());
    return all;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::vector<int>> batches_;
  std::vector<std::thread::id> threads_;
};

// Holds the handler inside its batch until opened, so that a test knows what is in hand.
class HandlerGate {
 public:
  void pass() {
    std::unique_lock lock(mutex_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  void wait_for_handler() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return waiting_ > 0; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

std::vector<int> one_to(int n) {
  std::vector<int> items;
  for (int i = 1; i <= n; ++i) items.push_back(i);
  return items;
}

TEST(BackgroundWorker, HandsOverEveryItemInOrderOnItsOwnThread) {
  BatchLog log;
  BackgroundWorker<int> worker([&](std::vector<int>& batch) {
    log.add(batch);
    return BatchProgress{batch.size()};
  });
  for (int i = 1; i <= 1000; ++i) worker.push(i);
  worker.flush();
  EXPECT_EQ(log.items(), one_to(1000));
  for (std::thread::id id : log.threads()) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(BackgroundWorker, TheNextBatchHoldsEverythingQueuedMeanwhile) {
  BatchLog log;
  HandlerGate gate;
  BackgroundWorker<int> worker([&](std::vector<int>& batch) {
    if (batch.front() == 1) gate.pass();
    log.add(batch);
    return BatchProgress{batch.size()};
  });
  worker.push(1);
  gate.wait_for_handler();
  for (int i = 2; i <= 5; ++i) worker.push(i);
  gate.open();
  worker.flush();
  EXPECT_EQ(log.batches(), (std::vector<std::vector<int>>{{1}, {2, 3, 4, 5}}));
}

TEST(BackgroundWorker, FlushEndsTheBatchingWindow) {
  BatchLog log;
  // A window far longer than the test: only flush() can end it.
  BackgroundWorker<int> worker(
      [&](std::vector<int>& batch) {
        log.add(batch);
        return BatchProgress{batch.size()};
      },
      {.batch_window = std::chrono::minutes(10)});
  for (int i = 1; i <= 3; ++i) worker.push(i);
  auto start = Clock::now();
  worker.flush();
  EXPECT_LT(Clock::now() - start, 60s);
  EXPECT_EQ(log.batches(), (std::vector<std::vector<int>>{{1, 2, 3}}));
}

TEST(BackgroundWorker, AReadyBatchIsHandledWithoutWaitingForTheWindow) {
  std::atomic<int> handled{0};
  BackgroundWorker<int> worker(
      [&](std::vector<int>& batch) {
        handled += static_cast<int>(batch.size());
        return BatchProgress{batch.size()};
      },
      {.batch_window = std::chrono::minutes(10), .batch_ready = 4});
  for (int i = 1; i <= 4; ++i) worker.push(i);
  auto deadline = Clock::now() + 60s;
  while (handled < 4 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(handled, 4);
  worker.push(5);  // alone in its window
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(handled, 4);
  EXPECT_TRUE(worker.busy());
}

TEST(BackgroundWorker, FlushWaitsForTheBatchInHand) {
  std::atomic<bool> done{false};
  BackgroundWorker<int> worker([&](std::vector<int>& batch) {
    std::this_thread::sleep_for(50ms);
    done = true;
    return BatchProgress{batch.size()};
  });
  worker.push(1);
  worker.flush();
  EXPECT_TRUE(done);
  EXPECT_FALSE(worker.busy());
}

TEST(BackgroundWorker, AHandlersErrorIsThrownOnceOnTheProducersThread) {
  BatchLog log;
  BackgroundWorker<int> worker([&](std::vector<int>& batch) {
    if (batch.front() == 2) throw std::runtime_error("disk full at 2");
    log.add(batch);
    return BatchProgress{batch.size()};
  });
  worker.push(1);
  worker.flush();
  worker.push(2);
  try {
    worker.flush();
    ADD_FAILURE() << "flush() did not throw the handler's error";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "disk full at 2");
  }
  EXPECT_NO_THROW(worker.flush());  // once
  worker.push(3);
  worker.flush();
  // The failed batch is lost, the ones around it are not.
  EXPECT_EQ(log.items(), (std::vector<int>{1, 3}));
}

TEST(BackgroundWorker, PushThrowsTheErrorWithoutQueueingItsItem) {
  BatchLog log;
  BackgroundWorker<int> worker([&](std::vector<int>& batch) {
    if (batch.front() == 1) throw std::runtime_error("failed");
    log.add(batch);
    return BatchProgress{batch.size()};
  });
  worker.push(1);
  auto deadline = Clock::now() + 60s;
  while (worker.busy() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_THROW(worker.push(2), std::runtime_error);
  worker.push(3);
  worker.flush();
  EXPECT_EQ(log.items(), std::vector<int>{3});
}

TEST(BackgroundWorker, PushWaitsForRoomInAFullQueue) {
  BatchLog log;
  HandlerGate gate;
  // Capacity 2: one item in the handler's hands and one queued.
  BackgroundWorker<int> worker(
      [&](std::vector<int>& batch) {
        if (batch.front() == 1) gate.pass();
        log.add(batch);
        return BatchProgress{batch.size()};
      },
      {.capacity = 2});
  worker.push(1);
  gate.wait_for_handler();
  worker.push(2);
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    worker.push(3);
    pushed = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(pushed) << "push() did not wait for room";
  gate.open();
  producer.join();
  worker.flush();
  EXPECT_TRUE(pushed);
  EXPECT_EQ(log.items(), one_to(3));
}

TEST(BackgroundWorker, UnhandledItemsComeBackAfterTheDelayAheadOfNewerOnes) {
  BatchLog log;
  std::vector<Clock::time_point> calls;  // the handler's alone until flush() returns
  HandlerGate gate;
  // The first batch is 1-5 (the window waits for five items), and 6 arrives while it is in
  // hand. Two items a call, then a pause, as a database that is busy might allow.
  BackgroundWorker<int> worker(
      [&](std::vector<int>& batch) {
        if (calls.empty()) gate.pass();
        calls.push_back(Clock::now());
        std::vector<int> done(batch.begin(), batch.begin() + std::min<size_t>(2, batch.size()));
        log.add(done);
        return BatchProgress{done.size(), 20ms};
      },
      {.batch_window = std::chrono::minutes(10), .batch_ready = 5});
  for (int i = 1; i <= 5; ++i) worker.push(i);
  gate.wait_for_handler();
  worker.push(6);  // arrives while 1-5 are in hand
  gate.open();
  worker.flush();
  EXPECT_EQ(log.batches(), (std::vector<std::vector<int>>{{1, 2}, {3, 4}, {5, 6}}));
  ASSERT_EQ(calls.size(), 3u);
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GE(calls[i] - calls[i - 1], 20ms);
}

TEST(BackgroundWorker, DrainGivesUpAtTheDeadlineAndReturnsWhatWasLeft) {
  std::atomic<int> attempts{0};
  // Never gets anything done, as a catalog that stays locked.
  BackgroundWorker<int> worker([&](std::vector<int>&) {
    ++attempts;
    return BatchProgress{0, 10ms};
  });
  for (int i = 1; i <= 3; ++i) worker.push(i);
  auto start = Clock::now();
  std::vector<int> left = worker.drain(start + 200ms);
  auto waited = Clock::now() - start;
  EXPECT_EQ(left, one_to(3));
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 30s);  // generous: this checks that it gives up, not how fast
  EXPECT_GT(attempts, 1) << "it retried until the deadline";
  EXPECT_FALSE(worker.push(4)) << "a drained worker takes nothing more";
  EXPECT_NO_THROW(worker.flush());
  EXPECT_TRUE(worker.drain().empty());
}

TEST(BackgroundWorker, DrainEndsTheWindowAndHandlesEverythingBeforeItsDeadline) {
  BatchLog log;
  BackgroundWorker<int> worker(
      [&](std::vector<int>& batch) {
        log.add(batch);
        return BatchProgress{batch.size()};
      },
      {.batch_window = std::chrono::minutes(10)});
  for (int i = 1; i <= 3; ++i) worker.push(i);
  EXPECT_TRUE(worker.drain(Clock::now() + 60s).empty());
  EXPECT_EQ(log.items(), one_to(3));
}

TEST(BackgroundWorker, HurryEndsTheBatchingWindowOnce) {
  std::atomic<int> handled{0};
  BackgroundWorker<int> worker(
      [&](std::vector<int>& batch) {
        handled += static_cast<int>(batch.size());
        return BatchProgress{batch.size()};
      },
      {.batch_window = std::chrono::minutes(10)});
  worker.push(1);
  worker.hurry();
  auto deadline = Clock::now() + 60s;
  while (handled < 1 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(handled, 1);
  worker.push(2);  // the next window is a whole one again
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(handled, 1);
  EXPECT_TRUE(worker.busy());
}

TEST(BackgroundWorker, AHandlerThatHurriesItsRetryWaitsForTheDelayAlone) {
  std::atomic<BackgroundWorker<int>*> self{nullptr};
  std::vector<Clock::time_point> calls;  // the handler's alone until flush() returns
  BatchLog log;
  BackgroundWorker<int> worker(
      [&](std::vector<int>& batch) {
        calls.push_back(Clock::now());
        if (calls.size() == 1) {
          self.load()->hurry();
          return BatchProgress{0, 20ms};
        }
        log.add(batch);
        return BatchProgress{batch.size()};
      },
      {.batch_window = std::chrono::minutes(10)});
  self = &worker;
  worker.push(1);
  worker.hurry();
  auto deadline = Clock::now() + 60s;
  while (log.items().empty() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(log.items(), std::vector<int>{1}) << "the retry waited for the window";
  worker.flush();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_GE(calls[1] - calls[0], 20ms);
}

TEST(BackgroundWorker, DrainInterruptsAHandlerStillBusyAtItsDeadline) {
  HandlerGate gate;
  std::atomic<int> interrupts{0};
  BackgroundWorker<int> worker([&](std::vector<int>&) {
    gate.pass();  // as a request that would outlast the deadline unless cancelled
    return BatchProgress{0};
  });
  worker.push(1);
  worker.push(2);
  gate.wait_for_handler();
  auto start = Clock::now();
  std::vector<int> left = worker.drain(start + 100ms, [&] {
    ++interrupts;
    gate.open();
  });
  EXPECT_EQ(left, (std::vector<int>{1, 2}));
  EXPECT_EQ(interrupts, 1);
  EXPECT_GE(Clock::now() - start, 100ms);
}

TEST(BackgroundWorker, DrainDoesNotInterruptAWorkerDoneInTime) {
  std::atomic<int> interrupts{0};
  BackgroundWorker<int> worker([](std::vector<int>& batch) { return BatchProgress{batch.size()}; });
  worker.push(1);
  EXPECT_TRUE(worker.drain(Clock::now() + 60s, [&] { ++interrupts; }).empty());
  EXPECT_EQ(interrupts, 0);
}

TEST(BackgroundWorker, DestructionWhileBusyFinishesEverythingQueued) {
  BatchLog log;
  HandlerGate gate;
  std::thread opener;
  {
    BackgroundWorker<int> worker([&](std::vector<int>& batch) {
      if (batch.front() == 1) gate.pass();
      log.add(batch);
      return BatchProgress{batch.size()};
    });
    worker.push(1);
    gate.wait_for_handler();
    for (int i = 2; i <= 100; ++i) worker.push(i);
    // The batch in hand finishes only after the destructor has begun.
    opener = std::thread([&] {
      std::this_thread::sleep_for(50ms);
      gate.open();
    });
  }
  opener.join();
  EXPECT_EQ(log.items(), one_to(100));
}

TEST(BackgroundWorker, AnErrorNobodyFlushedDoesNotEscapeTheDestructor) {
  BackgroundWorker<int> worker(
      [](std::vector<int>&) -> BatchProgress { throw std::runtime_error("lost at shutdown"); });
  worker.push(1);
}

}  // namespace
}  // namespace kiln
