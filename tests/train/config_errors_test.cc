// Errors in a training config: TOML syntax, unknown sections and keys (with did-you-mean),
// wrong types, values out of range or not in an enumeration, and bad [[model.layers]],
// each with the file's line and column, the key, what was expected and what was given.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "support/scratch_dir.h"
#include "train/config_test_util.h"

namespace kiln::train {
namespace {

using ::testing::HasSubstr;
using namespace config_test;

TEST(ConfigErrors, TomlSyntaxHasLineAndColumn) {
  std::string message = parse_error("[train]\nepochs = 3\nbatch_size = [1,,2]\n");
  EXPECT_THAT(message, HasSubstr("config.toml:3:"));
  EXPECT_EQ(message.rfind("config.toml:3:17: ", 0), 0u) << message;
  EXPECT_THAT(parse_error("[train\n"), HasSubstr("config.toml:1:"));
  EXPECT_THAT(parse_error("a = \"unterminated\n"), HasSubstr("config.toml:1:"));
}

TEST(ConfigErrors, UnknownKeySuggestsTheClosest) {
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nname = \"adam\"\nlearning_rate = 1e-3\n"),
            "config.toml:6:1: unknown key 'optim.learning_rate'; did you mean 'optim.lr'?");
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\n  lrr = 1e-3\n"),
            "config.toml:5:3: unknown key 'optim.lrr'; did you mean 'optim.lr'?");
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nBatch_Size = 3\n"),
            "config.toml:5:1: unknown key 'train.Batch_Size'; did you mean 'train.batch_size'?");
  // The right key in the wrong section.
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nlr = 1\n"),
            "config.toml:5:1: unknown key 'train.lr'; did you mean 'optim.lr'?");
  // Outside any section.
  EXPECT_EQ(parse_error("epochs = 2\n" + kOneLayer),
            "config.toml:1:1: unknown key 'epochs'; did you mean 'train.epochs'?");
  // Nothing close: no guess, but the hint lists the section's keys.
  std::string far = kOneLayer + "[train]\nzebra = 1\n";
  EXPECT_EQ(parse_error(far), "config.toml:5:1: unknown key 'train.zebra'");
  EXPECT_THAT(hint_of(far), HasSubstr("[train] takes: epochs, batch_size"));
}

TEST(ConfigErrors, TheFirstMistakeInTheFileIsReported) {
  // toml++ keeps keys sorted; the error must still be the first one written.
  EXPECT_THAT(parse_error(kOneLayer + "[train]\nzz = 1\naa = 2\n"), HasSubstr("'train.zz'"));
}

TEST(ConfigErrors, UnknownSection) {
  EXPECT_EQ(parse_error(kOneLayer + "[optimizer]\nlr = 1\n"),
            "config.toml:4:2: unknown section 'optimizer'; did you mean 'optim'?");
  EXPECT_EQ(parse_error(kOneLayer + "[trian]\n"),
            "config.toml:4:2: unknown section 'trian'; did you mean 'train'?");
  EXPECT_EQ(parse_error(kOneLayer + "[logging]\n"), "config.toml:4:2: unknown section 'logging'");
}

TEST(ConfigErrors, WrongTypeNamesKeyExpectedAndGiven) {
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nbatch_size = \"128\"\n"),
            "config.toml:5:14: train.batch_size: expected an integer, got a string (\"128\")");
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nepochs = 1.5\n"),
            "config.toml:5:10: train.epochs: expected an integer, got a float (1.5)");
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nlr = \"fast\"\n"),
            "config.toml:5:6: optim.lr: expected a float, got a string (\"fast\")");
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nname = true\n"),
            "config.toml:5:8: optim.name: expected a string, got a boolean (true)");
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nlr = [1, 2]\n"),
            "config.toml:5:6: optim.lr: expected a float, got an array ([ 1, 2 ])");
  EXPECT_EQ(parse_error("optim = 3\n" + kOneLayer),
            "config.toml:1:1: optim: expected a table (a [optim] section), got an integer (3)");
}

