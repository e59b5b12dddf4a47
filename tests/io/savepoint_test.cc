// Savepoints on disk: the round trip of every tree bit for bit, the commit protocol (only
// marked directories count; a process ended at any step of a save leaves the earlier
// savepoint intact and never a damaged committed one), damaged and truncated files named
// with a fallback to the previous good savepoint, failed writes, retention, and the
// background writer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/savepoint.h"
#include "io/savepoint_writer.h"
#include "io/scratch_files.h"
#include "io/sha256.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "support/errors.h"

namespace kiln::savepoint {
namespace {

namespace fs = std::filesystem;
using kiln::testing::error_of;
using kiln::testing::read_string;
using kiln::testing::ScratchDir;
using kiln::testing::write_string;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A small train state whose values depend on `seed`, so savepoints of different steps
// differ.
struct State {
  Tree params;
  Tree opt_state;
  Tree empty;
};

State make_state(float seed) {
  Array kernel =
      from_host<float>({seed, seed + 1, seed + 2, seed + 3, seed + 4, seed + 5}, Shape{2, 3});
  Array bias = from_host<float>({-seed, seed * 0.5f, 1e-30f}, Shape{3});
  Array count = from_host<int32_t>({static_cast<int32_t>(seed)}, Shape{});
  Tree params = Tree::dict({{"dense_1", Tree::dict({{"kernel", kernel}, {"bias", bias}})}});
  Tree opt_state = Tree::list({Tree::dict({{"count", count}, {"mu", params}})});
  return {params, opt_state, Tree::dict(std::vector<Tree::Item>{})};
}

Snapshot snapshot_of(int64_t step, const State& state) {
  Snapshot snapshot;
  snapshot.step = step;
  snapshot.trees = {{"params", copy_tree("params", state.params)},
                    {"opt_state", copy_tree("opt_state", state.opt_state)},
                    {"model_state", copy_tree("model_state", state.empty)}};
  snapshot.state_json = R"({"data": {"epoch": 1, "position": 5}})";
  snapshot.identity_json = R"({"config_sha256": "abc"})";
  return snapshot;
}

std::vector<uint8_t> bits(const Array& array) {
  HostArray host = array.to_host();
  std::vector<uint8_t> bytes(host.bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(host.bytes[i]);
  return bytes;
}

void expect_same_bits(const Tree& a, const Tree& b) {
  auto left = a.leaves_with_paths();
  auto right = b.leaves_with_paths();
  ASSERT_EQ(left.size(), right.size());
  for (size_t i = 0; i < left.size(); ++i) {
    EXPECT_EQ(left[i].first, right[i].first);
    EXPECT_EQ(left[i].second.aval().to_string(), right[i].second.aval().to_string());
    EXPECT_EQ(bits(left[i].second), bits(right[i].second)) << left[i].first;
  }
}

std::vector<int64_t> committed_steps(const fs::path& dir) {
  std::vector<int64_t> steps;
  for (const Committed& entry : list_committed(dir)) steps.push_back(entry.step);
  return steps;
}

std::string load_error(const fs::path& path) {
  try {
    load(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Savepoint, RoundTripsEveryTreeBitForBit) {
  ScratchDir scratch;
  State state = make_state(3);
  fs::path path = write(scratch.path(), snapshot_of(7, state));
  EXPECT_EQ(path, scratch / "step-00000007");
  // The empty tree has no file; nothing temporary is left.
  EXPECT_THAT(scratch.listing(), ElementsAre("step-00000007"));
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path)) {
    files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_THAT(files, ElementsAre("COMMITTED", "manifest.json", "opt_state.safetensors",
                                 "params.safetensors"));

  Loaded loaded = load(path);
  EXPECT_EQ(loaded.step, 7);
  // The state and identity as given, in compact form.
  EXPECT_EQ(loaded.state_json, R"({"data":{"epoch":1,"position":5}})");
  EXPECT_EQ(loaded.identity_json, R"({"config_sha256":"abc"})");
  expect_same_bits(restore_tree(loaded, "params", state.params), state.params);
  expect_same_bits(restore_tree(loaded, "opt_state", state.opt_state), state.opt_state);
  EXPECT_EQ(restore_tree(loaded, "model_state", state.empty).num_leaves(), 0);
  // The tensors are ordinary safetensors files, under their paths.
  SafetensorsFile params = load_safetensors(path / "params.safetensors");
  ASSERT_EQ(params.arrays.size(), 2u);
  EXPECT_EQ(params.arrays[0].first, "dense_1/bias");
  EXPECT_EQ(params.metadata.at("step"), "7");
  // The same state gives the same bytes (the manifest has no time stamp).
  ScratchDir other;
  write(other.path(), snapshot_of(7, state));
  for (const char* name : {"manifest.json", "params.safetensors", "COMMITTED"}) {
    EXPECT_EQ(read_string(path / name), read_string(other / "step-00000007" / name)) << name;
  }
}

TEST(Savepoint, OnlyMarkedStepDirectoriesCount) {
  ScratchDir scratch;
  write(scratch.path(), snapshot_of(2, make_state(2)));
  // What a crash leaves: a temporary, a renamed directory without its marker, other names.
  write(scratch.path(), snapshot_of(4, make_state(4)));
  fs::rename(scratch / "step-00000004", scratch / ".step-00000005.tmp-999");
  write(scratch.path(), snapshot_of(6, make_state(6)));
  fs::remove(scratch / "step-00000006" / "COMMITTED");
  fs::create_directory(scratch / "step-x");
  write_string(scratch / "step-00000009", "a file, not a directory");
  EXPECT_THAT(committed_steps(scratch.path()), ElementsAre(2));
  std::vector<std::string> skipped;
  EXPECT_EQ(load_latest(scratch.path(), &skipped).step, 2);
  EXPECT_TRUE(skipped.empty());
  EXPECT_THAT(load_error(scratch / "step-00000006"), HasSubstr("has no COMMITTED marker"));

  remove_uncommitted(scratch.path());
  EXPECT_THAT(scratch.listing(), ElementsAre("step-00000002", "step-00000009", "step-x"));
}

// A run's savepoints/ replaced by a file is an error, not "no savepoints": a resume that
// took it for none restarted from step 0 and cut metrics.jsonl back to nothing (issue 43).
TEST(Savepoint, ASavepointsPathThatIsNotADirectoryIsAnError) {
  ScratchDir scratch;
  EXPECT_TRUE(list_committed(scratch / "savepoints").empty());  // none written yet
  write_string(scratch / "savepoints", "a file, not a directory");
  EXPECT_THAT(error_of([&] { (void)list_committed(scratch / "savepoints"); }),
              HasSubstr("savepoints': is not a directory"));
}

TEST(Savepoint, ADamagedFileIsNamedAndTheLatestFallsBackToThePreviousGoodOne) {
  ScratchDir scratch;
  State older = make_state(1);
  write(scratch.path(), snapshot_of(10, older));
  write(scratch.path(), snapshot_of(20, make_state(2)));
  fs::path params = scratch / "step-00000020" / "params.safetensors";
  std::string bytes = read_string(params);
  bytes[bytes.size() - 2] ^= 0x40;  // one bit of a tensor
  write_string(params, bytes);

  std::string error = load_error(scratch / "step-00000020");
  EXPECT_THAT(error, HasSubstr("step-00000020"));
  EXPECT_THAT(error, HasSubstr("params.safetensors: SHA-256"));
  EXPECT_THAT(error, HasSubstr("the file is damaged"));
  std::vector<std::string> skipped;
  Loaded loaded = load_latest(scratch.path(), &skipped);
  EXPECT_EQ(loaded.step, 10);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("step-00000020: "));
  EXPECT_THAT(skipped[0], HasSubstr("params.safetensors"));
  expect_same_bits(restore_tree(loaded, "params", older.params), older.params);
}

TEST(Savepoint, TruncatedMissingAndMislabelledFilesAreNamed) {
  ScratchDir scratch;
  auto fresh = [&](int64_t step) {
    return write(scratch.path(), snapshot_of(step, make_state(static_cast<float>(step))));
  };
  fs::path truncated = fresh(1);
  fs::resize_file(truncated / "opt_state.safetensors", 20);
  EXPECT_THAT(load_error(truncated),
              HasSubstr("opt_state.safetensors has 20 bytes, the manifest says"));

  fs::path missing = fresh(2);
  fs::remove(missing / "params.safetensors");
  EXPECT_THAT(load_error(missing), HasSubstr("params.safetensors is missing"));

  fs::path manifest = fresh(3);
  std::string text = read_string(manifest / "manifest.json");
  text[text.find("\"step\": 3")] = ' ';
  write_string(manifest / "manifest.json", text);
  EXPECT_THAT(load_error(manifest),
              HasSubstr("manifest.json does not match the SHA-256 in COMMITTED (the manifest is "
                        "damaged)"));

  fs::path no_manifest = fresh(4);
  fs::remove(no_manifest / "manifest.json");
  EXPECT_THAT(load_error(no_manifest), HasSubstr("manifest.json is missing"));

  fs::path bad_marker = fresh(5);
  write_string(bad_marker / "COMMITTED", "{\"manifest");
  EXPECT_THAT(load_error(bad_marker), HasSubstr("COMMITTED:1: not valid JSON"));

  // Every committed one damaged: the error lists each, newest first.
  std::vector<std::string> skipped;
  try {
    load_latest(scratch.path(), &skipped);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("no usable savepoint in"));
    EXPECT_THAT(error.what(), HasSubstr("step-00000001: "));
  }
  EXPECT_EQ(skipped.size(), 5u);
  ScratchDir empty;
  EXPECT_THROW(
      {
        try {
          load_latest(empty.path(), nullptr);
        } catch (const Error& error) {
          EXPECT_THAT(error.what(), HasSubstr("(none was committed)"));
          throw;
        }
      },
      Error);
}

// A manifest that passes its marker (re-signed) but names files outside the savepoint, or
// holds fields of the wrong JSON type, is refused by name, never followed or thrown past
// kiln's errors (found by the savepoint manifest fuzz target's property).
TEST(Savepoint, AManifestCannotPointOutsideItsSavepoint) {
  ScratchDir scratch;
  int64_t step = 0;
  auto with_manifest = [&](auto edit) {
    fs::path dir = write(scratch.path(), snapshot_of(++step, make_state(1.0f)));
    nlohmann::json manifest = nlohmann::json::parse(read_string(dir / "manifest.json"));
    edit(manifest);
    std::string text = manifest.dump(2);
    write_string(dir / "manifest.json", text);
    write_string(dir / "COMMITTED",
                 nlohmann::json({{"manifest_sha256", io::sha256_hex(text)}}).dump() + "\n");
    return load_error(dir);
  };
  EXPECT_THAT(with_manifest([](nlohmann::json& m) {
                m["files"]["/etc/passwd"] = {{"bytes", 1}, {"sha256", "0"}};
              }),
              HasSubstr("the file \"/etc/passwd\" is not a plain name inside the savepoint"));
  EXPECT_THAT(with_manifest([](nlohmann::json& m) {
                m["files"]["../params.safetensors"] = m["files"]["params.safetensors"];
              }),
              HasSubstr("\"../params.safetensors\" is not a plain name"));
  EXPECT_THAT(
      with_manifest([](nlohmann::json& m) { m["trees"]["../params"] = m["trees"]["params"]; }),
      HasSubstr("the tree \"../params\" is not a plain name"));
  EXPECT_THAT(
      with_manifest([](nlohmann::json& m) { m["trees"]["params"]["leaves"][0]["dtype"] = 7; }),
      HasSubstr("the manifest says 7"));
  // Found by the fuzz target (tests/fuzz/regressions/savepoint_manifest/): a file entry
  // without "bytes", a tree without "leaves", a leaf without "path".
  EXPECT_THAT(
      with_manifest([](nlohmann::json& m) { m["files"]["params.safetensors"].erase("bytes"); }),
      HasSubstr("the entry of \"files\" for params.safetensors must hold \"bytes\""));
  EXPECT_THAT(with_manifest([](nlohmann::json& m) { m["trees"]["params"].erase("leaves"); }),
              HasSubstr("tree \"params\" must hold a \"leaves\" array"));
  EXPECT_THAT(
      with_manifest([](nlohmann::json& m) { m["trees"]["params"]["leaves"][0].erase("path"); }),
      HasSubstr("a leaf of tree \"params\" has no \"path\""));
  EXPECT_THAT(with_manifest([](nlohmann::json& m) { m["step"] = UINT64_MAX; }),
              HasSubstr("\"step\" must be a non-negative integer below 2^63"));
  // The long run's finding: "format" of another type (an object) made the check throw
  // nlohmann's type_error instead of refusing the manifest.
  EXPECT_THAT(with_manifest([](nlohmann::json& m) {
                m["format"] = {{"params", 1}};
              }),
              HasSubstr("\"format\" must be \"kiln savepoint\""));
}

TEST(Savepoint, RestoringIntoAnotherModelNamesTheFirstDifference) {
  ScratchDir scratch;
  Loaded loaded = load(write(scratch.path(), snapshot_of(1, make_state(1))));
  Tree other = Tree::dict({{"dense_1", Tree::dict({{"bias", zeros(Shape{4}, DType::f32)},
                                                   {"kernel", zeros(Shape{2, 3}, DType::f32)}})}});
  try {
    restore_tree(loaded, "params", other);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("tree \"params\" does not fit this run: leaf 0 is "
                                        "'dense_1/bias' f32[3] in the savepoint, 'dense_1/bias' "
                                        "f32[4] in the model"));
  }
}

TEST(Savepoint, AFailedWriteNamesTheFileAndLeavesEarlierSavepointsIntact) {
  ScratchDir scratch;
  State state = make_state(1);
  write(scratch.path(), snapshot_of(1, state));
  std::string before = read_string(scratch / "step-00000001" / "params.safetensors");
  io::set_write_fault_for_testing([](const fs::path& destination) {
    return destination.filename() == "opt_state.safetensors" ? ENOSPC : 0;
  });
  try {
    write(scratch.path(), snapshot_of(2, make_state(2)));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("opt_state.safetensors"));
    EXPECT_THAT(error.what(), HasSubstr("No space left on device"));
  }
  io::set_write_fault_for_testing({});
  EXPECT_THAT(scratch.listing(), ElementsAre("step-00000001"));
  EXPECT_EQ(read_string(scratch / "step-00000001" / "params.safetensors"), before);
  expect_same_bits(restore_tree(load(scratch / "step-00000001"), "params", state.params),
                   state.params);
}

