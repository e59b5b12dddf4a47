// kiln::Tree (src/tree): construction, sorted keys, flatten/unflatten round trips, paths,
// tree_map with real arithmetic, sizes, and the errors for every bad input.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "kiln/ops.h"
#include "kiln/tree.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::error_of;
using testing::fails_with;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

Array vec(std::initializer_list<float> values) {
  return from_host<float>(values, {static_cast<int64_t>(values.size())});
}

std::vector<std::string> paths_of(const Tree& tree) {
  std::vector<std::string> paths;
  for (const auto& [path, leaf] : tree.leaves_with_paths()) paths.push_back(path);
  return paths;
}

// {dense1: {bias, kernel}, dropout: none, layers: [{b, w}, [x, none, {}], []], scale}
Tree model() {
  Tree dense1 = Tree::dict({{"kernel", zeros({3, 2})}, {"bias", zeros({2})}});
  Tree layer0 = Tree::dict({{"w", vec({1, 2})}, {"b", vec({3})}});
  Tree layer1 = Tree::list({vec({4, 5, 6}), Tree(), Tree::dict({})});
  return Tree::dict({{"layers", Tree::list({layer0, layer1, Tree::list({})})},
                     {"dense1", dense1},
                     {"scale", full({}, 2.0, DType::f64)},
                     {"dropout", Tree()}});
}

TEST(Tree, KindsAndAccess) {
  Tree none;
  EXPECT_TRUE(none.is_none());
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.num_leaves(), 0);
  EXPECT_TRUE(none.leaves().empty());

  Array x = vec({1, 2, 3});
  Tree leaf = x;
  EXPECT_TRUE(leaf.is_leaf());
  EXPECT_EQ(leaf.leaf().impl(), x.impl());  // the same handle, not a copy of the data
  EXPECT_EQ(leaf.num_leaves(), 1);

  Tree tree = model();
  EXPECT_TRUE(tree.is_dict());
  EXPECT_TRUE(tree["layers"].is_list());
  EXPECT_TRUE(tree["dropout"].is_none());
  EXPECT_EQ(tree["layers"].size(), 3u);
  EXPECT_EQ(tree["layers"][0]["w"].leaf().to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(tree["layers"][1][0].leaf().shape(), (Shape{3}));
  EXPECT_TRUE(tree["layers"][1][1].is_none());
  EXPECT_TRUE(tree["layers"][1][2].is_dict());
  EXPECT_EQ(tree["layers"][1][2].size(), 0u);
  EXPECT_TRUE(tree.contains("scale"));
  EXPECT_FALSE(tree.contains("scales"));
  EXPECT_FALSE(tree["layers"].contains("0"));
  std::string key = "dense1";
  EXPECT_TRUE(tree[key].is_dict());
  EXPECT_TRUE(tree[std::string_view(key)].is_dict());
  size_t index = 1;
  EXPECT_TRUE(tree["layers"][index].is_list());
}

TEST(Tree, DictKeysAreSorted) {
  Tree tree = Tree::dict({{"zeta", vec({1})}, {"alpha", vec({2})}, {"Mid", vec({3})}});
  EXPECT_THAT(tree.keys(), ElementsAre("Mid", "alpha", "zeta"));  // byte order, as sorted()
  std::vector<float> order;
  for (const Array& leaf : tree.leaves()) order.push_back(leaf.item<float>());
  EXPECT_EQ(order, (std::vector<float>{3, 2, 1}));
  // The order given does not matter: the same entries make the same tree.
  Tree other = Tree::dict(
      std::vector<Tree::Item>{{"alpha", vec({2})}, {"Mid", vec({3})}, {"zeta", vec({1})}});
  EXPECT_EQ(tree.structure(), other.structure());
  EXPECT_EQ(tree.to_string(), other.to_string());
  // Dict keys sort as strings; list positions keep their order.
  Tree numbered = Tree::dict({{"10", vec({10})}, {"2", vec({2})}});
  EXPECT_THAT(numbered.keys(), ElementsAre("10", "2"));
}

