// kiln::Tree construction, lookup and functional update (include/kiln/tree.h), plus the
// wording shared by the tree errors. Flattening lives in tree_def.cc, mapping in
// tree_map.cc.
#include <algorithm>

#include <fmt/format.h>

#include "base/check.h"
#include "base/edit_distance.h"
#include "tree/tree_node.h"

namespace kiln {
namespace tree_detail {
namespace {

// The closest key, if it is close enough to be a likely typo. Ties go to the first in
// key order, so the suggestion is deterministic.
const std::string* closest_key(std::string_view wanted, const std::vector<Tree::Item>& items) {
  // One edit in three characters; very short keys only match when equal but for case.
  size_t limit = wanted.size() / 3;
  const std::string* best = nullptr;
  size_t best_distance = limit + 1;
  for (const auto& [key, value] : items) {
    size_t distance = edit_distance(wanted, key);
    if (distance < best_distance) {
      best = &key;
      best_distance = distance;
    }
  }
  return best;
}

std::vector<std::string> keys_of(const std::vector<Tree::Item>& items) {
  std::vector<std::string> keys;
  keys.reserve(items.size());
  for (const auto& item : items) keys.push_back(item.first);
  return keys;
}

}  // namespace

std::string format_keys(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 10;
  std::string text = "{";
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += keys[i];
  }
  if (keys.size() > kShown) text += fmt::format(", ... ({} more)", keys.size() - kShown);
  return text + "}";
}

std::string describe(const Tree& tree) {
  switch (tree.kind()) {
    case Tree::Kind::kNone:
      return "none";
    case Tree::Kind::kLeaf:
      return "a leaf " + tree.leaf().aval().to_string();
    case Tree::Kind::kDict:
      if (tree.size() == 0) return "an empty dict";
      return "a dict with keys " + format_keys(tree.keys());
    case Tree::Kind::kList:
      return fmt::format("a list of {}", tree.size());
  }
  KILN_CHECK(false, "unknown tree kind");
}

std::string quote_path(std::string_view path) {
  return path.empty() ? std::string("the root") : fmt::format("'{}'", path);
}

std::string shorten(std::string text) {
  constexpr size_t kMaxChars = 200;
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars - 4) + " ...";
  return text;
}

std::string join_path(std::string_view parent, std::string_view part) {
  if (parent.empty()) return std::string(part);
  return fmt::format("{}/{}", parent, part);
}

}  // namespace tree_detail

namespace {

using tree_detail::describe;

void check_key(std::string_view key, std::string_view op, CallSite site) {
  if (key.empty()) {
    fail(site, fmt::format("{}: a key is empty", op),
         "give every dict entry a non-empty name; it becomes part of the leaf paths");
  }
  if (key.find('/') != std::string_view::npos) {
    fail(site, fmt::format("{}: key '{}' contains '/'", op, key),
         "'/' separates the parts of a leaf path (\"layers/0/w\"); use '_' or '.' in keys");
  }
}

// The first entry whose key is not less than `key`, in a dict's sorted entries.
template <typename Items>
auto find_key(Items& items, std::string_view key) {
  return std::lower_bound(
      items.begin(), items.end(), key,
      [](const Tree::Item& item, std::string_view wanted) { return item.first < wanted; });
}

int64_t count_leaves(const std::vector<Tree>& trees) {
  int64_t count = 0;
  for (const Tree& tree : trees) count += tree.num_leaves();
  return count;
}

Tree make_dict(std::vector<Tree::Item> items, CallSite site) {
  for (const auto& item : items) check_key(item.first, "Tree::dict", site);
  std::sort(items.begin(), items.end(),
            [](const Tree::Item& a, const Tree::Item& b) { return a.first < b.first; });
  auto duplicate = std::adjacent_find(
      items.begin(), items.end(),
      [](const Tree::Item& a, const Tree::Item& b) { return a.first == b.first; });
  if (duplicate != items.end()) {
    fail(site, fmt::format("Tree::dict: duplicate key '{}'", duplicate->first),
         "each key may appear once; use tree.with(key, value) to replace an entry");
  }
  TreeNode node;
  node.kind = Tree::Kind::kDict;
  for (const auto& item : items) node.num_leaves += item.second.num_leaves();
  node.items = std::move(items);
  return TreeAccess::make(std::move(node));
}

}  // namespace

Tree::Tree() = default;

Tree::Tree(Array leaf, CallSite site) {
  if (!leaf.defined()) {
    fail(site, "Tree: a leaf must hold an array, and this Array is undefined (default-constructed)",
         "create the array before putting it in a tree, or use Tree() for an empty node");
  }
  Node node;
  node.kind = Kind::kLeaf;
  node.leaf = std::move(leaf);
  node.num_leaves = 1;
  *this = TreeAccess::make(std::move(node));
}

