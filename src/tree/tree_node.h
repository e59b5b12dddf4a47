// The nodes behind kiln::Tree and kiln::TreeDef (include/kiln/tree.h), shared by the tree
// sources: construction and lookup (tree.cc), structure and flattening (tree_def.cc), and
// comparison and mapping (tree_map.cc). A null node pointer stands for none.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/tree.h"

namespace kiln {

struct Tree::Node {
  Tree::Kind kind = Tree::Kind::kNone;
  Array leaf;                     // kLeaf
  std::vector<Tree::Item> items;  // kDict: sorted by key, keys unique and valid
  std::vector<Tree> elements;     // kList
  int64_t num_leaves = 0;         // cached: trees are immutable
};

struct TreeDef::Node {
  Tree::Kind kind = Tree::Kind::kNone;
  std::vector<std::string> keys;  // kDict, sorted
  std::vector<TreeDef> children;  // kDict (one per key) and kList
  int64_t num_leaves = 0;
};

// The one door into the private representation, so that the public classes expose none.
struct TreeAccess {
  using TreeNode = Tree::Node;
  using DefNode = TreeDef::Node;
  static const Tree::Node* node(const Tree& tree) { return tree.node_.get(); }
  static const TreeDef::Node* node(const TreeDef& def) { return def.node_.get(); }
  static Tree make(Tree::Node node) {
    return Tree(std::make_shared<const Tree::Node>(std::move(node)));
  }
  static TreeDef make(TreeDef::Node node) {
    return TreeDef(std::make_shared<const TreeDef::Node>(std::move(node)));
  }
};

using TreeNode = TreeAccess::TreeNode;
using DefNode = TreeAccess::DefNode;

namespace tree_detail {

// How error messages name a node: "none", "a leaf f32[512]", "a dict with keys {b, w}",
// "an empty dict", "a list of 3".
std::string describe(const Tree& tree);
// "{b, w}"; long lists are cut short with a count of the rest.
std::string format_keys(const std::vector<std::string>& keys);
// "'dense1/bias'", or "the root" for the empty path.
std::string quote_path(std::string_view path);
// `text`, cut to a readable length for an error message.
std::string shorten(std::string text);
// A path one level down: "layers" + "0" -> "layers/0".
std::string join_path(std::string_view parent, std::string_view part);

}  // namespace tree_detail
}  // namespace kiln
