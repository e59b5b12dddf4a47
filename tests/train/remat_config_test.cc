// Rematerialization per block in [[model.layers]] configs (`remat`, `remat_span`;
// docs/memory.md): a run with blocks recomputed ends with the same params bit for bit as
// without, plans a smaller train step, writes the keys only where they are set, and the
// blocks that cannot be are refused with the layer and the key named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/errors.h"
#include "train/config.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using run_test::quiet;
using run_test::read_json;
using ::testing::HasSubstr;
using ::testing::Not;

// An MLP of two blocks (dense, layer norm, gelu) between flatten and the output layer;
// `remat` holds each layer's extra lines ("" for none).
std::string mlp_text(const fs::path& runs, const std::vector<std::string>& remat) {
  std::vector<std::string> layers = {"type = \"flatten\""};
  for (int block = 0; block < 2; ++block) {
    layers.insert(layers.end(),
                  {"type = \"dense\"\nfeatures = 256", "type = \"layer_norm\"", "type = \"gelu\""});
  }
  layers.push_back("type = \"dense\"\nfeatures = 10");
  std::string text = fmt::format(
      "[experiment]\nname = \"remat\"\nruns_dir = \"{}\"\n[data]\ndataset = "
      "\"fashion_mnist\"\ndir = \"/usr/share/datasets/fashion-mnist\"\ntrain_limit = 1024\n"
      "test_limit = 500\n[train]\nepochs = 1\nbatch_size = 256\nmemory_budget = \"8GiB\"\n",
      runs.string());
  for (size_t i = 0; i < layers.size(); ++i) {
    text += fmt::format("[[model.layers]]\n{}\n{}", layers[i], remat[i]);
    if (!remat[i].empty()) text += "\n";
  }
  return text;
}

int64_t planned_peak(const TrainSummary& run) {
  nlohmann::json budget = read_json(run.run_dir / "run.json")["memory_budget"];
  return budget["plans"][budget["chosen"].get<size_t>()]["planned_peak_bytes"].get<int64_t>();
}

TEST(RematConfig, BlocksRecomputedTrainTheSameBitsInASmallerPlan) {
  fs::path runs = run_test::fresh_dir("remat", "blocks");
  std::vector<std::string> none(8, "");
  std::vector<std::string> dots = none, nothing = none;
  dots[1] = dots[4] = "remat = \"save_dot_outputs\"\nremat_span = 3";
  nothing[1] = nothing[4] = "remat = \"save_nothing\"\nremat_span = 3";
  TrainSummary plain = train(parse_config(mlp_text(runs, none), "plain.toml"), quiet());
  TrainSummary with_dots = train(parse_config(mlp_text(runs, dots), "dots.toml"), quiet());
  TrainSummary with_nothing = train(parse_config(mlp_text(runs, nothing), "nothing.toml"), quiet());
  EXPECT_EQ(with_dots.params_sha256, plain.params_sha256);
  EXPECT_EQ(with_nothing.params_sha256, plain.params_sha256);
  EXPECT_GT(plain.test_accuracy, 0.5);
  EXPECT_LT(planned_peak(with_dots), planned_peak(plain));
  EXPECT_LT(planned_peak(with_nothing), planned_peak(with_dots));
  // config.toml (and so the run's identity) has the keys where they are set, and only there.
  std::string text = run_test::read_text(with_nothing.run_dir / "config.toml");
  EXPECT_THAT(text, HasSubstr("type = \"dense\"\nfeatures = 256\nremat = \"save_nothing\"\n"
                              "remat_span = 3\n"));
  std::string plain_text = run_test::read_text(plain.run_dir / "config.toml");
  EXPECT_THAT(plain_text, Not(HasSubstr("remat_span")));
  EXPECT_THAT(plain_text, Not(HasSubstr("remat = \"save")));
}

TEST(RematConfig, BlocksThatCannotBeAreRefusedByLayerAndKey) {
  fs::path runs = run_test::fresh_dir("remat", "errors");
  auto refused = [&](const std::vector<std::string>& remat,
                     std::initializer_list<std::string_view> expected) {
    return kiln::testing::fails_with([&] { parse_config(mlp_text(runs, remat), "bad.toml"); },
                                     expected);
  };
  std::vector<std::string> none(8, "");
  auto with = [&](size_t i, std::string lines) {
    std::vector<std::string> remat = none;
    remat[i] = std::move(lines);
    return remat;
  };
  EXPECT_TRUE(refused(with(6, "remat = \"save_nothing\"\nremat_span = 3"),
                      {"bad.toml", "model.layers[6] (gelu, line", "remat_span = 3 reaches past",
                       "at most 2 here"}));
  // A span without remat is no block: what a comparison of remat alone needs.
  EXPECT_EQ(kiln::testing::error_of(
                [&] { parse_config(mlp_text(runs, with(2, "remat_span = 2")), "ok.toml"); }),
            "");
  EXPECT_TRUE(refused(with(1, "remat = \"everything\""), {"remat", "everything", "save_nothing"}));
  EXPECT_TRUE(refused(with(1, "remat = \"save_nothing\"\nremat_span = 0"), {"remat_span"}));
  std::vector<std::string> overlapping = with(1, "remat = \"save_nothing\"\nremat_span = 3");
  overlapping[2] = "remat = \"save_dot_outputs\"";
  EXPECT_TRUE(
      refused(overlapping, {"model.layers[2] (layer_norm", "inside the block of",
                            "model.layers[1] (dense", "remat_span = 3", "reaches layer 3"}));
}

}  // namespace
}  // namespace kiln::train
