// Layer types of a program's own in [[model.layers]] (kiln::train::register_layer_type): a
// registered type is read, checked, written back and built as kiln's own are; what cannot
// be a layer type is refused at registration by name. Registration lasts for the process,
// so each test registers names of its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/nn.h"
#include "kiln/random.h"
#include "kiln/train.h"
#include "support/errors.h"
#include "train/builders.h"
#include "train/config.h"
#include "train/config_test_util.h"

namespace kiln::train {
namespace {

using ::kiln::testing::fails_with;
using ::testing::HasSubstr;
using namespace config_test;

LayerType scaled_dense(std::string name) {
  return LayerType{.name = std::move(name),
                   .help = "dense, then times 2",
                   .required = {"features"},
                   .optional = {"rate"},
                   .build = [](const LayerConfig& layer) {
                     return nn::Sequential({nn::Dense(layer.features), nn::Activation("identity")});
                   }};
}

TEST(LayerRegistry, ARegisteredTypeIsReadWrittenAndBuiltAsKilnsOwn) {
  register_layer_type(scaled_dense("wide_block"));
  TrainConfig config = parse(R"([[model.layers]]
type = "flatten"
[[model.layers]]
type = "wide_block"
features = 7
rate = 0.5
)");
  ASSERT_EQ(config.model.layers.size(), 2u);
  EXPECT_EQ(config.model.layers[1].type, "wide_block");
  EXPECT_EQ(config.model.layers[1].features, 7);
  EXPECT_EQ(config.model.layers[1].rate, 0.5);
  // The resolved config written back reads to the same config.
  std::string text = to_toml(config);
  EXPECT_THAT(text, HasSubstr("type = \"wide_block\"\nfeatures = 7\nrate = 0.5\n"));
  TrainConfig again = parse_config(text, "config.toml", {});
  for (LayerConfig& layer : again.model.layers) layer.line = 0;
  for (LayerConfig& layer : config.model.layers) layer.line = 0;
  EXPECT_EQ(again.model, config.model);

  nn::Module model = build_model(config.model);
  nn::Variables v = model.init(random::key(0), AbstractValue({1, 2, 3}, DType::f32));
  std::vector<std::string> paths;
  for (const auto& [path, leaf] : v.params.leaves_with_paths()) paths.push_back(path);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"wide_block_1/dense_0/bias", "wide_block_1/dense_0/kernel"}));
  EXPECT_EQ(model.output_type(AbstractValue({4, 2, 3}, DType::f32)).shape, Shape({4, 7}));
}

TEST(LayerRegistry, ItsFieldsAreCheckedAsKilnsOwnAre) {
  register_layer_type(scaled_dense("checked_block"));
  EXPECT_THAT(parse_error("[[model.layers]]\ntype = \"checked_block\"\n"),
              HasSubstr("missing field 'features'; checked_block takes: features, rate"));
  EXPECT_THAT(
      parse_error("[[model.layers]]\ntype = \"checked_block\"\nfeatures = 3\nwindow = [2, 2]\n"),
      HasSubstr("unknown field 'window' for a checked_block layer"));
  EXPECT_THAT(parse_error("[[model.layers]]\ntype = \"checked_block\"\nfeatures = 3\nrate = 2.0\n"),
              HasSubstr("rate = 2.0 is out of range"));
  // An unknown type lists the registered ones, and says how to add one.
  std::string unknown = parse_error("[[model.layers]]\ntype = \"checked_blok\"\n");
  EXPECT_THAT(unknown, HasSubstr("did you mean 'checked_block'?"));
  EXPECT_THAT(hint_of("[[model.layers]]\ntype = \"nothing_like_it\"\n"),
              HasSubstr("register_layer_type"));
}

TEST(LayerRegistry, WhatCannotBeALayerTypeIsRefusedByName) {
  LayerType type = scaled_dense("Bad Name");
  EXPECT_TRUE(fails_with([&] { register_layer_type(type); }, {"'Bad Name'", "lower-case"}));
  EXPECT_TRUE(fails_with([&] { register_layer_type(scaled_dense("dense")); },
                         {"'dense' is already a layer type of kiln's"}));
  register_layer_type(scaled_dense("twice_registered"));
  EXPECT_TRUE(fails_with([&] { register_layer_type(scaled_dense("twice_registered")); },
                         {"'twice_registered' is already a layer type (registered earlier)"}));
  type = scaled_dense("odd_fields");
  type.optional = {"parallel"};
  EXPECT_TRUE(fails_with([&] { register_layer_type(type); },
                         {"unknown field 'parallel'", "features, kernel_size"}));
  type.optional = {"features"};
  EXPECT_TRUE(fails_with([&] { register_layer_type(type); }, {"'features' is listed twice"}));
  type = scaled_dense("no_build");
  type.build = nullptr;
  EXPECT_TRUE(fails_with([&] { register_layer_type(type); }, {"build is an empty function"}));
  // None of the refused ones became a type.
  EXPECT_THAT(parse_error("[[model.layers]]\ntype = \"no_build\"\nfeatures = 1\n"),
              HasSubstr("unknown layer type 'no_build'"));
}

}  // namespace
}  // namespace kiln::train