Tree Tree::dict(std::initializer_list<Item> items, CallSite site) {
  return make_dict(std::vector<Item>(items), site);
}

Tree Tree::dict(std::vector<Item> items, CallSite site) {
  return make_dict(std::move(items), site);
}

Tree Tree::list(std::vector<Tree> items) {
  Node node;
  node.kind = Kind::kList;
  node.num_leaves = count_leaves(items);
  node.elements = std::move(items);
  return TreeAccess::make(std::move(node));
}

Tree::Kind Tree::kind() const {
  return node_ ? node_->kind : Kind::kNone;
}

const Array& Tree::leaf(CallSite site) const {
  if (!is_leaf()) {
    fail(site, fmt::format("Tree::leaf: this node is {}, not a leaf", describe(*this)),
         is_dict() ? "look up an entry first (tree[\"key\"].leaf()), or use leaves() for all arrays"
         : is_list() ? "index an entry first (tree[0].leaf()), or use leaves() for all arrays"
                     : "");
  }
  return node_->leaf;
}

const Tree& Tree::operator[](TreeKey key) const {
  if (!is_dict()) {
    fail(key.site,
         fmt::format("tree[\"{}\"]: this node is {}, not a dict", key.key, describe(*this)),
         is_list() ? "index a list by position: tree[0]" : "");
  }
  const auto& items = node_->items;
  auto found = find_key(items, key.key);
  if (found == items.end() || found->first != key.key) {
    const std::string* suggestion = tree_detail::closest_key(key.key, items);
    fail(key.site, fmt::format("tree[\"{}\"]: no such key in {}", key.key, describe(*this)),
         suggestion ? fmt::format("did you mean '{}'?", *suggestion)
                    : "check the spelling against the dict's keys (tree.keys() lists them all); "
                      "use tree.contains(key) to test for an optional entry");
  }
  return found->second;
}

const Tree& Tree::operator[](TreeIndex index) const {
  if (!is_list()) {
    fail(index.site,
         fmt::format("tree[{}]: this node is {}, not a list", index.index, describe(*this)),
         is_dict() ? "look up a dict entry by key: tree[\"name\"]" : "");
  }
  int64_t count = static_cast<int64_t>(node_->elements.size());
  if (index.index < 0 || index.index >= count) {
    fail(index.site,
         fmt::format("tree[{}]: index out of range for a list of {}", index.index, count),
         count == 0   ? std::string("the list is empty")
         : count == 1 ? std::string("the only valid index is 0")
                      : fmt::format("valid indices are 0 to {}; negative indices are not supported",
                                    count - 1));
  }
  return node_->elements[static_cast<size_t>(index.index)];
}

bool Tree::contains(std::string_view key) const {
  if (!is_dict()) return false;
  auto found = find_key(node_->items, key);
  return found != node_->items.end() && found->first == key;
}

Tree Tree::with(std::string_view key, Tree value, CallSite site) const {
  if (!is_dict()) {
    fail(site, fmt::format("Tree::with: this node is {}, not a dict", describe(*this)),
         "with() updates a dict entry; start from Tree::dict({}) to build a dict entry by entry");
  }
  check_key(key, "Tree::with", site);
  Node node;
  node.kind = Kind::kDict;
  node.items = node_->items;
  auto found = find_key(node.items, key);
  if (found != node.items.end() && found->first == key) {
    found->second = std::move(value);
  } else {
    node.items.emplace(found, std::string(key), std::move(value));
  }
  for (const auto& item : node.items) node.num_leaves += item.second.num_leaves();
  return TreeAccess::make(std::move(node));
}

size_t Tree::size(CallSite site) const {
  switch (kind()) {
    case Kind::kNone:
      return 0;
    case Kind::kLeaf:
      fail(site, fmt::format("Tree::size: this node is {}, which has no entries", describe(*this)),
           "for the number of elements of the array use tree.leaf().size()");
    case Kind::kDict:
      return node_->items.size();
    case Kind::kList:
      return node_->elements.size();
  }
  KILN_CHECK(false, "unknown tree kind");
}

std::vector<std::string> Tree::keys(CallSite site) const {
  return tree_detail::keys_of(items(site));
}

const std::vector<Tree::Item>& Tree::items(CallSite site) const {
  if (!is_dict()) {
    fail(site, fmt::format("Tree: this node is {}, not a dict, so it has no keys", describe(*this)),
         is_list() ? "a list's entries are tree[0] to tree[size() - 1]" : "");
  }
  return node_->items;
}

int64_t Tree::num_leaves() const {
  return node_ ? node_->num_leaves : 0;
}

}  // namespace kiln
