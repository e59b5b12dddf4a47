// Savepoints in the training run: a run resumed from a savepoint (mid-epoch, at an epoch's
// end, after a graceful stop) ends with the same bits as one that never stopped, params
// and optimizer state alike; damaged savepoints are skipped with a note; a changed run
// identity is refused with every difference listed; a failed save stops or is recorded.
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/host_name.h"
#include "io/atomic_file.h"
#include "io/savepoint.h"
#include "io/sha256.h"
#include "kiln/error.h"
#include "support/errors.h"
#include "support/source_tree.h"
#include "train/config.h"
#include "train/run_directory.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path savepoint_dir(const std::string& name) {
  return run_test::fresh_dir("savepoint", name);
}

// 1024 training images in batches of 128: 8 steps an epoch, 16 in all; a savepoint every
// 2 steps, all kept.
TrainConfig tiny_run(const fs::path& runs_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {"data.train_limit=1024", "data.test_limit=200",
                                        "train.epochs=2", "train.savepoint_every=2",
                                        "train.savepoint_keep_last=100"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return run_test::mlp_example(runs_dir, overrides);
}

using run_test::killed_copy;
using run_test::quiet;
using run_test::read_json;

// metrics.jsonl without the timings, which differ between any two runs.
std::vector<nlohmann::json> metrics_without_timing(const fs::path& run_dir) {
  std::vector<nlohmann::json> records = run_test::read_metrics(run_dir);
  for (nlohmann::json& record : records) {
    record.erase("step_ms");
    record.erase("data_wait_ms");
    record.erase("time");
  }
  return records;
}

std::string final_sha(const fs::path& run_dir, const std::string& file) {
  nlohmann::json info = read_json(run_dir / "run.json");
  return io::sha256_file(run_dir / info["last_savepoint"].get<std::string>() / file);
}

class Savepoints : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runs_ = new fs::path(savepoint_dir("straight"));
    straight_ = new TrainSummary(train(tiny_run(*runs_), quiet()));
    plain_ = new TrainSummary(train(tiny_run(*runs_, {"train.savepoint_every=0"}), quiet()));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*runs_);
    delete straight_;
    delete plain_;
    delete runs_;
  }
  static fs::path* runs_;
  static TrainSummary* straight_;  // uninterrupted, a savepoint every 2 steps
  static TrainSummary* plain_;     // uninterrupted, only the final savepoint
};
fs::path* Savepoints::runs_ = nullptr;
TrainSummary* Savepoints::straight_ = nullptr;
TrainSummary* Savepoints::plain_ = nullptr;

TEST_F(Savepoints, SavingChangesNothingAndEverySavepointIsCommitted) {
  EXPECT_EQ(straight_->steps, 16);
  EXPECT_EQ(straight_->params_sha256, plain_->params_sha256);
  std::vector<int64_t> steps;
  for (const auto& entry : savepoint::list_committed(straight_->run_dir / "savepoints")) {
    steps.push_back(entry.step);
    EXPECT_NO_THROW(savepoint::load(entry.path));
  }
  EXPECT_THAT(steps, ::testing::ElementsAre(2, 4, 6, 8, 10, 12, 14, 16));
  // The final savepoint holds the final weights: the same bytes as params.safetensors'
  // tensors (the metadata differs), and the optimizer state of the plain run.
  EXPECT_EQ(final_sha(straight_->run_dir, "opt_state.safetensors"),
            final_sha(plain_->run_dir, "opt_state.safetensors"));
  savepoint::Loaded last = savepoint::load(straight_->run_dir / "savepoints/step-00000016");
  nlohmann::json last_state = nlohmann::json::parse(last.state_json);
  EXPECT_EQ(last_state["data"]["epoch"], 2);
  EXPECT_EQ(last_state["data"]["position"], 0);
  savepoint::Loaded mid = savepoint::load(straight_->run_dir / "savepoints/step-00000006");
  nlohmann::json mid_state = nlohmann::json::parse(mid.state_json);
  EXPECT_EQ(mid_state["data"]["epoch"], 0);
  EXPECT_EQ(mid_state["data"]["position"], 6);
}