TEST(Tree, LeavesAndPaths) {
  Tree tree = model();
  EXPECT_EQ(tree.num_leaves(), 6);
  EXPECT_THAT(paths_of(tree), ElementsAre("dense1/bias", "dense1/kernel", "layers/0/b",
                                          "layers/0/w", "layers/1/0", "scale"));
  std::vector<Array> leaves = tree.leaves();
  auto with_paths = tree.leaves_with_paths();
  ASSERT_EQ(leaves.size(), with_paths.size());
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_EQ(leaves[i].impl(), with_paths[i].second.impl());
  EXPECT_EQ(leaves[1].shape(), (Shape{3, 2}));
  EXPECT_EQ(leaves[5].dtype(), DType::f64);
  // A tree that is one leaf has one leaf at the empty path.
  Tree leaf = vec({1});
  EXPECT_THAT(paths_of(leaf), ElementsAre(""));
}

TEST(Tree, NumLeavesAndSizeBytes) {
  Tree tree = model();
  // f32: 2 + 6 + 1 + 2 + 3 elements, f64: 1 element.
  EXPECT_EQ(tree.size_bytes(), 14 * 4 + 8);
  EXPECT_EQ(Tree().size_bytes(), 0);
  EXPECT_EQ(Tree::dict({}).num_leaves(), 0);
  EXPECT_EQ(Tree::list({Tree(), Tree::dict({})}).num_leaves(), 0);
  Tree half = Tree::list({astype(zeros({5, 7}), DType::bf16), zeros({0, 3})});
  EXPECT_EQ(half.num_leaves(), 2);
  EXPECT_EQ(half.size_bytes(), 5 * 7 * 2);
}

TEST(Tree, FlattenUnflattenRoundTrip) {
  Tree tree = model();
  TreeDef def = tree.structure();
  EXPECT_EQ(def.num_leaves(), 6);
  std::vector<Array> leaves = tree.leaves();
  Tree back = unflatten(def, leaves);
  EXPECT_EQ(back.structure(), def);
  EXPECT_EQ(back.to_string(), tree.to_string());
  std::vector<Array> back_leaves = back.leaves();
  ASSERT_EQ(back_leaves.size(), leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) EXPECT_EQ(back_leaves[i].impl(), leaves[i].impl());
  EXPECT_EQ(paths_of(back), paths_of(tree));

  // New leaves of other shapes fit the same structure.
  std::vector<Array> replaced;
  for (size_t i = 0; i < leaves.size(); ++i) replaced.push_back(full({2}, double(i)));
  Tree other = unflatten(def, replaced);
  EXPECT_EQ(other["scale"].leaf().to_vector<float>(), (std::vector<float>{5, 5}));
  EXPECT_EQ(other["dense1"]["bias"].leaf().to_vector<float>(), (std::vector<float>{0, 0}));

  // Empty structures round-trip too.
  for (const Tree& empty : {Tree(), Tree::dict({}), Tree::list({}), Tree::list({Tree()})}) {
    Tree again = unflatten(empty.structure(), std::vector<Array>{});
    EXPECT_EQ(again.structure(), empty.structure());
    EXPECT_EQ(again.to_string(), empty.to_string());
  }
  Tree single = vec({7});
  Tree single_back = unflatten(single.structure(), single.leaves());
  EXPECT_EQ(single_back.leaf().impl(), single.leaf().impl());
}