// The manifest holds the state and identity as objects: text that is not one is refused
// before anything is committed.
TEST(Savepoint, AStateThatIsNotAJsonObjectIsRefused) {
  ScratchDir scratch;
  Snapshot snapshot = snapshot_of(1, make_state(1));
  snapshot.state_json = "[1, 2]";
  EXPECT_THAT(error_of([&] { write(scratch.path(), snapshot); }),
              HasSubstr("cannot save a state that is not a JSON object"));
  snapshot.state_json = "{}";
  snapshot.identity_json = "{\"config_sha256\": ";
  EXPECT_THAT(error_of([&] { write(scratch.path(), snapshot); }),
              HasSubstr("cannot save an identity that is not a JSON object"));
  EXPECT_THAT(scratch.listing(), ElementsAre());
}

TEST(Savepoint, RetentionKeepsTheLastKAndEveryMultipleOfM) {
  ScratchDir scratch;
  Retention retention{.keep_last = 3, .keep_every_steps = 4};
  std::vector<int64_t> removed;
  for (int64_t step = 1; step <= 10; ++step) {
    write(scratch.path(), snapshot_of(step, make_state(static_cast<float>(step))));
    for (int64_t gone : apply_retention(scratch.path(), retention)) removed.push_back(gone);
  }
  EXPECT_THAT(committed_steps(scratch.path()), ElementsAre(4, 8, 9, 10));
  EXPECT_THAT(removed, ElementsAre(1, 2, 3, 5, 6, 7));
  EXPECT_THAT(scratch.listing(),
              ElementsAre("step-00000004", "step-00000008", "step-00000009", "step-00000010"));
}

