// run.json's codec (track/run_info.h): every field kiln writes reads back as it was, a run
// record rewritten by this kiln keeps what it did not understand, and a record that is not
// one is an error naming the file.
#include "track/run_info.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/errors.h"
#include "support/scratch_dir.h"

namespace kiln::track {
namespace {

using kiln::testing::fails_with;
using kiln::testing::ScratchDir;

// A run.json as the trainer writes one after a resume, every typed field set, and two
// sections (a report and a key only a later kiln knows).
const char* const kCompletedRun = R"({
  "config_sha256": "01ea53a5",
  "data_wait": {
    "median_ms": 0.00015,
    "workers": 2
  },
  "experiment": "fashion_mnist_mlp",
  "final": {
    "test_accuracy": 0.8544,
    "test_loss": 0.40447868041992185,
    "train_loss": 0.4850446885582735
  },
  "finished_at": "2026-12-07T01:48:34Z",
  "first_step_seconds": 0.28655527999871466,
  "from_a_later_kiln": [
    1,
    {
      "x": null
    }
  ],
  "host": "vm",
  "identity": {
    "config_sha256": "01ea53a5",
    "data_sha256": "708130bf",
    "kernels": "fast",
    "kiln_version": "0.1.0"
  },
  "kernels": "fast",
  "kiln_version": "0.1.0",
  "last_savepoint": "savepoints/step-00000469",
  "median_step_ms": 2.280253,
  "mlflow": {
    "complete": true,
    "experiment_id": "3",
    "run_id": "abc",
    "uri": "http://127.0.0.1:5000"
  },
  "params_file": "params.safetensors",
  "params_sha256": "ccc9b96d",
  "pid": 22339,
  "pid_start_ticks": 1016537,
  "resumes": [
    {
      "at": "2026-12-07T01:48:30Z",
      "changed": [
        "config train.epochs: 2 -> 3"
      ],
      "environment": {
        "devices": 1
      },
      "from_step": 6,
      "previous_status": "crashed",
      "savepoint": "savepoints/step-00000006",
      "skipped_savepoints": [
        "step-00000008: damaged"
      ]
    }
  ],
  "run_id": "20261207-014819-01ea53a5",
  "seconds": 1.5,
  "seed": 42,
  "skipped_steps": 0,
  "started_at": "2026-12-07T01:48:19Z",
  "state_file": "state.safetensors",
  "status": "completed",
  "steps": 469
})";

TEST(RunInfo, EveryFieldReadsBackAndTheTextIsTheSame) {
  RunInfo info = parse_run_info(kCompletedRun, "run.json");
  EXPECT_EQ(info.experiment, "fashion_mnist_mlp");
  EXPECT_EQ(info.key(), "fashion_mnist_mlp/20261207-014819-01ea53a5");
  EXPECT_EQ(info.status, "completed");
  EXPECT_EQ(info.pid, 22339);
  EXPECT_EQ(info.pid_start_ticks, 1016537);
  EXPECT_EQ(info.seed, 42);
  EXPECT_EQ(info.steps, 469);
  EXPECT_EQ(info.skipped_steps, 0);
  EXPECT_EQ(info.params_sha256, "ccc9b96d");
  EXPECT_EQ(info.state_file, "state.safetensors");
  EXPECT_EQ(info.seconds, 1.5);
  ASSERT_TRUE(info.identity.has_value());
  EXPECT_EQ(info.identity->data_sha256, "708130bf");
  ASSERT_TRUE(info.final_metrics.has_value());
  EXPECT_EQ(info.final_metrics->test_accuracy, 0.8544);
  ASSERT_TRUE(info.mlflow.has_value());
  EXPECT_TRUE(info.mlflow->complete);
  EXPECT_EQ(info.mlflow->uri, "http://127.0.0.1:5000");
  ASSERT_EQ(info.resumes.size(), 1u);
  EXPECT_EQ(info.resumes[0].from_step, 6);
  EXPECT_EQ(info.resumes[0].savepoint, "savepoints/step-00000006");
  EXPECT_EQ(info.resumes[0].changed, std::vector<std::string>{"config train.epochs: 2 -> 3"});
  EXPECT_EQ(info.resumes[0].environment, R"({"devices":1})");
  EXPECT_EQ(info.section("data_wait"), R"({"median_ms":0.00015,"workers":2})");
  EXPECT_EQ(info.section("from_a_later_kiln"), R"([1,{"x":null}])");
  EXPECT_EQ(info.section("absent"), "");
  EXPECT_EQ(run_info_text(info), kCompletedRun);
}