TEST(Tree, StructureIgnoresLeafTypesButNotKinds) {
  Tree a = Tree::dict({{"w", zeros({3})}, {"b", Tree::list({zeros({1})})}});
  Tree b = Tree::dict({{"w", zeros({9, 9}, DType::i32)}, {"b", Tree::list({zeros({})})}});
  EXPECT_EQ(a.structure(), b.structure());
  EXPECT_TRUE(same_structure(a, b));
  EXPECT_EQ(a.structure().to_string(), "{b: [*], w: *}");
  EXPECT_FALSE(Tree().structure() == Tree::dict({}).structure());
  EXPECT_FALSE(Tree::dict({}).structure() == Tree::list({}).structure());
  EXPECT_FALSE(Tree(zeros({1})).structure() == Tree().structure());
  EXPECT_FALSE(same_structure(Tree::list({zeros({1})}), Tree::list({Tree()})));
  EXPECT_FALSE(same_structure(Tree::dict({{"a", zeros({1})}}), Tree::dict({{"b", zeros({1})}})));
  EXPECT_EQ(TreeDef(), Tree().structure());
  EXPECT_EQ(TreeDef().num_leaves(), 0);
}

TEST(Tree, ToString) {
  Tree tree =
      Tree::dict({{"dense1", Tree::dict({{"kernel", zeros({784, 512})}, {"bias", zeros({512})}})},
                  {"layers", Tree::list({zeros({2}, DType::bf16), Tree(), Tree::list({})})},
                  {"empty", Tree::dict({})}});
  EXPECT_EQ(tree.to_string(),
            "{dense1: {bias: f32[512], kernel: f32[784,512]}, empty: {}, layers: [bf16[2], none, "
            "[]]}");
  EXPECT_EQ(tree.structure().to_string(),
            "{dense1: {bias: *, kernel: *}, empty: {}, layers: [*, "
            "none, []]}");
  std::ostringstream out;
  out << Tree() << " " << Tree::list({zeros({}, DType::i64)}) << " " << tree.structure();
  EXPECT_EQ(out.str(), "none [i64[]] " + tree.structure().to_string());
}

TEST(Tree, WithAddsOrReplacesWithoutChangingTheOriginal) {
  Tree tree = Tree::dict({{"w", vec({1})}});
  Tree added = tree.with("b", vec({2, 3}));
  Tree replaced = added.with("w", Tree::list({vec({4})}));
  EXPECT_THAT(tree.keys(), ElementsAre("w"));
  EXPECT_THAT(added.keys(), ElementsAre("b", "w"));
  EXPECT_EQ(added.num_leaves(), 2);
  EXPECT_TRUE(replaced["w"].is_list());
  EXPECT_EQ(replaced.num_leaves(), 2);
  EXPECT_TRUE(added["w"].is_leaf());
  EXPECT_EQ(Tree::dict({}).with("a", Tree()).to_string(), "{a: none}");
}

