// A GPT-2 trained by `kiln train` (model.kind = "gpt2" on a text dataset) and sampled by
// `kiln generate`: the config's keys and rules, the loss falling on a small corpus, the
// run's weights giving the same text for the same seed, data parallelism over next-token
// labels, and the bad cases (a config that mixes kinds, a run that is not a language model,
// weights missing or changed) as errors that name what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/errors.h"
#include "support/source_tree.h"
#include "train/config.h"
#include "train/config_test_util.h"
#include "train/run_test_util.h"
#include "train/text_generation.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using config_test::parse_error;
using kiln::testing::fails_with;
using ::testing::HasSubstr;

// Twelve lines a 1-block model learns in a few dozen steps.
std::string corpus() {
  std::string text;
  for (int i = 0; i < 12; ++i) {
    text += "In the beginning was the word, and the word was with the light.\n";
    text += "And the light shone in the darkness; and the darkness knew it not.\n";
  }
  return text;
}

// A tiny GPT-2 on `corpus()` written under `dir`, with `overrides`.
TrainConfig tiny_gpt2(const fs::path& dir, std::vector<std::string> overrides = {}) {
  fs::create_directories(dir);
  std::ofstream(dir / "corpus.txt", std::ios::binary) << corpus();
  std::string text = fmt::format(R"(
[experiment]
name = "tiny_gpt2"
runs_dir = "{}"
[data]
dataset = "text"
train_file = "{}"
context = 16
test_fraction = 0.1
[model]
kind = "gpt2"
[model.gpt2]
layers = 1
heads = 2
channels = 32
max_context = 32
[optim]
lr = 1e-2
[train]
epochs = 40
batch_size = 8
eval_batch_size = 8
savepoint_every = 0
)",
                                 (dir / "runs").string(), (dir / "corpus.txt").string());
  return parse_config(text, "tiny_gpt2.toml", overrides);
}

TEST(Gpt2Config, TheExamplesReadAndWriteBack) {
  for (const char* name : {"gpt2_small.toml", "gpt2_124m.toml"}) {
    TrainConfig config = load_config(kiln::testing::source_dir() / "examples" / name);
    EXPECT_EQ(config.model.kind, "gpt2") << name;
    EXPECT_TRUE(config.model.layers.empty());
    EXPECT_EQ(config.data.dataset, "text");
    TrainConfig again = parse_config(to_toml(config), config.source);
    EXPECT_EQ(again, config) << to_toml(config);
  }
  TrainConfig big = load_config(kiln::testing::source_dir() / "examples/gpt2_124m.toml");
  EXPECT_EQ(big.model.gpt2.layers, 12);
  EXPECT_EQ(big.model.gpt2.padded_vocab_size, 50304);
  // A sequential model's text, with its layers between [model] and [model.gpt2], reads back.
  TrainConfig mlp = load_config(kiln::testing::source_dir() / "examples/fashion_mnist_mlp.toml");
  EXPECT_THAT(to_toml(mlp), HasSubstr("kind = \"sequential\""));
  TrainConfig mlp_again = parse_config(to_toml(mlp), mlp.source);
  for (TrainConfig* config : {&mlp, &mlp_again}) {
    for (LayerConfig& layer : config->model.layers) layer.line = 0;  // from different texts
  }
  EXPECT_EQ(mlp_again, mlp);
  EXPECT_THAT(identity_toml(big), HasSubstr("\n[model.gpt2]\n"));
}

TEST(Gpt2Config, RulesNameTheKeys) {
  const std::string gpt2 =
      "[data]\ndataset = \"text\"\ntrain_file = \"x.txt\"\ncontext = 64\n[model]\nkind = "
      "\"gpt2\"\n";
  EXPECT_EQ(parse_error(gpt2), "");
  EXPECT_THAT(parse_error(gpt2 + config_test::kOneLayer), HasSubstr("also has 1 [[model.layers]]"));
  EXPECT_THAT(parse_error(gpt2 + "[model.gpt2]\nheads = 3\n"),
              HasSubstr("channels = 256 does not split into model.gpt2.heads = 3"));
  EXPECT_THAT(parse_error(gpt2 + "[model.gpt2]\nmax_context = 32\n"),
              HasSubstr("data.context = 64 is longer than the model's model.gpt2.max_context"));
  EXPECT_THAT(parse_error(gpt2 + "[model.gpt2]\nvocab_size = 300\npadded_vocab_size = 299\n"),
              HasSubstr("padded_vocab_size = 299 is smaller than vocab_size = 300"));
  EXPECT_THAT(parse_error("[model]\nkind = \"gpt2\"\n"),
              HasSubstr("reads token ids, but data.dataset = \"fashion_mnist\""));
  EXPECT_THAT(parse_error("[data]\ndataset = \"text\"\n" + config_test::kOneLayer),
              HasSubstr("needs data.context"));
  EXPECT_THAT(parse_error("[model]\nkind = \"transformer\"\n"), HasSubstr("model.kind"));
  EXPECT_THAT(parse_error(gpt2 + "[model.gpt2]\nn_layer = 2\n"), HasSubstr("did you mean"));
}

