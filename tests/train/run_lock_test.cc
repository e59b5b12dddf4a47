// RunLock: one process owns a run directory (issue 43: two `kiln resume`s started together
// both trained the same run).
#include "train/run_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "support/errors.h"
#include "support/scratch_dir.h"

namespace kiln::train {
namespace {

using ::kiln::testing::ScratchDir;
using ::testing::HasSubstr;

TEST(RunLock, ASecondOwnerIsRefusedNamingTheFirst) {
  ScratchDir dir;
  RunLock first = RunLock::acquire(dir.path(), "resume");
  EXPECT_TRUE(first.held());
  // flock locks belong to an open file: a second acquire in this process is refused as
  // one in another process would be.
  std::string message =
      ::kiln::testing::error_of([&] { (void)RunLock::acquire(dir.path(), "resume"); });
  EXPECT_THAT(message,
              HasSubstr("cannot resume '" + dir.path().string() + "': another kiln process (pid " +
                        std::to_string(::getpid()) + ") is training or resuming it"));
  RunLock moved = std::move(first);
  EXPECT_TRUE(moved.held());
  EXPECT_FALSE(first.held());  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_THAT(::kiln::testing::error_of([&] { (void)RunLock::acquire(dir.path(), "train"); }),
              HasSubstr("cannot train"));
}

TEST(RunLock, IsReleasedWithItsOwner) {
  ScratchDir dir;
  { RunLock lock = RunLock::acquire(dir.path(), "resume"); }
  EXPECT_TRUE(RunLock::acquire(dir.path(), "resume").held());
}

TEST(RunLock, NothingToLockIsLeftToTheCallersChecks) {
  ScratchDir dir;
  EXPECT_FALSE(RunLock::acquire(dir.path() / "no-such-run", "resume").held());
}

}  // namespace
}  // namespace kiln::train