TEST(Tree, TreeMapUnary) {
  Tree tree = model();
  Tree doubled = tree_map([](const Array& x) { return x * 2.0; }, tree);
  EXPECT_EQ(doubled.structure(), tree.structure());
  EXPECT_EQ(doubled["layers"][0]["w"].leaf().to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(doubled["layers"][1][0].leaf().to_vector<float>(), (std::vector<float>{8, 10, 12}));
  EXPECT_EQ(doubled["scale"].leaf().to_vector<double>(), (std::vector<double>{4}));
  EXPECT_TRUE(doubled["dropout"].is_none());
  // fn may change leaf shapes and dtypes; the structure stays.
  Tree sums = tree_map([](const Array& x) { return astype(x.sum(), DType::f64); }, tree);
  EXPECT_EQ(sums.structure(), tree.structure());
  EXPECT_EQ(sums["layers"][1][0].leaf().item<double>(), 15.0);
  EXPECT_EQ(sums["layers"][1][0].leaf().shape(), (Shape{}));
  EXPECT_EQ(tree_map([](const Array& x) { return x; }, Tree()).to_string(), "none");
}

TEST(Tree, TreeMapSgdStep) {
  Tree params = Tree::dict({{"w", from_host<float>({1, 2, 3, 4}, {2, 2})}, {"b", vec({0.5f})}});
  Tree grads = Tree::dict({{"b", vec({1})}, {"w", from_host<float>({10, 20, 30, 40}, {2, 2})}});
  Tree next = tree_map([](const Array& p, const Array& g) { return p - 0.1 * g; }, params, grads);
  std::vector<float> w = next["w"].leaf().to_vector<float>();
  std::vector<float> expected = {1 - 0.1f * 10, 2 - 0.1f * 20, 3 - 0.1f * 30, 4 - 0.1f * 40};
  ASSERT_EQ(w.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(w[i], expected[i]);
  EXPECT_FLOAT_EQ(next["b"].leaf().item<float>(), 0.5f - 0.1f);
  EXPECT_EQ(next["w"].leaf().shape(), (Shape{2, 2}));
}

TEST(Tree, TreeMapNary) {
  Tree a = Tree::list({vec({1, 2}), Tree::dict({{"x", vec({3})}}), Tree()});
  Tree b = Tree::list({vec({10, 20}), Tree::dict({{"x", vec({30})}}), Tree()});
  Tree c = Tree::list({vec({100, 200}), Tree::dict({{"x", vec({300})}}), Tree()});
  std::vector<Tree> trees = {a, b, c};
  std::vector<size_t> arity;
  Tree total = tree_map(
      [&](std::span<const Array> xs) {
        arity.push_back(xs.size());
        return xs[0] + xs[1] * 2.0 + xs[2] * 3.0;
      },
      trees);
  EXPECT_EQ(arity, (std::vector<size_t>{3, 3}));
  EXPECT_EQ(total[0].leaf().to_vector<float>(), (std::vector<float>{321, 642}));
  EXPECT_EQ(total[1]["x"].leaf().to_vector<float>(), (std::vector<float>{963}));
  EXPECT_TRUE(total[2].is_none());
  // One tree is a unary map.
  Tree same = tree_map([](std::span<const Array> xs) { return xs[0]; }, std::span(&a, 1));
  EXPECT_EQ(same[0].leaf().impl(), a[0].leaf().impl());
}

// The examples of docs/trees.md, so that the guide stays true.
TEST(Tree, GuideExamples) {
  Array w1 = full({2, 3}, 1.0), b1 = full({3}, 2.0), w2 = full({3, 1}, 3.0), b2 = full({1}, 4.0);
  Tree model = Tree::dict({{"layers", Tree::list({Tree::dict({{"w", w1}, {"b", b1}}),
                                                  Tree::dict({{"w", w2}, {"b", b2}})})},
                           {"head", Tree()}});
  EXPECT_EQ(model.num_leaves(), 4);
  EXPECT_EQ(model.size_bytes(), (6 + 3 + 3 + 1) * 4);
  EXPECT_THAT(paths_of(model), ElementsAre("layers/0/b", "layers/0/w", "layers/1/b", "layers/1/w"));
  TreeDef def = model.structure();
  EXPECT_EQ(def.to_string(), "{head: none, layers: [{b: *, w: *}, {b: *, w: *}]}");
  std::vector<Array> leaves = model.leaves();
  for (Array& leaf : leaves) leaf = leaf * 0.5;
  Tree halved = unflatten(def, leaves);
  EXPECT_EQ(halved["layers"][1]["b"].leaf().item<float>(), 2.0f);
  EXPECT_TRUE(fails_with([&] { unflatten(def, std::span(leaves).first(3)); },
                         {"unflatten: the structure {head: none, layers: [{b: *, w: *}, {b: *, w: "
                          "*}]} has 4 leaves but 3 arrays were given"}));

  Tree params = model;
  Tree m = tree_map([](const Array& x) { return x * 0.0 + 1.0; }, params);
  Tree v = tree_map([](const Array& x) { return x * 0.0 + 4.0; }, params);
  std::vector<Tree> trees = {params, m, v};
  Tree out = tree_map(
      [](std::span<const Array> x) { return x[0] - 0.001 * x[1] / (sqrt(x[2]) + 1e-8); }, trees);
  EXPECT_NEAR(out["layers"][0]["w"].leaf().to_vector<float>()[0], 1.0f - 0.0005f, 1e-6);
  EXPECT_TRUE(fails_with(
      [&] { check_same_structure(params, params.with("head", Tree::dict({})), "sgd update"); },
      {"sgd update: tree structures differ at 'head': none vs an empty dict"}));
}

// ----- errors ---------------------------------------------------------------------------

TEST(TreeErrors, MissingKeyListsTheKeysAndSuggests) {
  Tree tree = Tree::dict({{"kernel", zeros({2})}, {"bias", zeros({2})}});
  std::string message = error_of([&] { (void)tree["kernl"]; });
  EXPECT_THAT(message,
              HasSubstr("tree[\"kernl\"]: no such key in a dict with keys {bias, kernel}"));
  EXPECT_THAT(message, HasSubstr("HINT: did you mean 'kernel'?"));
  EXPECT_THAT(message, HasSubstr("tests/tree/tree_test.cc:"));  // the caller's line
  EXPECT_TRUE(fails_with([&] { (void)tree["Bias"]; }, {"did you mean 'bias'?"}));
  std::string far = error_of([&] { (void)tree["weights"]; });
  EXPECT_THAT(far, HasSubstr("no such key in a dict with keys {bias, kernel}"));
  EXPECT_THAT(far, Not(HasSubstr("did you mean")));
  EXPECT_THAT(far, HasSubstr("tree.keys() lists them all"));
  EXPECT_TRUE(fails_with([&] { (void)Tree::dict({})["w"]; }, {"no such key in an empty dict"}));
}

TEST(TreeErrors, LongKeyListsAreCutShort) {
  std::vector<Tree::Item> items;
  for (int i = 0; i < 15; ++i) items.emplace_back(fmt::format("k{:02}", i), zeros({1}));
  Tree tree = Tree::dict(items);
  EXPECT_TRUE(fails_with([&] { (void)tree["x"]; }, {"{k00, k01,", "k09, ... (5 more)}"}));
}

TEST(TreeErrors, IndexOutOfRange) {
  Tree list = Tree::list({zeros({1}), zeros({2}), zeros({3})});
  EXPECT_TRUE(fails_with([&] { (void)list[3]; },
                         {"tree[3]: index out of range for a list of 3", "0 to 2"}));
  EXPECT_TRUE(fails_with([&] { (void)list[-1]; }, {"tree[-1]: index out of range"}));
  EXPECT_TRUE(fails_with([&] { (void)list[size_t{1} << 63]; }, {"index out of range"}));
  EXPECT_TRUE(fails_with([&] { (void)Tree::list({})[0]; }, {"list of 0", "the list is empty"}));
}

TEST(TreeErrors, LookupOnTheWrongKind) {
  Tree list = Tree::list({zeros({1})});
  Tree dict = Tree::dict({{"w", zeros({4})}});
  EXPECT_TRUE(
      fails_with([&] { (void)list["w"]; }, {"this node is a list of 1, not a dict", "tree[0]"}));
  EXPECT_TRUE(fails_with([&] { (void)dict[0]; },
                         {"tree[0]: this node is a dict with keys {w}, not a list"}));
  EXPECT_TRUE(
      fails_with([&] { (void)dict["w"]["x"]; }, {"this node is a leaf f32[4], not a dict"}));
  EXPECT_TRUE(fails_with([&] { (void)Tree()[0]; }, {"this node is none, not a list"}));
  EXPECT_TRUE(fails_with([&] { (void)list.keys(); }, {"a list of 1, not a dict"}));
  EXPECT_TRUE(fails_with([&] { (void)Tree().items(); }, {"none, not a dict"}));
  EXPECT_TRUE(fails_with([&] { (void)dict["w"].size(); },
                         {"Tree::size: this node is a leaf f32[4]", "leaf().size()"}));
}

TEST(TreeErrors, LeafOnANonLeaf) {
  Tree dict = Tree::dict({{"w", zeros({4})}, {"b", zeros({})}});
  EXPECT_TRUE(fails_with([&] { (void)dict.leaf(); },
                         {"Tree::leaf: this node is a dict with keys {b, w}, not a leaf",
                          "HINT: look up an entry first"}));
  EXPECT_TRUE(fails_with([&] { (void)Tree::list({}).leaf(); }, {"a list of 0, not a leaf"}));
  EXPECT_TRUE(fails_with([&] { (void)Tree().leaf(); }, {"this node is none, not a leaf"}));
}

TEST(TreeErrors, BadKeys) {
  EXPECT_TRUE(fails_with(
      [] {
        Tree::dict({{"w", zeros({1})}, {"b", zeros({1})}, {"w", Tree()}});
      },
      {"Tree::dict: duplicate key 'w'", "with(key, value)"}));
  EXPECT_TRUE(fails_with([] { Tree::dict({{"", zeros({1})}}); }, {"Tree::dict: a key is empty"}));
  EXPECT_TRUE(fails_with(
      [] {
        Tree::dict({{"dense/kernel", zeros({1})}});
      },
      {"key 'dense/kernel' contains '/'", "use '_' or '.'"}));
  EXPECT_TRUE(fails_with([] { Tree::dict(std::vector<Tree::Item>{{"a/", Tree()}}); }, {"'a/'"}));
  Tree dict = Tree::dict({{"w", zeros({1})}});
  EXPECT_TRUE(
      fails_with([&] { dict.with("a/b", Tree()); }, {"Tree::with: key 'a/b' contains '/'"}));
  EXPECT_TRUE(fails_with([&] { dict.with("", Tree()); }, {"Tree::with: a key is empty"}));
  EXPECT_TRUE(fails_with([] { Tree().with("w", Tree()); },
                         {"Tree::with: this node is none, not a dict", "Tree::dict({})"}));
  EXPECT_TRUE(fails_with([] { Tree::list({}).with("w", Tree()); }, {"a list of 0, not a dict"}));
}

TEST(TreeErrors, UndefinedArrays) {
  EXPECT_TRUE(
      fails_with([] { Tree leaf = Array(); }, {"Tree: a leaf must hold an array", "undefined"}));
  TreeDef def = Tree::dict({{"a", zeros({1})}, {"b", zeros({1})}}).structure();
  std::vector<Array> leaves = {zeros({1}), Array()};
  EXPECT_TRUE(fails_with([&] { unflatten(def, leaves); },
                         {"unflatten: leaf 1 (at 'b') is an undefined Array"}));
  Tree tree = Tree::dict({{"a", Tree::list({zeros({1})})}});
  EXPECT_TRUE(fails_with([&] { tree_map([](const Array&) { return Array(); }, tree); },
                         {"tree_map: the function returned an undefined Array for the leaf at "
                          "'a/0'"}));
}

TEST(TreeErrors, UnflattenWithTheWrongNumberOfLeaves) {
  TreeDef def = model().structure();
  std::vector<Array> five(5, zeros({1}));
  std::vector<Array> seven(7, zeros({1}));
  EXPECT_TRUE(fails_with([&] { unflatten(def, five); },
                         {"unflatten: the structure {dense1: {bias: *, kernel: *}", "has 6 leaves",
                          "but 5 arrays were given", "tests/tree/tree_test.cc:"}));
  EXPECT_TRUE(fails_with([&] { unflatten(def, seven); }, {"but 7 arrays were given"}));
  EXPECT_TRUE(
      fails_with([&] { unflatten(TreeDef(), five); }, {"the structure none has 0 leaves but 5"}));
}

TEST(TreeErrors, MismatchedStructuresNameThePathAndBothSides) {
  Tree a = Tree::dict({{"dense1", Tree::dict({{"bias", zeros({512})}, {"kernel", zeros({2})}})},
                       {"layers", Tree::list({zeros({1}), zeros({1}), zeros({1})})}});
  Tree b = Tree::dict(
      {{"dense1", Tree::dict({{"bias", Tree::dict({{"w", zeros({1})}})}, {"kernel", zeros({2})}})},
       {"layers", Tree::list({zeros({1}), zeros({1})})}});
  EXPECT_TRUE(fails_with([&] { check_same_structure(a, b, "optimizer update"); },
                         {"optimizer update: tree structures differ at 'dense1/bias': a leaf "
                          "f32[512] vs a dict with keys {w}",
                          "HINT:"}));
  Tree c = a.with("dense1", a["dense1"]);
  c = Tree::dict({{"dense1", a["dense1"]}, {"layers", b["layers"]}});
  EXPECT_TRUE(
      fails_with([&] { check_same_structure(a, c, "update"); },
                 {"update: tree structures differ at 'layers': a list of 3 vs a list of 2"}));
  Tree d = Tree::dict({{"dense1", Tree::dict({{"bias", zeros({1})}, {"kernl", zeros({2})}})},
                       {"layers", a["layers"]}});
  EXPECT_TRUE(fails_with([&] { check_same_structure(a, d, "x"); },
                         {"at 'dense1': a dict with keys {bias, kernel} vs a dict with keys {bias, "
                          "kernl} (only in the first: kernel; only in the second: kernl)"}));
  EXPECT_TRUE(fails_with([&] { check_same_structure(Tree(), Tree::dict({}), "x"); },
                         {"x: tree structures differ at the root: none vs an empty dict"}));
  EXPECT_NO_THROW(check_same_structure(a, a, "x"));

  auto sub = [](const Array& x, const Array& y) { return x - y; };
  EXPECT_TRUE(fails_with([&] { tree_map(sub, a, b); },
                         {"tree_map: tree structures differ at 'dense1/bias' (tree 0 vs tree 1): a "
                          "leaf f32[512] vs a dict with keys {w}"}));
  std::vector<Tree> three = {a, a, c};
  EXPECT_TRUE(fails_with([&] { tree_map([](std::span<const Array> xs) { return xs[0]; }, three); },
                         {"differ at 'layers' (tree 0 vs tree 2): a list of 3 vs a list of 2"}));
  EXPECT_TRUE(fails_with(
      [] { tree_map([](std::span<const Array> xs) { return xs[0]; }, std::span<const Tree>()); },
      {"tree_map: no trees were given"}));
}

TEST(TreeErrors, StructureMismatchFailsBeforeMappingAnyLeaf) {
  Tree a = Tree::list({zeros({1}), zeros({1})});
  Tree b = Tree::list({zeros({1}), Tree()});
  int calls = 0;
  EXPECT_TRUE(fails_with(
      [&] {
        tree_map(
            [&](const Array& x, const Array&) {
              ++calls;
              return x;
            },
            a, b);
      },
      {"differ at '1' (tree 0 vs tree 1): a leaf f32[1] vs none"}));
  EXPECT_EQ(calls, 0);
}

TEST(TreeErrors, ErrorsInsideTheMappedFunctionNameTheLeaf) {
  Tree params = Tree::dict({{"b", zeros({2})}, {"w", zeros({3, 4})}});
  Tree grads = Tree::dict({{"b", zeros({2})}, {"w", zeros({4, 3})}});
  std::string message = error_of(
      [&] { tree_map([](const Array& p, const Array& g) { return p - g; }, params, grads); });
  EXPECT_THAT(message, HasSubstr("tree_map at 'w': "));
  EXPECT_THAT(message, HasSubstr("f32[3,4]"));
  EXPECT_THAT(message, HasSubstr("tests/tree/tree_test.cc:"));  // where the op was called
}

}  // namespace
}  // namespace kiln
