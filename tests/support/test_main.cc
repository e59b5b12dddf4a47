// Shared main for kiln's test binaries.
//
// A binary that dies mid-test (an exception escaping a worker thread, an abort) says which
// test was running and why before it goes. Without this, ctest shows "Subprocess aborted"
// and the start of a long log, and the one line that matters is lost: .ci/run runs the
// tests with GTEST_BRIEF=1, so a crashed binary's output is little more than this line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

namespace {

// Written only by the main thread between tests; read only on the way down.
char current_test[512] = "none (before the first test)";

void write_to_stderr(const char* text) {
  size_t length = std::strlen(text);
  while (length > 0) {
    ssize_t written = ::write(STDERR_FILENO, text, length);
    if (written <= 0) return;
    text += written;
    length -= static_cast<size_t>(written);
  }
}

class RememberCurrentTest : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& info) override {
    std::snprintf(current_test, sizeof current_test, "%s.%s", info.test_suite_name(), info.name());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    std::snprintf(current_test, sizeof current_test, "none (after %s.%s ended)",
                  info.test_suite_name(), info.name());
  }
};

[[noreturn]] void report_terminate() {
  char line[1024];
  const char* what = "not a std::exception";
  std::exception_ptr error = std::current_exception();
  if (!error) what = "no exception in flight (std::terminate called directly)";
  try {
    if (error) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  std::snprintf(line, sizeof line, "\n*** std::terminate during test %s: %s\n", current_test, what);
  write_to_stderr(line);
  std::abort();
}

extern "C" void report_abort(int signal) {
  // Only async-signal-safe calls: the message is assembled from fixed pieces.
  write_to_stderr("\n*** SIGABRT during test ");
  write_to_stderr(current_test);
  write_to_stderr("\n");
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new RememberCurrentTest);
  std::set_terminate(report_terminate);
  // SIGABRT only: the sanitizers report SIGSEGV and friends themselves, better than we could.
  std::signal(SIGABRT, report_abort);
  return RUN_ALL_TESTS();
}