TEST(ConfigErrors, OutOfRangeNamesValueAndAllowedRange) {
  EXPECT_EQ(parse_error(kOneLayer + "[train]\nbatch_size = 0\n"),
            "config.toml:5:14: train.batch_size = 0 is out of range; expected an integer in [1, "
            "1048576]");
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nlr = -0.1\n"),
            "config.toml:5:6: optim.lr = -0.1 is out of range; expected a float in [1e-30, 1e+30]");
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nb1 = 1\n"),
            "config.toml:5:6: optim.b1 = 1.0 is out of range; expected a float in [0, 1)");
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\nlr = nan\n"), HasSubstr("optim.lr = nan is out"));
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\nlr = inf\n"), HasSubstr("optim.lr = inf is out"));
  EXPECT_EQ(parse_error(kOneLayer + "[experiment]\nseed = -1\n"),
            "config.toml:5:8: experiment.seed = -1 is out of range; expected an integer >= 0");
  EXPECT_EQ(parse_error(kOneLayer + "[experiment]\nname = \"a/b\"\n"),
            "config.toml:5:8: experiment.name = \"a/b\" is not allowed; expected a directory name "
            "of 1 to 100 letters, digits, '.', '_' or '-'");
  EXPECT_THAT(parse_error(kOneLayer + "[data]\ndir = \"\"\n"),
              HasSubstr("data.dir = \"\" is not allowed; expected a non-empty path"));
}

// Sizes a config can set are bounded, so that no product the trainer forms overflows and
// a typo is an error naming the key, not a crash (conv2d features = 2^63 - 1 segfaulted;
// epochs = INT64_MAX made total_steps negative and the run "completed").
TEST(ConfigErrors, EverySizeIsBounded) {
  const std::string huge = "9223372036854775807";
  EXPECT_EQ(parse_error("[[model.layers]]\ntype = \"conv2d\"\nfeatures = " + huge +
                        "\nkernel_size = [3, 3]\n"),
            "config.toml:3:12: model.layers[0] (conv2d, line 1): features = " + huge +
                " is out of range; expected an integer in [1, 65536]");
  EXPECT_THAT(parse_error("[[model.layers]]\ntype = \"conv2d\"\nfeatures = 4\nkernel_size = [3, " +
                          huge + "]\n"),
              HasSubstr("model.layers[0] (conv2d, line 1): kernel_size = [3, " + huge +
                        "] is not allowed; expected an array of 2 integers in [1, 1024]"));
  EXPECT_THAT(parse_error("[[model.layers]]\ntype = \"max_pool\"\nwindow = [2, 2]\nstrides = [" +
                          huge + ", 1]\n"),
              HasSubstr("model.layers[0] (max_pool, line 1): strides = ["));
  EXPECT_THAT(
      parse_error("[[model.layers]]\ntype = \"avg_pool\"\nwindow = [4611686018427387904, 2]\n"),
      HasSubstr("window = [4611686018427387904, 2] is not allowed"));
  EXPECT_THAT(parse_error(kOneLayer + "[train]\nepochs = " + huge + "\n"),
              HasSubstr("train.epochs = " + huge +
                        " is out of range; expected an integer in [1, "
                        "1000000]"));
  EXPECT_THAT(parse_error(kOneLayer + "[train]\nbatch_size = 9223372036854775000\n"),
              HasSubstr("train.batch_size = 9223372036854775000 is out of range"));
  EXPECT_THAT(parse_error(kOneLayer + "[train]\neval_batch_size = " + huge + "\n"),
              HasSubstr("train.eval_batch_size = " + huge + " is out of range"));
  EXPECT_THAT(parse_error(kOneLayer + "[train]\nmax_steps = 2147483648\n"),
              HasSubstr("expected an integer in [0, 2147483647]"));
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\nwarmup_steps = " + huge + "\n"),
              HasSubstr("optim.warmup_steps = " + huge + " is out of range"));
}

// lr = 1e-320 trained with a learning rate of 0 (an f32 0), and 1e308 failed with an
// internal message: rates are kept inside f32's normal range.
TEST(ConfigErrors, RatesStayInsideTheF32Range) {
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nlr = 1e-320\n"),
            "config.toml:5:6: optim.lr = 1e-320 is out of range; expected a float in [1e-30, "
            "1e+30]");
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\nlr = 1e308\n"),
              HasSubstr("optim.lr = 1e+308 is out of range"));
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\nend_lr = 1e-40\n"),
              HasSubstr("optim.end_lr = 1e-40 is out of range; expected a float in [0, 1e+30], 0 "
                        "or at least 1e-30"));
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\neps = 1e300\n"), HasSubstr("optim.eps = 1e+300"));
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\ndecay_rate = 1e-35\n"),
              HasSubstr("optim.decay_rate = 1e-35 is out of range"));
  EXPECT_EQ(parse(kOneLayer + "[optim]\nend_lr = 0\neps = 0\n").optim.end_lr, 0);
}