TEST(RunInfo, AFieldOfAnotherTypeIsKeptAsItWasAndReadsAsAbsent) {
  RunInfo info = parse_run_info(
      R"({"status": 1, "pid": "22339", "steps": 1.5, "identity": {"kernels": 7},
          "resumes": [{"from_step": "six"}], "final": {"test_loss": "low"},
          "mlflow": [], "run_id": "r"})",
      "run.json");
  EXPECT_EQ(info.status, "");
  EXPECT_FALSE(info.pid.has_value());
  EXPECT_FALSE(info.steps.has_value());
  EXPECT_FALSE(info.identity.has_value());
  EXPECT_TRUE(info.resumes.empty());
  EXPECT_FALSE(info.final_metrics.has_value());
  EXPECT_FALSE(info.mlflow.has_value());
  EXPECT_EQ(info.run_id, "r");
  nlohmann::json written = nlohmann::json::parse(run_info_text(info));
  EXPECT_EQ(written, nlohmann::json::parse(R"({"status": 1, "pid": "22339", "steps": 1.5,
      "identity": {"kernels": 7}, "resumes": [{"from_step": "six"}],
      "final": {"test_loss": "low"}, "mlflow": [], "run_id": "r"})"));
}

TEST(RunInfo, NonFiniteFiguresAreWrittenAsNullAndReadAsNaN) {
  RunInfo info;
  info.final_metrics = FinalMetrics{0.5, NAN, INFINITY};
  std::string text = run_info_text(info, -1);
  EXPECT_EQ(text, R"({"final":{"test_accuracy":0.5,"test_loss":null,"train_loss":null}})");
  RunInfo back = parse_run_info(text, "run.json");
  ASSERT_TRUE(back.final_metrics.has_value());
  EXPECT_TRUE(std::isnan(back.final_metrics->test_loss));
  // An older record without a figure: not known.
  RunInfo older = parse_run_info(R"({"final": {"test_accuracy": 0.5}})", "run.json");
  ASSERT_TRUE(older.final_metrics.has_value());
  EXPECT_TRUE(std::isnan(older.final_metrics->train_loss));
}

TEST(RunInfo, TextThatIsNotARunRecordIsAnErrorNamingTheFile) {
  EXPECT_TRUE(fails_with([] { parse_run_info("[1, 2]", "runs/x/run.json"); },
                         {"runs/x/run.json:1: not a run record (a JSON object)"}));
  EXPECT_TRUE(
      fails_with([] { parse_run_info("{\"status\": ", "runs/x/run.json"); }, {"runs/x/run.json"}));
  EXPECT_TRUE(fails_with([] { parse_run_info("", "runs/x/run.json"); }, {"runs/x/run.json"}));
}

TEST(RunInfo, ReadingADirectoryWithoutARecordSaysWhatARunDirectoryIs) {
  ScratchDir dir;
  EXPECT_TRUE(fails_with([&] { read_run_info(dir.path()); },
                         {"is not a run directory: it has no run.json", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { read_run_info(dir / "nowhere"); }, {"no run directory at"}));
  std::ofstream(dir / "run.json") << kCompletedRun;
  EXPECT_EQ(read_run_info(dir.path()).steps, 469);
}

TEST(RunInfo, TextThatIsNotUtf8IsWrittenWithReplacementCharacters) {
  RunInfo info;
  info.error = "cannot open /data/\xff\xfe.csv";
  std::string text = run_info_text(info, -1);
  EXPECT_EQ(parse_run_info(text, "run.json").error,
            "cannot open /data/\xEF\xBF\xBD\xEF\xBF\xBD.csv");
}

}  // namespace
}  // namespace kiln::track