TEST_F(Savepoints, ResumedRunsEndBitIdenticalMidEpochAndAtAnEpochsEnd) {
  fs::path where = savepoint_dir("resumed");
  // Step 0: killed before the first savepoint (the run starts again); step 6: mid-epoch
  // (6 of 8); step 8: the epoch's batches done, its evaluation not yet; step 12: mid-way
  // through the second epoch.
  for (int64_t step : {0, 6, 8, 12}) {
    SCOPED_TRACE(step);
    fs::path copy = killed_copy(straight_->run_dir, where / std::to_string(step), step);
    TrainSummary resumed = resume(copy, {}, quiet());
    EXPECT_EQ(resumed.resumed_from_step, step);
    EXPECT_EQ(resumed.steps, 16);
    EXPECT_EQ(resumed.params_sha256, straight_->params_sha256);
    EXPECT_EQ(final_sha(copy, "opt_state.safetensors"),
              final_sha(straight_->run_dir, "opt_state.safetensors"));
    EXPECT_EQ(final_sha(copy, "params.safetensors"),
              final_sha(straight_->run_dir, "params.safetensors"));
    EXPECT_EQ(resumed.test_accuracy, straight_->test_accuracy);
    // The record of the run is the uninterrupted one's, line for line.
    EXPECT_EQ(metrics_without_timing(copy), metrics_without_timing(straight_->run_dir));
    nlohmann::json info = read_json(copy / "run.json");
    EXPECT_EQ(info["status"], "completed");
    ASSERT_EQ(info["resumes"].size(), 1u);
    EXPECT_EQ(info["resumes"][0]["from_step"], step);
  }
  fs::remove_all(where);
}

// The loader's position maps onto the savepoint's: 1000 images make 7 batches of 128 and
// one of 104 an epoch, and the augmentation draws per example; resuming at each kind of
// point (mid-epoch, after the short batch, in the second epoch) gives the same bits.
TEST(SavepointsWithLoader, AShortLastBatchAndAugmentationResumeBitIdentical) {
  fs::path runs = savepoint_dir("augmented");
  std::vector<std::string> extra = {"data.train_limit=1000", "data.augment.crop_padding=2",
                                    "data.augment.horizontal_flip=true", "data.workers=2",
                                    "data.prefetch=4"};
  TrainSummary straight = train(tiny_run(runs, extra), quiet());
  ASSERT_EQ(straight.steps, 16);
  for (int64_t step : {4, 8, 10}) {
    SCOPED_TRACE(step);
    fs::path copy = killed_copy(straight.run_dir, runs / "resumed" / std::to_string(step), step);
    TrainSummary resumed = resume(copy, {}, quiet());
    EXPECT_EQ(resumed.resumed_from_step, step);
    EXPECT_EQ(resumed.params_sha256, straight.params_sha256);
    EXPECT_EQ(final_sha(copy, "opt_state.safetensors"),
              final_sha(straight.run_dir, "opt_state.safetensors"));
    EXPECT_EQ(metrics_without_timing(copy), metrics_without_timing(straight.run_dir));
  }
  fs::remove_all(runs);
}

// f16 with dynamic loss scaling (issue 47): the scale and its count of good steps are in
// the savepoint, so a resumed run has the uninterrupted one's bits. From 2^30 the first
// steps overflow and back off; growth every 3 good steps keeps the scale moving, so each
// resume point has another scale and count.
TEST(SavepointsWithLossScale, AResumedF16RunHasTheUninterruptedBits) {
  fs::path runs = savepoint_dir("f16");
  std::vector<std::string> extra = {"model.compute_dtype=\"f16\"",
                                    "train.loss_scale_initial=1073741824.0",
                                    "train.loss_scale_growth_interval=3"};
  TrainSummary straight = train(tiny_run(runs, extra), quiet());
  ASSERT_EQ(straight.steps, 16);
  EXPECT_GT(straight.overflow_steps, 2);
  for (int64_t step : {2, 6, 8, 12}) {
    SCOPED_TRACE(step);
    fs::path copy = killed_copy(straight.run_dir, runs / "resumed" / std::to_string(step), step);
    TrainSummary resumed = resume(copy, {}, quiet());
    EXPECT_EQ(resumed.resumed_from_step, step);
    EXPECT_EQ(resumed.params_sha256, straight.params_sha256);
    EXPECT_EQ(resumed.overflow_steps, straight.overflow_steps);
    EXPECT_EQ(resumed.final_loss_scale, straight.final_loss_scale);
    for (const char* file : {"opt_state.safetensors", "loss_scale.safetensors"}) {
      EXPECT_EQ(final_sha(copy, file), final_sha(straight.run_dir, file)) << file;
    }
    EXPECT_EQ(metrics_without_timing(copy), metrics_without_timing(straight.run_dir));
    EXPECT_EQ(read_json(copy / "run.json")["loss_scale"],
              read_json(straight.run_dir / "run.json")["loss_scale"]);
  }
  fs::remove_all(runs);
}

