// Model artifacts (src/artifact, docs/artifacts.md): a trained run exported, loaded back
// alone and run. A small run with batch norm (state) and dropout (off in evaluation) on
// 512 Fashion-MNIST images, evaluated on 250 in batches of 100 (the last one partial).
#include "kiln/artifact.h"  // first: the public header compiles on its own

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "artifact/artifact.h"
#include "artifact/export.h"
#include "artifact/model_card.h"
#include "artifact/onnx_export.h"
#include "artifact/verify.h"
#include "io/bounded_read.h"
#include "io/sha256.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/tracing.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "track/run_info.h"
#include "train/batches.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::artifact {
namespace {

namespace fs = std::filesystem;
using kiln::testing::fails_with;
using ::testing::HasSubstr;

const char* const kConfig = R"(
[experiment]
name = "tiny"
seed = SEED
[data]
dataset = "fashion_mnist"
dir = "/usr/share/datasets/fashion-mnist"
train_limit = 512
test_limit = 250
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dense"
features = 32
[[model.layers]]
type = "batch_norm"
[[model.layers]]
type = "relu"
[[model.layers]]
type = "dropout"
rate = 0.5
[[model.layers]]
type = "dense"
features = 10
[optim]
name = "adamw"
lr = 1e-3
[train]
epochs = 1
batch_size = 64
eval_batch_size = 100
)";

// A completed run of the config above with `seed` (and `train_keys` added to [train]),
// under `root`.
fs::path trained_run(const fs::path& root, int seed, const std::string& train_keys = "") {
  fs::create_directories(root);
  std::string text = kConfig + train_keys;
  text.replace(text.find("SEED"), 4, std::to_string(seed));
  fs::path config_path = root / fmt::format("tiny_{}.toml", seed);
  std::ofstream(config_path) << text;
  fs::path runs = root / fmt::format("runs_{}", seed);
  train::TrainConfig config =
      train::load_config(config_path, {fmt::format("experiment.runs_dir=\"{}\"", runs.string())});
  return train::train(config, train::run_test::quiet()).run_dir;
}

class Artifacts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(train::run_test::fresh_dir("artifact", "suite"));
    run_ = new fs::path(trained_run(*root_, 0));
    first_ = new ExportResult(export_run(*run_, {"tiny", *root_ / "artifacts"}));
  }
  static void TearDownTestSuite() {
    delete first_;
    delete run_;
    delete root_;
  }
  // A copy of the exported artifact to damage.
  fs::path copy_of_artifact(const std::string& name) {
    fs::path copy = *root_ / name;
    fs::remove_all(copy);
    fs::copy(first_->dir, copy);
    return copy;
  }
  static fs::path* root_;
  static fs::path* run_;
  static ExportResult* first_;
};
fs::path* Artifacts::root_ = nullptr;
fs::path* Artifacts::run_ = nullptr;
ExportResult* Artifacts::first_ = nullptr;

TEST_F(Artifacts, ExportMatchesTheTrainerBitForBitOnTheWholeEvaluationSet) {
  EXPECT_FALSE(first_->already_exported);
  EXPECT_EQ(first_->parity_examples, 250);
  EXPECT_THAT(first_->version, ::testing::StartsWith("1.0.0+"));
  EXPECT_EQ(first_->dir, *root_ / "artifacts" / "tiny" / first_->version);
  Artifact model = Artifact::load(first_->dir);
  const Manifest& m = model.manifest();
  EXPECT_EQ(m.input.shape, (std::vector<int64_t>{100, 28, 28, 1}));
  EXPECT_EQ(m.output.shape, (std::vector<int64_t>{100, 10}));
  EXPECT_EQ(m.raw_dtype, DType::u8);
  EXPECT_EQ(m.normalize, "divide_255");
  EXPECT_THAT(m.program_inputs, ::testing::Contains("state/batch_norm_2/mean"));
  EXPECT_EQ(m.program_inputs.back(), "input");
  EXPECT_EQ(m.version, first_->version);
  EXPECT_EQ(m.run, "tiny/" + run_->filename().string());
  // Evaluation mode: no random numbers in the program (dropout is off).
  std::string program = io::read_regular_file(first_->dir / "program.txt", io::kMaxRecordBytes);
  EXPECT_THAT(program, Not(HasSubstr("threefry")));
  EXPECT_THAT(program, Not(HasSubstr("random")));
}