TEST(Gpt2Training, TheLossFallsAndTheRunSamplesTheSameTextForTheSameSeed) {
  fs::path dir = run_test::fresh_dir("gpt2", "learns");
  TrainSummary summary = train(tiny_gpt2(dir), run_test::quiet());
  // ln 256 = 5.5 nats a byte at the start; the lines repeat, so a model that learned them
  // predicts most bytes.
  EXPECT_LT(summary.train_loss, 2.0);
  EXPECT_LT(summary.test_loss, 1.0);
  EXPECT_GT(summary.test_accuracy, 0.6);

  GenerateOptions greedy;
  greedy.prompt = "In the beginning";
  greedy.tokens = 24;
  greedy.temperature = 0;
  std::string streamed;
  std::string text =
      generate_text(summary.run_dir, greedy, [&](std::string_view piece) { streamed += piece; });
  EXPECT_EQ(text.size(), greedy.prompt.size() + 24);
  EXPECT_EQ(greedy.prompt + streamed, text);
  EXPECT_EQ(text.substr(0, 16), "In the beginning");
  EXPECT_EQ(generate_text(summary.run_dir, greedy), text);

  GenerateOptions sampled = greedy;
  sampled.temperature = 1.0;
  sampled.top_k = 5;
  sampled.seed = 7;
  std::string first = generate_text(summary.run_dir, sampled);
  EXPECT_EQ(generate_text(summary.run_dir, sampled), first);
  // A prompt longer than the context: the window slides over its last 16 bytes.
  GenerateOptions long_prompt = greedy;
  long_prompt.prompt = corpus().substr(0, 40);
  long_prompt.tokens = 3;
  EXPECT_EQ(generate_text(summary.run_dir, long_prompt).size(), 43u);
}

// [telemetry] of a GPT-2: every stage (the embedding, each block, the final norm) in
// metrics.jsonl, and nothing of the run changed.
TEST(Gpt2Training, TelemetryRecordsEachStageAndChangesNothing) {
  fs::path dir = run_test::fresh_dir("gpt2", "telemetry");
  std::vector<std::string> keys = {"train.epochs=2", "model.gpt2.layers=2"};
  TrainSummary plain = train(tiny_gpt2(dir / "plain", keys), run_test::quiet());
  keys.push_back("telemetry.every=3");
  TrainSummary observed = train(tiny_gpt2(dir / "observed", keys), run_test::quiet());
  EXPECT_EQ(observed.params_sha256, plain.params_sha256);
  int records = 0;
  for (const auto& r : run_test::read_metrics(observed.run_dir)) {
    if (r["kind"] != "telemetry") continue;
    ++records;
    for (const char* key :
         {"embedding/activation_std", "embedding/grad_norm", "h_0/activation_mean", "h_0/grad_norm",
          "h_1/update_ratio", "ln_f/activation_std", "ln_f/grad_norm"}) {
      ASSERT_TRUE(r.contains(key)) << key << " in " << r.dump();
      EXPECT_TRUE(std::isfinite(r[key].get<double>())) << key;
    }
    EXPECT_GT(r["h_1/grad_norm"].get<double>(), 0.0);
    EXPECT_GT(r["embedding/update_ratio"].get<double>(), 0.0);
    EXPECT_FALSE(r.contains("h_2/activation_std"));  // two blocks
  }
  EXPECT_GT(records, 0);
}

