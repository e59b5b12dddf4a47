// The training config (src/train/config.h): reading every type, --set overrides, the
// to_toml round trip, the two example configs, and docs/training.md's reference kept
// equal to the schema. The file's errors are in config_errors_test.cc.
#include "train/config.h"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "support/source_tree.h"
#include "train/builders.h"
#include "train/config_schema.h"
#include "train/config_test_util.h"

namespace kiln::train {
namespace {

using ::testing::HasSubstr;
using namespace config_test;
using ::testing::Not;

TEST(Config, MissingKeysTakeTheStructDefaults) {
  TrainConfig config = parse(kOneLayer);
  TrainConfig expected;
  expected.source = "config.toml";
  LayerConfig dense;
  dense.type = "dense";
  dense.features = 10;
  dense.line = 1;
  expected.model.layers = {dense};
  EXPECT_EQ(config, expected);
}

TEST(Config, ReadsEveryType) {
  TrainConfig config = parse(R"(
[experiment]
name = "mlp"
seed = 42
[optim]
name = "sgd"
lr = 1            # an integer is fine where a float is expected
b2 = 0.98
[train]
batch_size = 64
[[model.layers]]
type = "conv2d"
features = 8
kernel_size = [5, 3]
strides = [2, 1]
padding = "same"
[[model.layers]]
type = "dropout"
rate = 0.25
)");
  EXPECT_EQ(config.experiment.name, "mlp");
  EXPECT_EQ(config.experiment.seed, 42u);
  EXPECT_EQ(config.optim.name, "sgd");
  EXPECT_EQ(config.optim.lr, 1.0);
  EXPECT_EQ(config.optim.b2, 0.98);
  EXPECT_EQ(config.train.batch_size, 64);
  ASSERT_EQ(config.model.layers.size(), 2u);
  const LayerConfig& conv = config.model.layers[0];
  EXPECT_EQ(conv.type, "conv2d");
  EXPECT_EQ(conv.features, 8);
  EXPECT_EQ(conv.kernel_size, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(conv.strides, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(conv.padding, "same");
  EXPECT_EQ(conv.line, 11);
  EXPECT_EQ(config.model.layers[1].rate, 0.25);
  EXPECT_EQ(config.model.layers[1].line, 17);
}

TEST(Config, InlineLayerTablesAndDottedKeys) {
  TrainConfig config = parse(
      "optim.lr = 0.5\nmodel.layers = [{type = \"flatten\"}, {type = \"dense\", features = 3}]\n");
  EXPECT_EQ(config.optim.lr, 0.5);
  ASSERT_EQ(config.model.layers.size(), 2u);
  EXPECT_EQ(config.model.layers[1].features, 3);
}

TEST(ConfigOverrides, ParsedAsTomlValuesOrBareStrings) {
  TrainConfig config = parse(
      kOneLayer, {"optim.lr=3e-4", "optim.name=adam", "train.epochs=7", "experiment.name=2024",
                  "data.dir=\"/tmp/a b\"", " train.batch_size = 32 ", "optim.momentum=0"});
  EXPECT_EQ(config.optim.lr, 3e-4);
  EXPECT_EQ(config.optim.name, "adam");
  EXPECT_EQ(config.train.epochs, 7);
  EXPECT_EQ(config.experiment.name, "2024");  // a string key takes the text as written
  EXPECT_EQ(config.data.dir, "/tmp/a b");
  EXPECT_EQ(config.train.batch_size, 32);
  EXPECT_EQ(config.optim.momentum, 0.0);
}

TEST(ConfigOverrides, OneFieldOfOneLayer) {
  TrainConfig config = parse(kOneLayer + kOneLayer,
                             {"model.layers[1].features=3", "model.layers[0].remat=save_nothing",
                              "model.layers[0].remat_span=2"});
  EXPECT_EQ(config.model.layers[0].features, 10);
  EXPECT_EQ(config.model.layers[1].features, 3);
  EXPECT_EQ(config.model.layers[0].remat, "save_nothing");
  EXPECT_EQ(config.model.layers[0].remat_span, 2);
  // The rules that relate layers run after the overrides.
  EXPECT_THAT(parse_error(kOneLayer,
                          {"model.layers[0].remat=save_nothing", "model.layers[0].remat_span=2"}),
              HasSubstr("remat_span = 2 reaches past the model's last layer"));
}

TEST(ConfigOverrides, AppliedInOrderAfterTheFile) {
  TrainConfig config = parse(kOneLayer + "[optim]\nlr = 0.1\n", {"optim.lr=0.2", "optim.lr=0.3"});
  EXPECT_EQ(config.optim.lr, 0.3);
}

TEST(ConfigOverrides, Errors) {
  EXPECT_EQ(parse_error(kOneLayer, {"optim.lrr=3e-4"}),
            "--set optim.lrr=3e-4: unknown key 'optim.lrr'; did you mean 'optim.lr'?");
  EXPECT_EQ(parse_error(kOneLayer, {"optimizer.lr=3e-4"}),
            "--set optimizer.lr=3e-4: unknown key 'optimizer.lr'; did you mean 'optim.lr'?");
  EXPECT_EQ(parse_error(kOneLayer, {"batch_size=3"}),
            "--set batch_size=3: unknown key 'batch_size'; did you mean 'train.batch_size'?");
  EXPECT_EQ(parse_error(kOneLayer, {"train.batch_size=abc"}),
            "--set train.batch_size=abc: train.batch_size: expected an integer, got a string "
            "(\"abc\")");
  EXPECT_EQ(parse_error(kOneLayer, {"train.batch_size=0"}),
            "--set train.batch_size=0: train.batch_size = 0 is out of range; expected an integer "
            "in [1, 1048576]");
  EXPECT_EQ(parse_error(kOneLayer, {"optim.name=adamm"}),
            "--set optim.name=adamm: optim.name = \"adamm\" is not one of sgd, momentum, "
            "nesterov, adam, adamw, rmsprop; did you mean 'adam'?");
  EXPECT_EQ(parse_error(kOneLayer, {"optim.lr"}), "--set optim.lr: expected section.key=value");
  EXPECT_EQ(parse_error(kOneLayer, {"model.layers=[]"}),
            "--set model.layers=[]: model.layers cannot be replaced from the command line");
  EXPECT_EQ(parse_error(kOneLayer, {"model.layers[1].features=3"}),
            "--set model.layers[1].features=3: model.layers[1]: the config has 1 layer");
  EXPECT_EQ(parse_error(kOneLayer, {"model.layers[x].features=3"}),
            "--set model.layers[x].features=3: expected model.layers[N].field=value, N a layer's "
            "position from 0");
  EXPECT_EQ(parse_error(kOneLayer, {"model.layers[0].window=[2, 2]"}),
            "--set model.layers[0].window=[2, 2]: model.layers[0] (dense, line 1): unknown field "
            "'window' for a dense layer");
  EXPECT_EQ(parse_error(kOneLayer, {"model.layers[0].features=0"}),
            "--set model.layers[0].features=0: model.layers[0] (dense, line 1): features = 0 is "
            "out of range; expected an integer in [1, 65536]");
  // An override that is TOML but more than one value is not smuggled in.
  EXPECT_THAT(parse_error(kOneLayer, {"train.epochs=1\ntrain.batch_size=2"}),
              HasSubstr("expected an integer, got a string"));
}

// Every key set away from its default, and every layer type with every field it takes.
TrainConfig everything_changed() {
  TrainConfig c;
  c.experiment = {.name = "exp-2.run_A", .seed = 123456789, .runs_dir = "out/runs \"quoted\""};
  c.data = {
      .dataset = "fashion_mnist", .dir = "C:\\data\\fm #1", .train_limit = 500, .test_limit = 200};
  c.optim.name = "rmsprop";
  c.optim.lr = 0.1 + 0.2;  // not exactly representable in short decimal
  c.optim.schedule = "warmup_cosine";
  c.optim.warmup_steps = 17;
  c.optim.end_lr = 1e-7;
  c.optim.decay_rate = 0.25;
  c.optim.transition_steps = 3;
  c.optim.boundaries = {5, 9, 400};
  c.optim.b1 = 0.5;
  c.optim.b2 = 0.75;
  c.optim.eps = 0;
  c.optim.momentum = 0.125;
  c.optim.weight_decay = 1;
  c.optim.decay_mask = "matrices";
  c.optim.clip_global_norm = 2.5;
  c.train = {.epochs = 9,
             .batch_size = 7,
             .eval_batch_size = 11,
             .log_every = 13,
             .on_nonfinite = "skip",
             .max_skipped_steps = 21,
             .max_steps = 15};
  for (const schema::LayerTypeRow& type : schema::layer_types()) {
    LayerConfig layer;
    layer.type = std::string(type.name);
    if (type.takes("features")) layer.features = 6;
    if (type.takes("kernel_size")) layer.kernel_size = {3, 5};
    if (type.takes("window")) layer.window = {2, 3};
    if (type.takes("strides")) layer.strides = {1, 2};
    if (type.takes("padding")) layer.padding = "same";
    if (type.takes("rate")) layer.rate = 0.375;
    c.model.layers.push_back(layer);
  }
  c.model.layers[1].remat = "save_dot_outputs";
  c.model.layers[1].remat_span = 2;
  c.model.layers[4].remat = "save_nothing";
  return c;
}

TrainConfig without_positions(TrainConfig config) {
  config.source.clear();
  for (LayerConfig& layer : config.model.layers) layer.line = 0;
  return config;
}

TEST(ConfigToToml, RoundTripsEveryKeyAndLayerType) {
  TrainConfig original = everything_changed();
  std::string text = to_toml(original);
  TrainConfig back = parse(text);
  EXPECT_EQ(without_positions(back), without_positions(original)) << text;
  EXPECT_EQ(to_toml(back), text);
}

TEST(ConfigToToml, RoundTripsDefaultsAndWritesEveryKey) {
  TrainConfig original = parse(kOneLayer);
  std::string text = to_toml(original);
  EXPECT_EQ(without_positions(parse(text)), without_positions(original));
  for (const schema::Section& section : schema::sections()) {
    // A section added later ([privacy]) is left out while at its defaults, and written
    // once it is not.
    if (section.written && !section.written(original)) {
      EXPECT_THAT(text, Not(HasSubstr(fmt::format("[{}]\n", section.name))));
      TrainConfig enabled = parse(kOneLayer, {std::string(section.name) + ".enabled=true"});
      EXPECT_TRUE(section.written(enabled)) << section.name;
      EXPECT_THAT(to_toml(enabled), HasSubstr(fmt::format("[{}]\n", section.name)));
      continue;
    }
    if (section.name != "model") {
      EXPECT_THAT(text, HasSubstr(fmt::format("[{}]\n", section.name)));
    }
    for (const schema::Key& key : section.keys) {
      if (key.type == schema::Type::kLayers) continue;
      // The loss-scale keys only where the run scales its loss (or they are set), the
      // memory budget only when set: an f32 run's text stays what it was before they existed.
      if (key.written && !key.written(original)) {
        EXPECT_THAT(text, Not(HasSubstr(fmt::format("\n{} = ", key.name))));
        EXPECT_TRUE(key.written(parse(kOneLayer + "[model]\ncompute_dtype = \"f16\"\n")) ||
                    key.written(parse(kOneLayer, {"train.memory_budget=1GiB"})) ||
                    key.written(parse(kOneLayer, {"model.gpt2.attention=flash"})))
            << key.name;
        continue;
      }
      EXPECT_THAT(text, HasSubstr(fmt::format("\n{} = ", key.name)));
    }
  }
  // Only the fields a layer's type takes.
  EXPECT_THAT(text, HasSubstr("[[model.layers]]\ntype = \"dense\"\nfeatures = 10\n"));
  EXPECT_THAT(text, Not(HasSubstr("\npadding")));
}

TEST(ConfigSchema, DefaultsSatisfyTheirOwnRules) {
  TrainConfig defaults;
  for (const schema::Section& section : schema::sections()) {
    for (const schema::Key& key : section.keys) {
      if (key.type == schema::Type::kLayers) continue;
      EXPECT_TRUE(schema::satisfies(key.get(defaults), key.constraint))
          << section.name << "." << key.name;
    }
  }
  for (const schema::LayerTypeRow& type : schema::layer_types()) {
    for (std::string_view field : type.fields()) {
      EXPECT_NE(schema::find_layer_field(field), nullptr) << type.name << "." << field;
    }
  }
}

TEST(ConfigSchema, EveryLayerTypeBuildsAModule) {
  for (const LayerConfig& layer : everything_changed().model.layers) {
    ModelConfig model;
    model.layers = {layer};
    model.layers[0].remat_span = 1;  // a block of this layer alone
    EXPECT_EQ(error_of([&] { (void)build_model(model); }), "") << layer.type;
  }
}

// Each schedule the config names, evaluated where it changes: piecewise multiplies the
// rate by decay_rate at each boundary (PyTorch's MultiStepLR, counted in steps).
TEST(ConfigSchedules, PiecewiseDropsAtEachBoundary) {
  // The rates are f32 on the device, hence float comparisons.
  TrainConfig config =
      parse_config(kOneLayer +
                       "[optim]\nschedule = \"piecewise\"\nlr = 0.5\nboundaries = [10, 20]\n"
                       "decay_rate = 0.1\n",
                   "config.toml");
  EXPECT_EQ(config.optim.boundaries, (std::vector<int64_t>{10, 20}));
  optim::Schedule schedule = build_schedule(config.optim, 100);
  EXPECT_FLOAT_EQ(static_cast<float>(optim::schedule_value(schedule, 0)), 0.5f);
  EXPECT_FLOAT_EQ(static_cast<float>(optim::schedule_value(schedule, 9)), 0.5f);
  EXPECT_FLOAT_EQ(static_cast<float>(optim::schedule_value(schedule, 10)), 0.05f);
  EXPECT_FLOAT_EQ(static_cast<float>(optim::schedule_value(schedule, 19)), 0.05f);
  EXPECT_FLOAT_EQ(static_cast<float>(optim::schedule_value(schedule, 20)), 0.005f);
  EXPECT_FLOAT_EQ(static_cast<float>(optim::schedule_value(schedule, 99)), 0.005f);
  // From the command line too.
  TrainConfig overridden =
      parse_config(kOneLayer, "config.toml", {"optim.schedule=piecewise", "optim.boundaries=[3]"});
  EXPECT_FLOAT_EQ(
      static_cast<float>(optim::schedule_value(build_schedule(overridden.optim, 10), 3)), 0.0005f);
}

TEST(ConfigFiles, LoadsBothExamples) {
  std::filesystem::path examples = kiln::testing::source_dir() / "examples";
  TrainConfig mlp = load_config(examples / "fashion_mnist_mlp.toml");
  EXPECT_EQ(mlp.experiment.name, "fashion_mnist_mlp");
  std::vector<std::string> types;
  std::vector<int64_t> features;
  for (const LayerConfig& layer : mlp.model.layers) {
    types.push_back(layer.type);
    if (layer.type == "dense") features.push_back(layer.features);
  }
  EXPECT_EQ(types,
            (std::vector<std::string>{"flatten", "dense", "relu", "dense", "relu", "dense"}));
  EXPECT_EQ(features, (std::vector<int64_t>{512, 512, 10}));

  TrainConfig cnn = load_config(examples / "fashion_mnist_cnn.toml", {"train.epochs=1"});
  EXPECT_EQ(cnn.experiment.name, "fashion_mnist_cnn");
  EXPECT_EQ(cnn.train.epochs, 1);
  types.clear();
  for (const LayerConfig& layer : cnn.model.layers) types.push_back(layer.type);
  EXPECT_EQ(types, (std::vector<std::string>{"conv2d", "relu", "max_pool", "conv2d", "relu",
                                             "max_pool", "flatten", "dense", "relu", "dense"}));
  EXPECT_EQ(cnn.model.layers[0].kernel_size, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(cnn.model.layers[0].padding, "valid");
  EXPECT_EQ(cnn.model.layers[3].features, 64);

  for (const TrainConfig* config : {&mlp, &cnn}) {
    EXPECT_EQ(config->optim.name, "adamw");
    EXPECT_EQ(config->optim.lr, 1e-3);
    EXPECT_EQ(config->optim.weight_decay, 0.01);
    EXPECT_EQ(config->train.batch_size, 128);
    EXPECT_EQ(config->experiment.seed, 0u);
  }
  EXPECT_EQ(mlp.train.epochs, 3);
}

TEST(ConfigFiles, MissingOrUnreadableFileNamesThePath) {
  std::string missing = error_of([] { (void)load_config("/nonexistent/kiln/config.toml"); });
  EXPECT_EQ(missing, "cannot read config '/nonexistent/kiln/config.toml': no such file");
  std::string directory = error_of([] { (void)load_config(kiln::testing::source_dir()); });
  EXPECT_THAT(directory, HasSubstr("it is a directory"));
  EXPECT_THAT(directory, HasSubstr(kiln::testing::source_dir().string()));
}

TEST(ConfigFiles, ErrorsNameTheFileTheyCameFrom) {
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / "kiln_bad_config.toml";
  std::ofstream(path) << kOneLayer << "[train]\nepochs = \"3\"\n";
  std::string message = error_of([&] { (void)load_config(path); });
  EXPECT_EQ(message, fmt::format("{}:5:10: train.epochs: expected an integer, got a string (\"3\")",
                                 path.string()));
  std::filesystem::remove(path);
}

// docs/training.md's reference section must be what schema_markdown() generates. To
// regenerate it: KILN_UPDATE_DOCS=1 train_tests --gtest_filter=ConfigDocs.*
TEST(ConfigDocs, ReferenceSectionMatchesTheSchema) {
  const std::string begin = "<!-- config-reference:begin -->\n";
  const std::string end = "<!-- config-reference:end -->";
  std::filesystem::path doc = kiln::testing::source_dir() / "docs" / "training.md";
  std::stringstream buffer;
  buffer << std::ifstream(doc).rdbuf();
  std::string text = buffer.str();
  size_t from = text.find(begin);
  size_t to = text.find(end);
  ASSERT_NE(from, std::string::npos) << doc << " lacks " << begin;
  ASSERT_NE(to, std::string::npos) << doc << " lacks " << end;
  from += begin.size();
  ASSERT_LE(from, to);
  std::string expected = schema_markdown();
  if (text.substr(from, to - from) == expected) return;
  if (const char* update = std::getenv("KILN_UPDATE_DOCS"); update && std::string(update) == "1") {
    text.replace(from, to - from, expected);
    std::ofstream(doc, std::ios::binary) << text;
    GTEST_SKIP() << "rewrote the config reference in " << doc;
  }
  std::filesystem::path written = std::filesystem::current_path() / "config_reference.md";
  std::ofstream(written, std::ios::binary) << expected;
  ADD_FAILURE() << "the config reference in " << doc << " differs from the schema; the expected "
                << "text is in " << written << ". Regenerate with: KILN_UPDATE_DOCS=1 "
                << "train_tests --gtest_filter=ConfigDocs.*";
}

}  // namespace
}  // namespace kiln::train
