// The shared compute pool: every chunk runs exactly once, callers may nest and run
// concurrently, and exceptions reach the caller.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/compute_pool.h"
#include "kiln/error.h"

namespace kiln {
namespace {

TEST(ComputePool, RunsEveryChunkOnce) {
  for (int threads : {1, 2, 4}) {
    ComputePool pool(threads);
    std::vector<std::atomic<int>> hits(1000);
    pool.parallel_for(1000, [&](int64_t chunk) { hits[static_cast<size_t>(chunk)]++; });
    for (auto& hit : hits) EXPECT_EQ(hit.load(), 1);
    pool.parallel_for(0, [&](int64_t) { FAIL() << "no chunks expected"; });
  }
}

TEST(ComputePool, NestedAndConcurrentCallersFinish) {
  ComputePool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int caller = 0; caller < 4; ++caller) {
    callers.emplace_back([&] {
      for (int repeat = 0; repeat < 20; ++repeat) {
        pool.parallel_for(
            8, [&](int64_t) { pool.parallel_for(8, [&](int64_t inner) { total += inner; }); });
      }
    });
  }
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(total.load(), 4 * 20 * 8 * 28);
}

TEST(ComputePool, ExceptionReachesCallerAfterAllChunks) {
  ComputePool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(64,
                                 [&](int64_t chunk) {
                                   ran++;
                                   if (chunk == 5) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 64);
}

TEST(ComputePool, ChunkCountDependsOnlyOnSizes) {
  EXPECT_EQ(chunk_count(0, 100), 0);
  EXPECT_EQ(chunk_count(50, 100), 1);
  EXPECT_EQ(chunk_count(1000, 100), 10);
  EXPECT_EQ(chunk_count(1'000'000'000, 100), 256);
}

TEST(Error, CarriesSiteAndHint) {
  try {
    fail(CallSite("/home/me/project/src/model.cc", 42), "add: shapes differ", "use reshape");
    FAIL();
  } catch (const Error& error) {
    std::string text = error.what();
    EXPECT_NE(text.find("add: shapes differ"), std::string::npos);
    EXPECT_NE(text.find("at src/model.cc:42"), std::string::npos);
    EXPECT_NE(text.find("HINT: use reshape"), std::string::npos);
    EXPECT_EQ(error.hint(), "use reshape");
  }
}

TEST(Error, InternalCheckNamesTheCondition) {
  try {
    KILN_CHECK(1 + 1 == 3, "arithmetic is {}", "broken");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("1 + 1 == 3"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("arithmetic is broken"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