TEST_F(Artifacts, TheModelCardStatesTheArtifactsOwnEvaluation) {
  Artifact model = Artifact::load(first_->dir);
  EXPECT_TRUE(model.manifest().files.count(kModelCard));
  std::string card = io::read_regular_file(first_->dir / kModelCard, io::kMaxRecordBytes);
  track::RunInfo info = track::read_run_info(*run_);
  ASSERT_TRUE(info.final_metrics.has_value());
  // The trainer's accuracy on the test split, measured again on the artifact's outputs.
  EXPECT_THAT(card, HasSubstr(fmt::format("Accuracy: **{:.2f}%**",
                                          100 * info.final_metrics->test_accuracy)));
  EXPECT_THAT(card, HasSubstr("on the run's whole test split (250 predictions)"));
  EXPECT_THAT(card, HasSubstr("95% Wilson interval"));
  EXPECT_THAT(card, HasSubstr("| class | support | precision | recall |"));
  EXPECT_THAT(card, HasSubstr("Confusion matrix (rows: label, columns: predicted class)"));
  EXPECT_THAT(card, HasSubstr(info.identity->data_sha256));
  EXPECT_THAT(card, HasSubstr("## Limitations"));
  EXPECT_THAT(card, HasSubstr("kiln train config.toml"));
  EXPECT_EQ(io::read_regular_file(first_->dir / "config.toml", io::kMaxRecordBytes),
            io::read_regular_file(*run_ / "config.toml", io::kMaxRecordBytes));
  fs::path edited = copy_of_artifact("edited_card");
  std::ofstream(edited / kModelCard, std::ios::app) << "\nAccuracy: 100%\n";
  EXPECT_TRUE(fails_with([&] { Artifact::load(edited); }, {"the SHA-256 of MODEL_CARD.md"}));
}

TEST_F(Artifacts, VerifyMeasuresTheStatedEvaluationAgain) {
  std::vector<Check> checks = verify_artifact(first_->dir);
  ASSERT_EQ(checks.size(), 4u);
  for (const Check& check : checks) EXPECT_TRUE(check.ok) << check.what;
  EXPECT_THAT(checks[3].what, HasSubstr("of 250 predictions right, as the manifest"));
  // A manifest that overstates the evaluation is caught.
  fs::path inflated = copy_of_artifact("inflated");
  std::string text = io::read_regular_file(inflated / "manifest.json", io::kMaxRecordBytes);
  Manifest manifest = parse_manifest(text, "manifest.json");
  manifest.correct = manifest.evaluated;
  std::ofstream(inflated / "manifest.json") << manifest_text(manifest);
  checks = verify_artifact(inflated);
  EXPECT_FALSE(checks.back().ok);
  EXPECT_THAT(checks.back().what, HasSubstr(fmt::format("the manifest states {} of {}",
                                                        manifest.evaluated, manifest.evaluated)));
}

TEST_F(Artifacts, ReproduceTrainsTheSameBitsAgainOrSaysWhatDiffers) {
  Reproduction again = reproduce_artifact(first_->dir, *root_ / "reproduced");
  EXPECT_TRUE(again.same()) << again.params_sha256 << " vs " << again.expected_sha256;
  EXPECT_EQ(again.params_sha256, Artifact::load(first_->dir).manifest().params_sha256);
  // An artifact that claims other weights: not reproduced, and nothing recorded explains it.
  fs::path claimed = copy_of_artifact("claimed");
  Manifest manifest = parse_manifest(
      io::read_regular_file(claimed / "manifest.json", io::kMaxRecordBytes), "manifest.json");
  manifest.params_sha256 = std::string(64, '0');
  std::ofstream(claimed / "manifest.json") << manifest_text(manifest);
  Reproduction other = reproduce_artifact(claimed, *root_ / "reproduced_other");
  EXPECT_FALSE(other.same());
  ASSERT_EQ(other.differences.size(), 1u);
  EXPECT_THAT(other.differences[0], HasSubstr("nothing recorded differs"));
}