// A NUL in experiment.name or runs_dir made `kiln train` spin; a newline went into a
// directory name.
TEST(ConfigErrors, NamesAndPathsArePrintable) {
  for (std::string bad : {"a\\u0000b", "a\\nb", "a b", "a\\u007f", "..", "caf\u00e9"}) {
    EXPECT_THAT(parse_error(kOneLayer + "[experiment]\nname = \"" + bad + "\"\n"),
                HasSubstr("is not allowed; expected a directory name of 1 to 100 letters"))
        << bad;
  }
  EXPECT_THAT(parse_error(kOneLayer + "[experiment]\nname = \"" + std::string(101, 'x') + "\"\n"),
              HasSubstr("is not allowed"));
  for (std::string bad : {"runs\\u0000x", "runs\\nx", "runs\\tx"}) {
    EXPECT_THAT(parse_error(kOneLayer + "[experiment]\nruns_dir = \"" + bad + "\"\n"),
                HasSubstr("is not allowed; expected a non-empty path of at most 4096 printable "
                          "characters"))
        << bad;
    EXPECT_THAT(parse_error(kOneLayer + "[data]\ndir = \"" + bad + "\"\n"),
                HasSubstr("data.dir = "))
        << bad;
  }
  EXPECT_EQ(parse(kOneLayer +
                  "[experiment]\nname = \"mlp-2.v_1\"\nruns_dir = \"my runs/\u00e9t\u00e9\"\n")
                .experiment.runs_dir,
            "my runs/\u00e9t\u00e9");
}

TEST(ConfigErrors, ConfigFilesLargerThanTheLimitAreRefused) {
  kiln::testing::ScratchDir dir;
  std::ofstream(dir.path() / "big.toml") << "# " << std::string(kMaxConfigBytes, 'x') << "\n";
  std::string message = error_of([&] { (void)load_config(dir.path() / "big.toml"); });
  EXPECT_THAT(message, HasSubstr("big.toml': it is larger than 1048576 bytes"));
}

// Refused by their type before they are opened: opening a FIFO with no writer waits
// forever, and /dev/zero never ends.
TEST(ConfigErrors, ConfigsThatAreNotRegularFilesAreRefusedUnopened) {
  kiln::testing::ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir.path() / "config.toml").c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { (void)load_config(dir.path() / "config.toml"); }),
              HasSubstr("config.toml': it is a FIFO"));
  EXPECT_EQ(error_of([] { (void)load_config("/dev/zero"); }),
            "cannot read config '/dev/zero': it is a device");
}

TEST(ConfigErrors, PiecewiseScheduleNeedsIncreasingBoundaries) {
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nschedule = \"piecewise\"\n"),
            "config.toml: optim.schedule = \"piecewise\" needs optim.boundaries, the steps at "
            "which the learning rate is multiplied by optim.decay_rate");
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nschedule = \"piecewise\"\nboundaries = [300, "
                                    "200]\n"),
            "config.toml: optim.boundaries = [300, 200] must increase: boundaries[1] = 200 does "
            "not come after boundaries[0] = 300");
  EXPECT_THAT(parse_error(kOneLayer, {"optim.boundaries=[5, 5]"}),
              HasSubstr("boundaries[1] = 5 does not come after boundaries[0] = 5"));
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nboundaries = [0, 10]\n"),
            "config.toml:5:14: optim.boundaries = [0, 10] is not allowed; expected an array of "
            "integers in [1, 2147483647]");
  // PyTorch's name for them.
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\nmilestones = [10]\n"),
              HasSubstr("did you mean 'optim.boundaries'?"));
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\nboundaries = [1.5]\n"),
              HasSubstr("optim.boundaries"));
}