// The process ends (_exit, as SIGKILL would: no destructors, no cleanup) right after one
// step of the protocol; what it leaves must be the earlier savepoint intact, or the new one
// complete, and a reader must never meet a damaged committed savepoint.
TEST(Savepoint, AProcessEndedAtAnyStepOfASaveLeavesNoDamagedSavepoint) {
  const std::vector<std::string> stages = {"file opt_state.safetensors",
                                           "file params.safetensors",
                                           "manifest",
                                           "renamed",
                                           "committed",
                                           "unmarked 1"};
  State older = make_state(1);
  State newer = make_state(2);
  Snapshot first = snapshot_of(1, older);
  Snapshot second = snapshot_of(2, newer);
  for (const std::string& stage : stages) {
    SCOPED_TRACE(stage);
    ScratchDir scratch;
    write(scratch.path(), first);
    // The forked child has no device thread: the copies must be done before it starts.
    for (const auto& [name, tree] : second.trees) {
      for (const auto& [path, leaf] : tree.leaves) (void)leaf.to_host();
    }
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      set_commit_hook_for_testing([&](std::string_view reached) {
        if (reached == stage) ::_exit(9);
      });
      write(scratch.path(), second);
      apply_retention(scratch.path(), Retention{.keep_last = 1});
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 9) << "the hook never saw the stage";

    std::vector<std::string> skipped;
    Loaded latest = load_latest(scratch.path(), &skipped);
    EXPECT_TRUE(skipped.empty()) << skipped.front();
    bool committed = stage == "committed" || stage == "unmarked 1";
    EXPECT_EQ(latest.step, committed ? 2 : 1);
    expect_same_bits(restore_tree(latest, "params", committed ? newer.params : older.params),
                     committed ? newer.params : older.params);
    for (const Committed& entry : list_committed(scratch.path())) {
      EXPECT_NO_THROW(load(entry.path)) << entry.path;
    }
    // A restart clears what the crash left; the next save of step 2 then succeeds.
    remove_uncommitted(scratch.path());
    write(scratch.path(), second);
    EXPECT_EQ(load_latest(scratch.path(), nullptr).step, 2);
  }
}