TEST_F(Artifacts, ASavepointIsExportedWithItsStepAndCheckedLikeTheFinalWeights) {
  fs::path run = trained_run(*root_ / "with_savepoints", 2, "savepoint_every = 4\n");
  ExportOptions options{"tiny_steps", *root_ / "artifacts", 4};
  ExportResult step4 = export_run(run, options);
  EXPECT_EQ(step4.parity_examples, 250);
  Artifact model = Artifact::load(step4.dir);
  EXPECT_EQ(model.manifest().checkpoint_step, 4);
  EXPECT_EQ(model.manifest().params_sha256, "");
  std::string card = io::read_regular_file(step4.dir / kModelCard, io::kMaxRecordBytes);
  EXPECT_THAT(card, HasSubstr("its savepoint of step 4"));
  // The final weights are another model: the next version.
  ExportResult final_weights = export_run(run, {"tiny_steps", *root_ / "artifacts"});
  EXPECT_THAT(final_weights.version, ::testing::StartsWith("1.1.0+"));
  EXPECT_TRUE(fails_with(
      [&] {
        export_run(run, {"tiny_steps", *root_ / "artifacts", 5});
      },
      {"has no savepoint of step 5; it has steps 4, 8"}));
  EXPECT_TRUE(fails_with([&] { reproduce_artifact(step4.dir, *root_ / "never"); },
                         {"holds the weights of step 4 of its run"}));
}

TEST(ModelCard, WilsonIntervalsMatchTheirDefinition) {
  auto [low, high] = wilson_interval(50, 100);
  EXPECT_NEAR(low, 0.4038, 1e-4);
  EXPECT_NEAR(high, 0.5962, 1e-4);
  auto [none_low, none_high] = wilson_interval(0, 20);
  EXPECT_EQ(none_low, 0.0);
  EXPECT_NEAR(none_high, 0.1611, 1e-4);
  auto [all_low, all_high] = wilson_interval(20, 20);
  EXPECT_NEAR(all_low, 0.8389, 1e-4);
  EXPECT_EQ(all_high, 1.0);
  EXPECT_TRUE(std::isnan(wilson_interval(0, 0).first));
}

TEST(ModelCard, EvaluationCountsOnlyTheRealRowsOfABatch) {
  Evaluation evaluation;
  // Three rows, the last padding: predictions 1, 0, (2).
  Array outputs = from_host<float>({0, 1, 0, 5, 1, 0, 0, 0, 9}, Shape{3, 3});
  evaluation.add(outputs, {1, 2, 2}, 2);
  EXPECT_EQ(evaluation.predictions, 2);
  EXPECT_EQ(evaluation.correct, 1);
  EXPECT_EQ(evaluation.confusion, (std::vector<int64_t>{0, 0, 0, 0, 1, 0, 1, 0, 0}));
}

TEST_F(Artifacts, ExportingTheSameRunAgainWritesNothingAndSaysSo) {
  std::string before = io::sha256_file(first_->dir / "manifest.json");
  ExportResult again = export_run(*run_, {"tiny", *root_ / "artifacts"});
  EXPECT_TRUE(again.already_exported);
  EXPECT_EQ(again.dir, first_->dir);
  EXPECT_EQ(io::sha256_file(first_->dir / "manifest.json"), before);
  // Nothing left beside it either (no staging directory).
  for (const auto& entry : fs::directory_iterator(*root_ / "artifacts" / "tiny")) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".")) << entry.path();
  }
}