TEST_F(Savepoints, AGracefulStopSavesAndTheResumedRunMatches) {
  fs::path runs = savepoint_dir("graceful");
  std::atomic<int> stop{0};
  TrainOptions options = quiet();
  options.stop_signal = &stop;
  // Stop once a few steps are recorded: wherever that lands, the result must match.
  std::thread stopper([&] {
    for (int i = 0; i < 6000 && stop.load() == 0; ++i) {
      std::error_code missing;  // the run directory does not exist yet
      for (auto dir = fs::recursive_directory_iterator(runs, missing);
           !missing && dir != fs::recursive_directory_iterator(); dir.increment(missing)) {
        if (dir->path().filename() != "metrics.jsonl") continue;
        std::ifstream in(dir->path());
        int lines = 0;
        for (std::string line; std::getline(in, line);) ++lines;
        if (lines >= 3) stop.store(SIGTERM);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  fs::path run_dir;
  int64_t stopped_at = 0;
  try {
    train(tiny_run(runs, {"train.savepoint_every=0"}), options);
    ADD_FAILURE() << "the run was not interrupted";
  } catch (const InterruptedError& interrupted) {
    run_dir = interrupted.run_dir();
    stopped_at = interrupted.steps();
    EXPECT_THAT(interrupted.what(), HasSubstr("written; continue with: kiln resume"));
  }
  stop.store(SIGTERM);
  stopper.join();
  ASSERT_FALSE(run_dir.empty());
  EXPECT_EQ(read_json(run_dir / "run.json")["status"], "interrupted");
  ASSERT_EQ(savepoint::list_committed(run_dir / "savepoints").back().step, stopped_at);
  TrainSummary resumed = resume(run_dir, {}, quiet());
  EXPECT_EQ(resumed.resumed_from_step, stopped_at);
  EXPECT_EQ(resumed.params_sha256, straight_->params_sha256);
  EXPECT_EQ(final_sha(run_dir, "opt_state.safetensors"),
            final_sha(straight_->run_dir, "opt_state.safetensors"));
  fs::remove_all(runs);
}

TEST_F(Savepoints, ResumeRefusesWhatIsNotAResumableRun) {
  fs::path where = savepoint_dir("refused");
  fs::create_directories(where / "empty");
  auto resume_error = [](const fs::path& run_dir) -> std::string {
    try {
      resume(run_dir, {}, quiet());
    } catch (const Error& error) {
      return error.what();
    }
    return "(no error)";
  };
  EXPECT_THAT(resume_error(where / "empty"),
              HasSubstr("is not a run directory: it has no run.json"));
  std::ofstream(where / "empty" / "run.json") << "{\"status\": ";
  EXPECT_THAT(resume_error(where / "empty"), HasSubstr("run.json:1: not valid JSON"));
  // A run whose process is alive (this one) is not resumed under it.
  fs::path live = killed_copy(straight_->run_dir, where / "live", 6);
  nlohmann::json info = read_json(live / "run.json");
  info["pid"] = static_cast<int64_t>(getpid());
  info.erase("pid_start_ticks");
  io::write_file_atomically(live / "run.json", info.dump(2));
  EXPECT_THAT(resume_error(live),
              HasSubstr(fmt::format("run.json says it is running (pid {} on", getpid())));
  EXPECT_EQ(savepoint::list_committed(live / "savepoints").back().step, 6) << "nothing changed";
  fs::remove_all(where);
}

// A rank killed with its MPI job lingers unreaped (a zombie) for a while: it still answers
// A run.json record as kiln reads it from the file.
track::RunInfo as_run_info(const nlohmann::json& record) {
  return track::parse_run_info(record.dump(), "run.json");
}

// kill(pid, 0), but it is dead, and its run may be resumed at once.
TEST(RunOwner, AnExitedButUnreapedProcessIsNotRunning) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  std::string state;
  for (int i = 0; i < 1000 && state != "Z"; ++i) {  // until it has exited (at most ~1 s)
    std::ifstream stat(fmt::format("/proc/{}/stat", child));
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    size_t close = text.rfind(')');
    state = close == std::string::npos ? "" : text.substr(close + 2, 1);
    if (state != "Z") std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(state, "Z");
  ASSERT_EQ(kill(child, 0), 0) << "a zombie still answers kill(pid, 0)";
  nlohmann::json info = {
      {"status", "running"}, {"pid", static_cast<int64_t>(child)}, {"host", host_name()}};
  EXPECT_FALSE(run_may_be_running(as_run_info(info)));
  info["pid"] = static_cast<int64_t>(getpid());
  EXPECT_TRUE(run_may_be_running(as_run_info(info))) << "this process is alive";
  waitpid(child, nullptr, 0);
}

// An edited or damaged run.json may hold a field with another type; the judgement is made
// on what the record does hold, never a JSON type error (the run_json fuzz target found it:
// tests/fuzz/regressions/run_json/status_of_another_type.json).
TEST(RunDirectory, FieldsOfAnotherTypeReadAsAbsent) {
  const nlohmann::json alive = {
      {"status", "running"}, {"pid", static_cast<int64_t>(getpid())}, {"host", host_name()}};
  EXPECT_TRUE(run_may_be_running(as_run_info(alive)));
  for (const char* field : {"status", "host", "pid", "pid_start_ticks"}) {
    nlohmann::json damaged = alive;
    damaged[field] = nlohmann::json::array({1});
    track::RunInfo info = as_run_info(damaged);
    EXPECT_NO_THROW((void)run_may_be_running(info)) << field;
    // Kept as it was, so that a rewrite of the record changes nothing it did not read.
    EXPECT_EQ(info.section(field), "[1]") << field;
  }
  nlohmann::json numeric_status = alive;
  numeric_status["status"] = 1;
  EXPECT_FALSE(run_may_be_running(as_run_info(numeric_status)));
  EXPECT_THROW(as_run_info(nlohmann::json::array({alive})), Error);
}

TEST_F(Savepoints, ResumingACompletedRunDoesNothing) {
  std::string before = io::sha256_file(straight_->run_dir / "run.json");
  TrainSummary again = resume(straight_->run_dir, {}, quiet());
  EXPECT_TRUE(again.already_completed);
  EXPECT_EQ(again.steps, 16);
  EXPECT_EQ(again.params_sha256, straight_->params_sha256);
  EXPECT_EQ(io::sha256_file(straight_->run_dir / "run.json"), before);
}

TEST_F(Savepoints, ADamagedLatestSavepointIsSkippedWithANote) {
  fs::path where = savepoint_dir("damaged");
  fs::path copy = killed_copy(straight_->run_dir, where, 10);
  fs::resize_file(copy / "savepoints/step-00000010/opt_state.safetensors", 100);
  TrainSummary resumed = resume(copy, {}, quiet());
  EXPECT_EQ(resumed.resumed_from_step, 8);
  ASSERT_FALSE(resumed.notes.empty());
  EXPECT_THAT(resumed.notes[0], HasSubstr("skipped damaged savepoint step-00000010"));
  EXPECT_THAT(resumed.notes[0], HasSubstr("opt_state.safetensors has 100 bytes"));
  EXPECT_EQ(resumed.params_sha256, straight_->params_sha256);
  EXPECT_THAT(
      read_json(copy / "run.json")["resumes"][0]["skipped_savepoints"][0].get<std::string>(),
      HasSubstr("step-00000010"));
  fs::remove_all(where);
}

// Rewrites the last byte of the name of tensor dense_1/bias in savepoint `step`'s params
// file (and in its manifest) and signs the result again (the file's SHA-256 in the
// manifest, the manifest's in COMMITTED), as an edit by hand would.
void rename_first_tensor(const fs::path& run_dir, int64_t step, char last_byte) {
  fs::path dir = run_dir / fmt::format("savepoints/step-{:08d}", step);
  std::string params = run_test::read_text(dir / "params.safetensors");
  size_t name = params.find("dense_1/bias");
  ASSERT_NE(name, std::string::npos);
  params[name + 11] = last_byte;
  io::write_file_atomically(dir / "params.safetensors", params);
  nlohmann::json manifest = read_json(dir / "manifest.json");
  manifest["files"]["params.safetensors"]["sha256"] = io::sha256_hex(params);
  nlohmann::json& leaf = manifest["trees"]["params"]["leaves"][0]["path"];
  // The manifest, being JSON, can hold the new name only when it is UTF-8.
  if (static_cast<unsigned char>(last_byte) < 0x80) leaf = params.substr(name, 12);
  std::string manifest_text = manifest.dump(2) + "\n";
  io::write_file_atomically(dir / "manifest.json", manifest_text);
  io::write_file_atomically(
      dir / "COMMITTED",
      nlohmann::json({{"manifest_sha256", io::sha256_hex(manifest_text)}}).dump() + "\n");
}

// Issue 43, defect 10: a savepoint whose tensor name is not UTF-8 was skipped, but the note
// quoting the name could not be written to run.json (nlohmann's dump threw type_error.316)
// and resume failed naming nothing. A savepoint of this run whose tensors do not fit its
// model (a name edited and signed again) is damaged like any other, and skipped too.
TEST_F(Savepoints, EditedTensorNamesAreSkippedLikeAnyDamagedSavepoint) {
  fs::path where = savepoint_dir("renamed");
  fs::path copy = killed_copy(straight_->run_dir, where, 10);
  rename_first_tensor(copy, 10, 'X');    // loads, but does not fit the model
  rename_first_tensor(copy, 8, '\xff');  // not UTF-8: the file's header is not JSON

  TrainSummary resumed = resume(copy, {}, quiet());
  EXPECT_EQ(resumed.resumed_from_step, 6);
  ASSERT_EQ(resumed.notes.size(), 2u);
  EXPECT_THAT(resumed.notes[0], HasSubstr("skipped damaged savepoint step-00000010"));
  EXPECT_THAT(resumed.notes[0], HasSubstr("does not fit this run: leaf 0 is 'dense_1/biaX'"));
  EXPECT_THAT(resumed.notes[1], HasSubstr("skipped damaged savepoint step-00000008"));
  EXPECT_THAT(resumed.notes[1], HasSubstr("the header is not valid JSON"));
  EXPECT_EQ(resumed.params_sha256, straight_->params_sha256);
  nlohmann::json skipped = read_json(copy / "run.json")["resumes"][0]["skipped_savepoints"];
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_THAT(skipped[1].get<std::string>(), HasSubstr("step-00000008"));
  fs::remove_all(where);
}

// What kiln checks against edits (docs/reliability.md, *What kiln trusts*), issue 43: the
// final weights of a completed run, the run a run.json and a savepoint belong to.
TEST_F(Savepoints, ACompletedRunWhoseFinalWeightsChangedIsNotCalledDone) {
  fs::path where = savepoint_dir("weights_changed");
  fs::create_directories(where);
  fs::path copy = where / straight_->run_dir.filename();
  fs::copy(straight_->run_dir, copy, fs::copy_options::recursive);
  std::string params = run_test::read_text(copy / "params.safetensors");
  params.back() ^= 0x01;
  io::write_file_atomically(copy / "params.safetensors", params);
  EXPECT_THAT(::kiln::testing::error_of([&] { resume(copy, {}, quiet()); }),
              HasSubstr("run.json says it completed, but the SHA-256 of params.safetensors is"));
  fs::remove(copy / "params.safetensors");
  EXPECT_THAT(::kiln::testing::error_of([&] { resume(copy, {}, quiet()); }),
              HasSubstr("run.json says it completed, but params.safetensors is missing"));
  fs::remove_all(where);
}

TEST_F(Savepoints, ARunJsonCopiedFromAnotherRunIsRefused) {
  fs::path where = savepoint_dir("record_copied");
  fs::path copy = killed_copy(straight_->run_dir, where, 10);
  fs::copy_file(plain_->run_dir / "run.json", copy / "run.json",
                fs::copy_options::overwrite_existing);
  std::string error = ::kiln::testing::error_of([&] { resume(copy, {}, quiet()); });
  EXPECT_THAT(error,
              HasSubstr("its run.json is the record of run " + plain_->run_dir.filename().string() +
                        ", not of this directory (" + copy.filename().string() + ")"));
  fs::remove_all(where);
}

TEST_F(Savepoints, ASavepointCopiedFromAnotherRunIsSkipped) {
  fs::path where = savepoint_dir("savepoint_copied");
  fs::path copy = killed_copy(straight_->run_dir, where, 10);
  fs::copy(plain_->run_dir / "savepoints/step-00000016", copy / "savepoints/step-00000016",
           fs::copy_options::recursive);
  TrainSummary resumed = resume(copy, {}, quiet());
  EXPECT_EQ(resumed.resumed_from_step, 10);
  ASSERT_FALSE(resumed.notes.empty());
  EXPECT_THAT(resumed.notes[0], HasSubstr("step-00000016: it is a savepoint of run " +
                                          plain_->run_dir.filename().string()));
  EXPECT_EQ(resumed.params_sha256, straight_->params_sha256);
  fs::remove_all(where);
}

TEST_F(Savepoints, AChangedIdentityIsRefusedListingEachDifferenceUnlessAllowed) {
  fs::path where = savepoint_dir("changed");
  fs::path copy = killed_copy(straight_->run_dir, where, 6);
  ResumeOptions changed;
  changed.overrides = {"optim.lr=0.002", "train.log_every=7"};
  try {
    resume(copy, changed, quiet());
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("the run identity differs from its savepoint "
                                        "step-00000006 (saved -> now)"));
    EXPECT_THAT(error.what(), HasSubstr("config optim.lr: 0.001 -> 0.002"));
    EXPECT_THAT(error.what(), HasSubstr("config train.log_every: 100 -> 7"));
    EXPECT_THAT(error.what(), HasSubstr("--allow-changed"));
  }
  EXPECT_EQ(read_json(copy / "run.json")["status"], "running") << "a refusal changes nothing";
  changed.allow_changed = true;
  TrainSummary resumed = resume(copy, changed, quiet());
  EXPECT_EQ(resumed.steps, 16);
  EXPECT_NE(resumed.params_sha256, straight_->params_sha256) << "the learning rate changed";
  nlohmann::json info = read_json(copy / "run.json");
  EXPECT_EQ(info["resumes"][0]["changed"].size(), 2u);
  EXPECT_EQ(load_config(copy / "config.toml").optim.lr, 0.002);
  fs::remove_all(where);
}

TEST_F(Savepoints, AFailedSaveStopsTheRunOrIsRecordedAsConfigured) {
  fs::path runs = savepoint_dir("faults");
  // The optimizer state of step 6's savepoint cannot be written (the disk is full).
  auto full_at_step_6 = [](const fs::path& destination) {
    bool in_step_6 = destination.parent_path().filename().string().starts_with(".step-00000006");
    return in_step_6 && destination.filename() == "opt_state.safetensors" ? ENOSPC : 0;
  };
  io::set_write_fault_for_testing(full_at_step_6);
  try {
    train(tiny_run(runs), quiet());
    ADD_FAILURE() << "expected the run to stop";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("the savepoint of step 6 could not be written"));
    EXPECT_THAT(error.what(), HasSubstr("opt_state.safetensors"));
    EXPECT_THAT(error.what(), HasSubstr("the earlier savepoints are intact"));
  }
  io::set_write_fault_for_testing({});
  fs::path failed = run_test::only_run_dir(runs, "fashion_mnist_mlp");
  EXPECT_EQ(read_json(failed / "run.json")["status"], "failed");
  std::vector<int64_t> steps;
  for (const auto& entry : savepoint::list_committed(failed / "savepoints")) {
    steps.push_back(entry.step);
    EXPECT_NO_THROW(savepoint::load(entry.path));
  }
  EXPECT_THAT(steps, ::testing::ElementsAre(2, 4));
  // The failed run resumes from its last good savepoint to the same end.
  EXPECT_EQ(resume(failed, {}, quiet()).params_sha256, straight_->params_sha256);
  fs::remove_all(runs);

  io::set_write_fault_for_testing(full_at_step_6);
  TrainSummary continued = train(tiny_run(runs, {"train.on_savepoint_error=continue"}), quiet());
  io::set_write_fault_for_testing({});
  EXPECT_EQ(continued.params_sha256, straight_->params_sha256);
  nlohmann::json info = read_json(continued.run_dir / "run.json");
  EXPECT_EQ(info["status"], "completed");
  ASSERT_EQ(info["savepoint_errors"].size(), 1u);
  EXPECT_EQ(info["savepoint_errors"][0]["step"], 6);
  fs::remove_all(runs);
}

TEST(SavepointConfig, CheckpointEveryIsAnErrorNamingTheSavepointKey) {
  for (const char* key : {"checkpoint_every", "checkpoint_every_seconds"}) {
    SCOPED_TRACE(key);
    try {
      load_config(kiln::testing::source_dir() / "examples/fashion_mnist_mlp.toml",
                  {fmt::format("train.{}=100", key)});
      ADD_FAILURE() << "expected an error";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr("train-state saves are called savepoints in kiln"));
      EXPECT_THAT(error.what(), HasSubstr(fmt::format("use 'train.savepoint_every{}'",
                                                      std::string(key).substr(16))));
    }
  }
}

}  // namespace
}  // namespace kiln::train
