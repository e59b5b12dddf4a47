// The machine's peaks: measured figures are positive and finite, cached per machine, and a
// damaged or unwritable cache costs a measurement, never an error.
#include "profile/machine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/scratch_dir.h"

namespace kiln::profile {
namespace {

using kiln::testing::ScratchDir;

// Points the cache at a scratch directory for the test's lifetime.
class CacheDir {
 public:
  explicit CacheDir(const std::filesystem::path& dir) {
    ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDir() { ::unsetenv("KILN_CACHE_DIR"); }
};

TEST(MachinePeaks, MeasuredFiguresArePositiveAndSayHowTheyWereMeasured) {
  MachinePeaks peaks = measure_machine_peaks(/*quick=*/true);
  EXPECT_TRUE(std::isfinite(peaks.gemm_gflops));
  EXPECT_GT(peaks.gemm_gflops, 0.1);
  EXPECT_TRUE(std::isfinite(peaks.bandwidth_gbs));
  EXPECT_GT(peaks.bandwidth_gbs, 0.1);
  EXPECT_GE(peaks.threads, 1);
  EXPECT_FALSE(peaks.cpu_model.empty());
  EXPECT_NE(peaks.how.find("sgemm 256x256x256"), std::string::npos) << peaks.how;
  MachinePeaks back = MachinePeaks::from_json(peaks.to_json());
  EXPECT_EQ(back.gemm_gflops, peaks.gemm_gflops);
  EXPECT_EQ(back.how, peaks.how);
}

TEST(MachinePeaks, AreCachedPerMachineAndMeasuredAgainOnRequest) {
  ScratchDir dir;
  CacheDir cache(dir.path());
  EXPECT_EQ(cache_dir(), dir.path());
  bool from_cache = true;
  MachinePeaks first = machine_peaks(false, &from_cache, true);
  EXPECT_FALSE(from_cache);
  ASSERT_TRUE(std::filesystem::exists(dir / "machine.json"));
  MachinePeaks second = machine_peaks(false, &from_cache, true);
  EXPECT_TRUE(from_cache);
  EXPECT_EQ(second.gemm_gflops, first.gemm_gflops);  // the same figures, not a new sample
  machine_peaks(true, &from_cache, true);
  EXPECT_FALSE(from_cache);
}

TEST(MachinePeaks, ADamagedCacheIsMeasuredAgain) {
  ScratchDir dir;
  CacheDir cache(dir.path());
  std::ofstream(dir / "machine.json") << "{ not json";
  bool from_cache = true;
  MachinePeaks peaks = machine_peaks(false, &from_cache, true);
  EXPECT_FALSE(from_cache);
  EXPECT_GT(peaks.gemm_gflops, 0);
  EXPECT_TRUE(machine_peaks(false, &from_cache, true).gemm_gflops > 0 && from_cache);
}

TEST(MachinePeaks, AnUnwritableCacheIsNoError) {
  ScratchDir dir;
  std::ofstream(dir / "file") << "x";
  CacheDir cache(dir / "file" / "below");  // a directory under a regular file
  bool from_cache = true;
  EXPECT_GT(machine_peaks(false, &from_cache, true).bandwidth_gbs, 0);
  EXPECT_FALSE(from_cache);
}

}  // namespace
}  // namespace kiln::profile
