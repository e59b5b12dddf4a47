// The progress printout: plain lines every log_every steps, and a notice, never silence,
// when a step or an evaluation runs long (issue 43: a 1024 x 1024 convolution step took
// minutes with nothing printed).
#include "train/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace kiln::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// A FILE* whose text the test can read back.
class CapturedStream {
 public:
  CapturedStream() : file_(std::tmpfile()) {}
  ~CapturedStream() { std::fclose(file_); }
  std::FILE* get() { return file_; }
  std::string text() {
    std::fflush(file_);
    std::string out;
    std::rewind(file_);
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file_)) > 0;) out.append(buffer, n);
    std::fseek(file_, 0, SEEK_END);
    return out;
  }

 private:
  std::FILE* file_;
};

StepProgress step(int64_t number) {
  StepProgress p;
  p.step = number;
  p.total_steps = 10;
  p.epoch = 1;
  p.epochs = 1;
  return p;
}

// Waits (at most 10 s, for a loaded machine) until `stream` holds `text`.
bool shows(CapturedStream& stream, const std::string& text) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(5ms)) {
    if (stream.text().find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(ProgressTest, PlainLinesComeEveryLogEverySteps) {
  CapturedStream out;
  {
    Progress progress(Progress::Mode::kLines, 2, out.get(), 1h);
    for (int64_t i = 1; i <= 3; ++i) progress.update(step(i));
    progress.message("epoch 1 done");
  }
  std::string text = out.text();
  EXPECT_THAT(text, HasSubstr("step 2/10  epoch 1/1  loss"));
  EXPECT_THAT(text, Not(HasSubstr("step 1/10")));
  EXPECT_THAT(text, Not(HasSubstr("step 3/10")));
  EXPECT_THAT(text, HasSubstr("epoch 1 done\n"));
}

TEST(ProgressTest, AStepThatRunsLongIsNamedWhileItRuns) {
  CapturedStream out;
  Progress progress(Progress::Mode::kLines, 100, out.get(), 50ms);
  EXPECT_TRUE(shows(out, "still working on step 1 (the first step also compiles the program)"))
      << out.text();
  progress.starting_at(6, 10);  // a resumed run: its first step here compiles too
  EXPECT_TRUE(shows(out, "still working on step 7 of 10 (the first step also compiles"))
      << out.text();
  progress.update(step(3));
  EXPECT_TRUE(shows(out, "still working on step 4 of 10: nothing finished for 0:00\n"))
      << out.text();
  progress.working_on("evaluating epoch 1 on the test set");
  EXPECT_TRUE(shows(out, "still working on evaluating epoch 1 on the test set")) << out.text();
}

TEST(ProgressTest, NoNoticeAfterFinishOrWhenSilent) {
  CapturedStream finished;
  {
    Progress progress(Progress::Mode::kLines, 100, finished.get(), 20ms);
    progress.finish();
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(finished.text(), "");
  CapturedStream silent;
  {
    Progress progress(Progress::Mode::kSilent, 100, silent.get(), 1ms);
    progress.update(step(1));
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(silent.text(), "");
}

}  // namespace
}  // namespace kiln::train
