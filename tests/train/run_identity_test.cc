// The run identity (train/run_identity.h): what `kiln resume` and the ranks of a job compare,
// as a typed record that a savepoint's manifest and the ranks' exchange carry as JSON text.
#include "train/run_identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/sha256.h"

namespace kiln::train {
namespace {

using ::testing::ElementsAre;

const char* const kConfig = "[train]\nepochs = 2  # passes\nbatch_size = 64\n";

TEST(RunIdentity, TravelsAsJsonTextAndBack) {
  RunIdentity identity = run_identity(kConfig, "d474", "fast");
  EXPECT_EQ(identity.config_sha256, io::sha256_hex(kConfig));
  EXPECT_EQ(identity.kiln_version, kKilnVersion);
  std::string text = identity_json_text(identity);
  RunIdentity back = parse_identity(text);
  EXPECT_EQ(back.config, identity.config);
  EXPECT_EQ(back.config_sha256, identity.config_sha256);
  EXPECT_EQ(back.data_sha256, "d474");
  EXPECT_EQ(back.kernels, "fast");
  EXPECT_TRUE(identity_differences(identity, back).empty());
  // run.json's record has everything but the config text.
  RunIdentity recorded = RunIdentity::from_record(identity.record());
  EXPECT_EQ(recorded.config, "");
  EXPECT_TRUE(identity_differences(recorded, identity).empty());
}

TEST(RunIdentity, DifferencesAreNamedKeyByKey) {
  RunIdentity saved = run_identity(kConfig, "d474", "fast");
  RunIdentity now = run_identity("[train]\nepochs = 3\nbatch_size = 64\nseed = 1\n", "e585", "ref");
  EXPECT_THAT(identity_differences(saved, now),
              ElementsAre("config train.epochs: 2 -> 3", "config train.seed: (absent) -> 1",
                          "data_sha256: d474 -> e585", "kernels: fast -> ref"));
}

TEST(RunIdentity, WhatAnOlderRecordLacksReadsAsNone) {
  // A savepoint of an older kiln: no kernels key, a number where text belongs.
  RunIdentity old = parse_identity(R"({"config": "", "config_sha256": "x", "data_sha256": 7})");
  EXPECT_EQ(old.kernels, "");
  EXPECT_EQ(old.data_sha256, "");
  RunIdentity now = run_identity(kConfig, "d474", "fast");
  EXPECT_THAT(identity_differences(old, now), ::testing::Contains("data_sha256: (none) -> d474"));
  EXPECT_THAT(identity_differences(old, now), ::testing::Contains("kernels: (none) -> fast"));
  // Text that is not JSON at all is an identity of nothing, not a crash.
  EXPECT_EQ(parse_identity("not json").config_sha256, "");
}

}  // namespace
}  // namespace kiln::train