TEST_F(Artifacts, AnotherRunOfTheSameSignatureIsTheNextMinorVersion) {
  fs::path other = trained_run(*root_, 1);
  ExportResult second = export_run(other, {"tiny", *root_ / "artifacts"});
  EXPECT_FALSE(second.already_exported);
  EXPECT_THAT(second.version, ::testing::StartsWith("1.1.0+"));
  EXPECT_NE(second.dir, first_->dir);
  EXPECT_TRUE(fs::exists(first_->dir / "manifest.json")) << "never overwritten";
}

TEST_F(Artifacts, PredictingRawRecordsEqualsRunningTheTrainersInputs) {
  Artifact model = Artifact::load(first_->dir);
  train::TrainConfig config = train::load_config(*run_ / "config.toml");
  train::RunData data(config, random::key(0));
  data::HostBatch host;
  data.test->assemble(0, 0, host);
  Array preprocessed = train::to_arrays(host, DType::f32).images;  // [100, 28, 28, 1]
  const data::RawArray& raw = data.dataset.test.features;
  Array raw_u8 = from_host_bytes(raw.bytes.data(), AbstractValue(Shape{100, 28, 28}, DType::u8),
                                 nullptr, CallSite());
  Array from_raw = model.predict(raw_u8);
  EXPECT_EQ(from_raw.shape(), (Shape{100, 10}));
  EXPECT_TRUE(kiln::testing::same_bits(from_raw, model.run(preprocessed)));
  // Any number of rows: 7 (one padded batch) and 0.
  Array seven = model.run(slice(preprocessed, {0, 0, 0, 0}, {7, 28, 28, 1}));
  EXPECT_TRUE(kiln::testing::same_bits(seven, slice(from_raw, {0, 0}, {7, 10})));
  EXPECT_EQ(model.run(zeros({0, 28, 28, 1})).shape(), (Shape{0, 10}));
}

TEST_F(Artifacts, InputsThatDoNotFitAreRefusedSayingWhatItTakes) {
  Artifact model = Artifact::load(first_->dir);
  EXPECT_TRUE(fails_with(
      [&] {
        model.run(zeros({5, 28, 28}));
      },
      {"the input is f32[5,28,28]", "it takes f32[n,28,28,1]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        model.run(zeros({5, 28, 28, 1}, DType::f64));
      },
      {"it takes f32[n,28,28,1]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        model.predict(zeros({5, 28, 28}));
      },
      {"the records are f32[5,28,28]", "the training data's were u8[n,28,28]"}));
}

TEST_F(Artifacts, ChangedOrMissingFilesAreRefusedByName) {
  fs::path tampered = copy_of_artifact("tampered");
  {
    std::fstream weights(tampered / "weights.safetensors",
                         std::ios::in | std::ios::out | std::ios::binary);
    weights.seekp(-1, std::ios::end);
    weights.put('\x7f');
  }
  EXPECT_TRUE(fails_with([&] { Artifact::load(tampered); },
                         {"the SHA-256 of weights.safetensors is", "changed after export"}));
  fs::path missing = copy_of_artifact("missing");
  fs::remove(missing / "program.txt");
  EXPECT_TRUE(fails_with([&] { Artifact::load(missing); }, {"program.txt is missing"}));
  EXPECT_TRUE(fails_with([&] { Artifact::load(*root_); }, {"is not an artifact"}));
}

TEST_F(Artifacts, AManifestOfALaterFormatOrEditedIsRefused) {
  fs::path later = copy_of_artifact("later");
  std::string text = io::read_regular_file(later / "manifest.json", io::kMaxRecordBytes);
  std::string newer = text;
  newer.replace(newer.find("\"format_version\": 1"), 19, "\"format_version\": 2");
  std::ofstream(later / "manifest.json") << newer;
  EXPECT_TRUE(fails_with([&] { Artifact::load(later); },
                         {"artifact format 2 is newer than this kiln reads (1)"}));
  std::string edited = text;
  edited.replace(edited.find("\"shape\": ["), 10, "\"shape\": \"x\", \"old\": [");
  std::ofstream(later / "manifest.json") << edited;
  EXPECT_TRUE(fails_with([&] { Artifact::load(later); }, {"\"input.shape\" must be a list"}));
}

