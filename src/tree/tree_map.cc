// Structure comparison and tree_map for kiln::Tree (include/kiln/tree.h). Trees are
// compared before any leaf is mapped, so a mismatch fails before fn queues any work, and
// an error raised by fn names the leaf it was working on.
#include <algorithm>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "base/check.h"
#include "tree/tree_node.h"

namespace kiln {
namespace {

using tree_detail::describe;
using tree_detail::join_path;
using tree_detail::quote_path;

struct Difference {
  std::string path;
  std::string detail;  // "a list of 3 vs a list of 2"
};

// What two dicts' keys differ in, e.g. " (only in the first: kernel; only in the second:
// kernl)", since the key lists in the descriptions may be cut short.
std::string key_difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> only_a, only_b;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only_a));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(only_b));
  std::string text;
  auto add = [&](std::string_view side, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    text += text.empty() ? " (" : "; ";
    std::string listed = tree_detail::format_keys(keys);
    text += fmt::format("only in the {}: {}", side, listed.substr(1, listed.size() - 2));
  };
  add("first", only_a);
  add("second", only_b);
  return text.empty() ? text : text + ")";
}

// The first place, in leaf order, where the structures of a and b differ.
std::optional<Difference> first_difference(const Tree& a, const Tree& b, const std::string& path) {
  auto differ = [&](std::string extra = {}) {
    return Difference{path, fmt::format("{} vs {}{}", describe(a), describe(b), extra)};
  };
  if (a.kind() != b.kind()) return differ();
  switch (a.kind()) {
    case Tree::Kind::kNone:
    case Tree::Kind::kLeaf:
      return std::nullopt;
    case Tree::Kind::kDict: {
      std::vector<std::string> a_keys = a.keys();
      std::vector<std::string> b_keys = b.keys();
      if (a_keys != b_keys) return differ(key_difference(a_keys, b_keys));
      for (const std::string& key : a_keys) {
        if (auto found = first_difference(a[key], b[key], join_path(path, key))) return found;
      }
      return std::nullopt;
    }
    case Tree::Kind::kList: {
      if (a.size() != b.size()) return differ();
      for (size_t i = 0; i < a.size(); ++i) {
        if (auto found = first_difference(a[i], b[i], join_path(path, std::to_string(i)))) {
          return found;
        }
      }
      return std::nullopt;
    }
  }
  KILN_CHECK(false, "unknown tree kind");
}

constexpr const char* kStructureHint =
    "trees combined leaf by leaf need the same nesting, dict keys and list lengths; print "
    "both trees (operator<<) to compare them";

using MapFn = std::function<Array(std::span<const Array>)>;

// Maps the corresponding nodes of `trees` (already known to share their structure).
Tree map_nodes(const MapFn& fn, std::span<const Tree* const> trees, const std::string& path,
               CallSite site) {
  const Tree& first = *trees[0];
  switch (first.kind()) {
    case Tree::Kind::kNone:
      return Tree();
    case Tree::Kind::kLeaf: {
      std::vector<Array> leaves;
      leaves.reserve(trees.size());
      for (const Tree* tree : trees) leaves.push_back(tree->leaf());
      Array result;
      try {
        result = fn(leaves);
      } catch (const Error& error) {
        // Keep the op's own message, hint and call site; add which leaf it was mapping.
        throw Error(fmt::format("tree_map at {}: {}", quote_path(path), error.message()),
                    error.hint(), error.site());
      }
      if (!result.defined()) {
        fail(site,
             fmt::format("tree_map: the function returned an undefined Array for the leaf at {}",
                         quote_path(path)),
             "return an array for every leaf; to change the structure, build the new tree with "
             "Tree::dict / Tree::list");
      }
      return Tree(std::move(result), site);
    }
    case Tree::Kind::kDict: {
      std::vector<Tree::Item> items;
      items.reserve(first.size());
      std::vector<const Tree*> children(trees.size());
      for (const auto& [key, child] : first.items()) {
        for (size_t t = 0; t < trees.size(); ++t) children[t] = &(*trees[t])[key];
        items.emplace_back(key, map_nodes(fn, children, join_path(path, key), site));
      }
      return Tree::dict(std::move(items), site);
    }
    case Tree::Kind::kList: {
      std::vector<Tree> elements;
      elements.reserve(first.size());
      std::vector<const Tree*> children(trees.size());
      for (size_t i = 0; i < first.size(); ++i) {
        for (size_t t = 0; t < trees.size(); ++t) children[t] = &(*trees[t])[i];
        elements.push_back(map_nodes(fn, children, join_path(path, std::to_string(i)), site));
      }
      return Tree::list(std::move(elements));
    }
  }
  KILN_CHECK(false, "unknown tree kind");
}

}  // namespace

bool same_structure(const Tree& a, const Tree& b) {
  return !first_difference(a, b, "");
}

void check_same_structure(const Tree& a, const Tree& b, std::string_view what, CallSite site) {
  if (auto difference = first_difference(a, b, "")) {
    fail(site,
         fmt::format("{}: tree structures differ at {}: {}", what, quote_path(difference->path),
                     difference->detail),
         kStructureHint);
  }
}

Tree tree_map(const std::function<Array(const Array&)>& fn, const Tree& tree, CallSite site) {
  const Tree* trees[] = {&tree};
  return map_nodes([&](std::span<const Array> leaves) { return fn(leaves[0]); }, trees, "", site);
}

Tree tree_map(const std::function<Array(const Array&, const Array&)>& fn, const Tree& a,
              const Tree& b, CallSite site) {
  const Tree pair[] = {a, b};
  return tree_map([&](std::span<const Array> leaves) { return fn(leaves[0], leaves[1]); }, pair,
                  site);
}

Tree tree_map(const std::function<Array(std::span<const Array>)>& fn, std::span<const Tree> trees,
              CallSite site) {
  if (trees.empty()) {
    fail(site, "tree_map: no trees were given", "pass at least one tree to map over");
  }
  for (size_t t = 1; t < trees.size(); ++t) {
    if (auto difference = first_difference(trees[0], trees[t], "")) {
      fail(site,
           fmt::format("tree_map: tree structures differ at {} (tree 0 vs tree {}): {}",
                       quote_path(difference->path), t, difference->detail),
           kStructureHint);
    }
  }
  std::vector<const Tree*> pointers;
  pointers.reserve(trees.size());
  for (const Tree& tree : trees) pointers.push_back(&tree);
  return map_nodes(fn, pointers, "", site);
}

}  // namespace kiln