// A run killed after a savepoint resumes to the same weights: the data position counts
// next-token examples as it counts images.
TEST(Gpt2Training, AKilledRunResumesBitIdentical) {
  fs::path dir = run_test::fresh_dir("gpt2", "resume");
  TrainSummary straight =
      train(tiny_gpt2(dir, {"train.max_steps=20", "train.savepoint_every=6"}), run_test::quiet());
  fs::path copy = run_test::killed_copy(straight.run_dir, dir / "killed", 12);
  TrainSummary resumed = resume(copy, {}, run_test::quiet());
  EXPECT_EQ(resumed.resumed_from_step, 12);
  EXPECT_EQ(resumed.params_sha256, straight.params_sha256);
  EXPECT_EQ(resumed.test_loss, straight.test_loss);
}

TEST(Gpt2Training, GenerateRefusesWhatIsNotATrainedLanguageModel) {
  fs::path dir = run_test::fresh_dir("gpt2", "refuses");
  TrainSummary summary = train(tiny_gpt2(dir, {"train.max_steps=2"}), run_test::quiet());
  GenerateOptions options;
  options.prompt = "And";
  options.tokens = 2;
  EXPECT_TRUE(fails_with([&] { generate_text(summary.run_dir, {}); }, {"the prompt is empty"}));
  EXPECT_TRUE(fails_with([&] { generate_text(dir / "nowhere", options); },
                         {"nowhere", "not a run directory"}));

  fs::path mlp = dir / "mlp_run";
  fs::create_directories(mlp);
  fs::copy_file(kiln::testing::source_dir() / "examples/fashion_mnist_mlp.toml",
                mlp / "config.toml");
  EXPECT_TRUE(fails_with([&] { generate_text(mlp, options); },
                         {"not a byte-level language model", "sequential"}));

  fs::path changed = dir / "changed";
  fs::copy(summary.run_dir, changed, fs::copy_options::recursive);
  {
    std::fstream file(changed / "params.safetensors",
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-1, std::ios::end);
    file.put('\x7f');
  }
  EXPECT_TRUE(fails_with([&] { generate_text(changed, options); },
                         {"params.safetensors", "run.json records"}));
  fs::remove(changed / "params.safetensors");
  EXPECT_TRUE(fails_with([&] { generate_text(changed, options); },
                         {"has no final weights", "not completed"}));
}

// One token per example is still a language model: labels [rows, 1], logits [rows, 1, V].
TEST(Gpt2Training, AContextOfOneTokenTrains) {
  fs::path dir = run_test::fresh_dir("gpt2", "context1");
  TrainSummary summary =
      train(tiny_gpt2(dir, {"data.context=1", "train.max_steps=5"}), run_test::quiet());
  EXPECT_EQ(summary.steps, 5);
  EXPECT_TRUE(std::isfinite(summary.test_loss));
}

TEST(Gpt2Training, AModelThatDoesNotFitTheDataIsRefusedBeforeTraining) {
  fs::path dir = run_test::fresh_dir("gpt2", "misfit");
  EXPECT_TRUE(
      fails_with([&] { train(tiny_gpt2(dir, {"model.gpt2.vocab_size=100"}), run_test::quiet()); },
                 {"model.gpt2.vocab_size = 100 is smaller than the data's vocabulary of 256"}));
  EXPECT_FALSE(fs::exists(dir / "runs" / "tiny_gpt2"));
}

// Next-token labels on a mesh: the loss is the mean over every token, as on one device.
TEST(DataParallelLanguageModel, MatchesOneDevice) {
  fs::path dir = run_test::fresh_dir("gpt2", "mesh");
  TrainSummary one = train(tiny_gpt2(dir, {"train.max_steps=6"}), run_test::quiet());
  TrainSummary two = train(tiny_gpt2(dir, {"train.max_steps=6", "mesh.data=2"}), run_test::quiet());
  TrainSummary four =
      train(tiny_gpt2(dir, {"train.max_steps=6", "mesh.data=4"}), run_test::quiet());
  EXPECT_NEAR(two.train_loss, one.train_loss, 1e-4 * one.train_loss);
  EXPECT_NEAR(two.test_loss, one.test_loss, 1e-4 * one.test_loss);
  EXPECT_EQ(two.params_sha256, four.params_sha256);  // any mesh size, the same bits
}

}  // namespace
}  // namespace kiln::train