TEST_F(Artifacts, OnlyACompletedRunIsExported) {
  fs::path unfinished = *root_ / "unfinished";
  fs::remove_all(unfinished);
  fs::copy(*run_, unfinished, fs::copy_options::recursive);
  std::string text = io::read_regular_file(unfinished / "run.json", io::kMaxRecordBytes);
  text.replace(text.find("\"completed\""), 11, "\"failed\"");
  std::ofstream(unfinished / "run.json") << text;
  EXPECT_TRUE(fails_with(
      [&] {
        export_run(unfinished, {"tiny", *root_ / "other"});
      },
      {"is failed: only a completed run has final weights to export"}));
  EXPECT_FALSE(fs::exists(*root_ / "other" / "tiny")) << "nothing written";
}

TEST_F(Artifacts, AnOnnxExportHoldsModelOnnxAmongItsCheckedFiles) {
  ExportOptions options{"tiny", *root_ / "with_onnx"};
  options.onnx = true;
  ExportResult with_onnx = export_run(*run_, options);
  ASSERT_FALSE(with_onnx.already_exported);
  EXPECT_EQ(with_onnx.parity_examples, 250);
  Artifact model = Artifact::load(with_onnx.dir);
  ASSERT_TRUE(model.manifest().files.count(kOnnxModel));
  // model.onnx is content: another version than the export without it.
  EXPECT_NE(model.manifest().content_sha256, Artifact::load(first_->dir).manifest().content_sha256);
  // The translation is deterministic: the same checkpoint again is the same bytes.
  EXPECT_TRUE(export_run(*run_, options).already_exported);
  options.artifacts_dir = *root_ / "with_onnx_again";
  ExportResult again = export_run(*run_, options);
  EXPECT_EQ(io::sha256_file(again.dir / kOnnxModel), io::sha256_file(with_onnx.dir / kOnnxModel));
  EXPECT_EQ(again.version, with_onnx.version);
  {
    std::fstream onnx(with_onnx.dir / kOnnxModel, std::ios::in | std::ios::out | std::ios::binary);
    onnx.seekp(-1, std::ios::end);
    onnx.put('\x01');
  }
  EXPECT_TRUE(fails_with([&] { Artifact::load(with_onnx.dir); },
                         {"the SHA-256 of model.onnx is", "changed after export"}));
}

TEST(OnnxExport, APrimitiveWithoutATranslationIsRefusedByName) {
  TracedProgram inverse = make_program([](const Array& x) { return erf_inv(x); }, zeros({3}));
  EXPECT_TRUE(fails_with(
      [&] {
        onnx_model(*inverse.program, {"inverse", "", {}, {}});
      },
      {"ONNX export: erf_inv f32[3] has no ONNX translation",
       "the exporter translates abs, add,"}));
  // Integer division rounds differently across frameworks: refused, not guessed.
  TracedProgram halves = make_program([](const Array& x) { return x / full({}, 2, DType::i32); },
                                      zeros({4}, DType::i32));
  EXPECT_TRUE(fails_with(
      [&] {
        onnx_model(*halves.program, {"halves", "", {}, {}});
      },
      {"div", "only floating-point operands are translated"}));
  // A weight for each program input but the last.
  TracedProgram sum_of =
      make_program([](const Array& w, const Array& x) { return w + x; }, zeros({2}), zeros({2}));
  EXPECT_TRUE(fails_with(
      [&] {
        onnx_model(*sum_of.program, {"sum", "", {}, {}});
      },
      {"the program takes 2 inputs and gives 1 outputs"}));
  EXPECT_NO_THROW(onnx_model(*sum_of.program, {"sum", "", {"w"}, {zeros({2})}}));
}

}  // namespace
}  // namespace kiln::artifact