TEST(ConfigErrors, NotInEnumListsChoicesAndSuggests) {
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nname = \"adan\"\n"),
            "config.toml:5:8: optim.name = \"adan\" is not one of sgd, momentum, nesterov, adam, "
            "adamw, rmsprop; did you mean 'adam'?");
  EXPECT_EQ(parse_error(kOneLayer + "[optim]\nschedule = \"cosine_warmup\"\n"),
            "config.toml:5:12: optim.schedule = \"cosine_warmup\" is not one of constant, linear, "
            "cosine, warmup_cosine, exponential, piecewise");
  EXPECT_THAT(parse_error(kOneLayer + "[train]\non_nonfinite = \"skp\"\n"),
              HasSubstr("is not one of stop, skip; did you mean 'skip'?"));
  EXPECT_THAT(parse_error(kOneLayer + "[optim]\ndecay_mask = \"matrixes\"\n"),
              HasSubstr("did you mean 'matrices'?"));
}

TEST(ConfigErrors, Layers) {
  auto layers_error = [](const std::string& layers) {
    return parse_error("[train]\nepochs = 1\n\n" + layers);
  };
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"flatten\"\n\n[[model.layers]]\n"
                         "type = \"dense\"\nfeatures = 10\nkernel_size = [3, 3]\n"),
            "config.toml:10:1: model.layers[1] (dense, line 7): unknown field 'kernel_size' for a "
            "dense layer; dense takes: features, parallel");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"dense\"\nfeature = 10\n"),
            "config.toml:6:1: model.layers[0] (dense, line 4): unknown field 'feature' for a dense "
            "layer; did you mean 'features'? dense takes: features, parallel");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"relu\"\nfeatures = 10\n"),
            "config.toml:6:1: model.layers[0] (relu, line 4): unknown field 'features' for a relu "
            "layer; relu takes no fields");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"conv2d\"\nfeatures = 4\n"),
            "config.toml:4:1: model.layers[0] (conv2d, line 4): missing field 'kernel_size'; "
            "conv2d takes: features, kernel_size, strides, padding");
  EXPECT_EQ(layers_error("[[model.layers]]\nfeatures = 4\n"),
            "config.toml:4:1: model.layers[0] (line 4): missing 'type'");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"dens\"\n"),
            "config.toml:5:8: model.layers[0] (line 4): unknown layer type 'dens'; did you mean "
            "'dense'?");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = 3\n"),
            "config.toml:5:8: model.layers[0] (line 4): type: expected a string, got an integer "
            "(3)");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"max_pool\"\nwindow = [2]\n"),
            "config.toml:6:10: model.layers[0] (max_pool, line 4): window = [2] is not allowed; "
            "expected an array of 2 integers in [1, 1024]");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"conv2d\"\nfeatures = 4\n"
                         "kernel_size = [3, 3.0]\n"),
            "config.toml:7:15: model.layers[0] (conv2d, line 4): kernel_size: expected an array "
            "of integers, got an array ([ 3, 3.0 ])");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"dense\"\nfeatures = 0\n"),
            "config.toml:6:12: model.layers[0] (dense, line 4): features = 0 is out of range; "
            "expected an integer in [1, 65536]");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"avg_pool\"\nwindow = [2, 2]\n"
                         "padding = \"full\"\n"),
            "config.toml:7:11: model.layers[0] (avg_pool, line 4): padding = \"full\" is not one "
            "of valid, same");
  EXPECT_EQ(layers_error("[[model.layers]]\ntype = \"dropout\"\nrate = 1\n"),
            "config.toml:6:8: model.layers[0] (dropout, line 4): rate = 1.0 is out of range; "
            "expected a float in [0, 1)");
}

TEST(ConfigErrors, LayerListShape) {
  EXPECT_EQ(parse_error("[model]\nlayers = []\n"),
            "config.toml:2:10: model.layers is empty; a model needs at least one layer");
  EXPECT_EQ(parse_error("[model]\nlayers = 3\n"),
            "config.toml:2:10: model.layers: expected an array of tables ([[model.layers]]), got "
            "an integer (3)");
  EXPECT_EQ(parse_error("[model]\nlayers = [1]\n"),
            "config.toml:2:11: model.layers[0]: expected a table, got an integer (1)");
  EXPECT_EQ(parse_error("[train]\nepochs = 1\n"),
            "config.toml: the config has no model: add [[model.layers]] tables");
  EXPECT_EQ(parse_error(""), "config.toml: the config has no model: add [[model.layers]] tables");
}

}  // namespace
}  // namespace kiln::train
