// Flattening of kiln::Tree (include/kiln/tree.h): leaves in canonical order, leaf paths,
// the leafless structure (TreeDef), unflatten, and the printed forms of both.
#include <fmt/format.h>

#include "base/check.h"
#include "tree/tree_node.h"

namespace kiln {
namespace {

using tree_detail::join_path;

// Depth first, dict entries in key order: the one order every flatten and map uses.
void visit_leaves(const Tree& tree, const std::string& path,
                  const std::function<void(const std::string&, const Array&)>& visit) {
  switch (tree.kind()) {
    case Tree::Kind::kNone:
      return;
    case Tree::Kind::kLeaf:
      visit(path, tree.leaf());
      return;
    case Tree::Kind::kDict:
      for (const auto& [key, child] : tree.items())
        visit_leaves(child, join_path(path, key), visit);
      return;
    case Tree::Kind::kList:
      for (size_t i = 0; i < tree.size(); ++i) {
        visit_leaves(tree[i], join_path(path, std::to_string(i)), visit);
      }
      return;
  }
}

std::string tree_text(const Tree& tree) {
  switch (tree.kind()) {
    case Tree::Kind::kNone:
      return "none";
    case Tree::Kind::kLeaf:
      return tree.leaf().aval().to_string();
    case Tree::Kind::kDict: {
      std::string text = "{";
      for (const auto& [key, child] : tree.items()) {
        if (text.size() > 1) text += ", ";
        text += key + ": " + tree_text(child);
      }
      return text + "}";
    }
    case Tree::Kind::kList: {
      std::string text = "[";
      for (size_t i = 0; i < tree.size(); ++i) {
        if (i > 0) text += ", ";
        text += tree_text(tree[i]);
      }
      return text + "]";
    }
  }
  KILN_CHECK(false, "unknown tree kind");
}

Tree build(const TreeDef& def, std::span<const Array> leaves, size_t& next, const std::string& path,
           CallSite site) {
  const DefNode* node = TreeAccess::node(def);
  if (node == nullptr) return Tree();
  switch (node->kind) {
    case Tree::Kind::kNone:
      return Tree();
    case Tree::Kind::kLeaf: {
      const Array& leaf = leaves[next++];
      if (!leaf.defined()) {
        fail(site,
             fmt::format("unflatten: leaf {} (at {}) is an undefined Array", next - 1,
                         tree_detail::quote_path(path)),
             "every leaf must be an array; use a TreeDef with a none node for an empty place");
      }
      return Tree(leaf, site);
    }
    case Tree::Kind::kDict: {
      std::vector<Tree::Item> items;
      items.reserve(node->keys.size());
      for (size_t i = 0; i < node->keys.size(); ++i) {
        const std::string& key = node->keys[i];
        items.emplace_back(key, build(node->children[i], leaves, next, join_path(path, key), site));
      }
      return Tree::dict(std::move(items), site);
    }
    case Tree::Kind::kList: {
      std::vector<Tree> elements;
      elements.reserve(node->children.size());
      for (size_t i = 0; i < node->children.size(); ++i) {
        elements.push_back(
            build(node->children[i], leaves, next, join_path(path, std::to_string(i)), site));
      }
      return Tree::list(std::move(elements));
    }
  }
  KILN_CHECK(false, "unknown tree kind");
}

std::string def_text(const TreeDef& def) {
  const DefNode* node = TreeAccess::node(def);
  if (node == nullptr) return "none";
  switch (node->kind) {
    case Tree::Kind::kNone:
      return "none";
    case Tree::Kind::kLeaf:
      return "*";
    case Tree::Kind::kDict: {
      std::string text = "{";
      for (size_t i = 0; i < node->keys.size(); ++i) {
        if (i > 0) text += ", ";
        text += node->keys[i] + ": " + def_text(node->children[i]);
      }
      return text + "}";
    }
    case Tree::Kind::kList: {
      std::string text = "[";
      for (size_t i = 0; i < node->children.size(); ++i) {
        if (i > 0) text += ", ";
        text += def_text(node->children[i]);
      }
      return text + "]";
    }
  }
  KILN_CHECK(false, "unknown tree kind");
}

}  // namespace

int64_t Tree::size_bytes() const {
  int64_t bytes = 0;
  visit_leaves(*this, "",
               [&](const std::string&, const Array& leaf) { bytes += leaf.size_bytes(); });
  return bytes;
}

std::vector<Array> Tree::leaves() const {
  std::vector<Array> leaves;
  leaves.reserve(static_cast<size_t>(num_leaves()));
  visit_leaves(*this, "", [&](const std::string&, const Array& leaf) { leaves.push_back(leaf); });
  return leaves;
}

std::vector<std::pair<std::string, Array>> Tree::leaves_with_paths() const {
  std::vector<std::pair<std::string, Array>> leaves;
  leaves.reserve(static_cast<size_t>(num_leaves()));
  visit_leaves(*this, "", [&](const std::string& path, const Array& leaf) {
    leaves.emplace_back(path, leaf);
  });
  return leaves;
}

TreeDef Tree::structure() const {
  DefNode node;
  node.kind = kind();
  node.num_leaves = num_leaves();
  switch (kind()) {
    case Kind::kNone:
      return TreeDef();
    case Kind::kLeaf:
      break;
    case Kind::kDict:
      for (const auto& [key, child] : items()) {
        node.keys.push_back(key);
        node.children.push_back(child.structure());
      }
      break;
    case Kind::kList:
      for (size_t i = 0; i < size(); ++i) node.children.push_back((*this)[i].structure());
      break;
  }
  return TreeAccess::make(std::move(node));
}

std::string Tree::to_string() const {
  return tree_text(*this);
}

TreeDef::TreeDef() = default;

int64_t TreeDef::num_leaves() const {
  return node_ ? node_->num_leaves : 0;
}

std::string TreeDef::to_string() const {
  return def_text(*this);
}

bool operator==(const TreeDef& a, const TreeDef& b) {
  const DefNode* x = TreeAccess::node(a);
  const DefNode* y = TreeAccess::node(b);
  if (x == y) return true;
  Tree::Kind x_kind = x ? x->kind : Tree::Kind::kNone;
  Tree::Kind y_kind = y ? y->kind : Tree::Kind::kNone;
  if (x_kind != y_kind) return false;
  if (x_kind == Tree::Kind::kNone || x_kind == Tree::Kind::kLeaf) return true;
  return x->num_leaves == y->num_leaves && x->keys == y->keys && x->children == y->children;
}

Tree unflatten(const TreeDef& def, std::span<const Array> leaves, CallSite site) {
  if (static_cast<int64_t>(leaves.size()) != def.num_leaves()) {
    fail(site,
         fmt::format("unflatten: the structure {} has {} leaves but {} arrays were given",
                     tree_detail::shorten(def.to_string()), def.num_leaves(), leaves.size()),
         "pass exactly the arrays that tree.leaves() gave, in the same order");
  }
  size_t next = 0;
  Tree tree = build(def, leaves, next, "", site);
  KILN_CHECK(next == leaves.size(), "unflatten used {} of {} leaves", next, leaves.size());
  return tree;
}

std::ostream& operator<<(std::ostream& out, const Tree& tree) {
  return out << tree.to_string();
}

std::ostream& operator<<(std::ostream& out, const TreeDef& def) {
  return out << def.to_string();
}

}  // namespace kiln
