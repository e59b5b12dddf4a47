// What the run catalog reads from files and command lines it did not write: a run's
// metrics.jsonl through read_metric_points (`kiln runs reindex`, `kiln runs push`), and
// `kiln runs list --filter` text through RunFilter::parse. The first input byte picks which
// (even: metrics, odd: a filter); the rest is the file or the text. Properties: metrics
// either load or fail with a kiln::Error naming metrics.jsonl and a line; every point is a
// train/, eval/ or telemetry/ metric (the three kinds of line that carry series; other
// kinds are events); a filter that parses splits its text exactly into a known field,
// one of the six operators and the value.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_support.h"
#include "track/catalog.h"
#include "train/run_record.h"

namespace {

void check_metrics(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir =
      std::filesystem::path("/dev/shm") / ("kiln-fuzz-run-records-" + std::to_string(::getpid()));
  static bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  kiln::fuzz::InputFile::write_to(dir / "metrics.jsonl", data, size);
  std::vector<kiln::track::MetricPoint> points;
  try {
    points = kiln::train::read_metric_points(dir);
  } catch (const kiln::Error& error) {
    std::string message = error.what();
    if (message.find("metrics.jsonl:") == std::string::npos) {
      kiln::fuzz::finding("a metrics.jsonl error that names no line");
    }
    return;
  }
  for (const auto& point : points) {
    if (!point.key.starts_with("train/") && !point.key.starts_with("eval/") &&
        !point.key.starts_with("telemetry/")) {
      kiln::fuzz::finding("a metric point that is neither train/, eval/ nor telemetry/");
    }
  }
}

void check_filter(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  kiln::track::RunFilter filter;
  if (!kiln::fuzz::parses([&] { filter = kiln::track::RunFilter::parse(text); })) return;
  if (filter.field.empty() || filter.field + filter.op + filter.value != text) {
    kiln::fuzz::finding("RunFilter::parse did not split its text into field, op and value");
  }
  static const std::string ops[] = {"=", "!=", "<", "<=", ">", ">="};
  if (std::find(std::begin(ops), std::end(ops), filter.op) == std::end(ops)) {
    kiln::fuzz::finding("RunFilter::parse gave an unknown operator");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    check_metrics(data + 1, size - 1);
  } else {
    check_filter(data + 1, size - 1);
  }
  return 0;
}