TEST(SavepointWriter, WritesInTheBackgroundAndReportsEachOutcome) {
  ScratchDir scratch;
  AsyncWriter writer(scratch.path(), Retention{.keep_last = 2});
  for (int64_t step = 1; step <= 3; ++step) {
    writer.start(snapshot_of(step, make_state(static_cast<float>(step))));
  }
  writer.wait();
  EXPECT_FALSE(writer.busy());
  std::vector<Outcome> outcomes = writer.take_outcomes();
  ASSERT_EQ(outcomes.size(), 3u);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(outcomes[i].error, "");
  }
  EXPECT_THAT(outcomes[2].removed_steps, ElementsAre(1));
  EXPECT_THAT(committed_steps(scratch.path()), ElementsAre(2, 3));
  EXPECT_TRUE(writer.take_outcomes().empty());
}

TEST(SavepointWriter, AFailedBackgroundWriteIsReportedAndKeepsEarlierSavepoints) {
  ScratchDir scratch;
  AsyncWriter writer(scratch.path(), Retention{.keep_last = 1});
  writer.start(snapshot_of(1, make_state(1)));
  writer.wait();
  io::set_write_fault_for_testing([](const fs::path& destination) {
    return destination.filename() == "manifest.json" ? EIO : 0;
  });
  writer.start(snapshot_of(2, make_state(2)));
  writer.wait();
  io::set_write_fault_for_testing({});
  std::vector<Outcome> outcomes = writer.take_outcomes();
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[1].step, 2);
  EXPECT_THAT(outcomes[1].error, HasSubstr("manifest.json"));
  EXPECT_THAT(outcomes[1].error, HasSubstr("Input/output error"));
  EXPECT_TRUE(outcomes[1].path.empty());
  EXPECT_THAT(scratch.listing(), ElementsAre("step-00000001"));
  EXPECT_EQ(load(scratch / "step-00000001").step, 1);
}

}  // namespace
}  // namespace kiln::savepoint
