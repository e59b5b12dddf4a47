// SpecTree (kiln/sharding.h): shard_map's specs as a prefix of the arguments' tree.
#include <algorithm>
#include <functional>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/sharding.h"
#include "tree/tree_node.h"

namespace kiln {

// A spec for a whole subtree, or a dict (sorted by key, as Tree's) or list of SpecTrees.
struct SpecTree::Node {
  using Items = std::vector<std::pair<std::string, SpecTree>>;
  std::variant<PartitionSpec, Items, std::vector<SpecTree>> value;
};

namespace {

std::string child_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}/{}", path, key);
}

}  // namespace

SpecTree::SpecTree(PartitionSpec spec)
    : node_(std::make_shared<const Node>(Node{std::move(spec)})) {}

SpecTree SpecTree::dict(std::vector<std::pair<std::string, SpecTree>> items) {
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return SpecTree(std::make_shared<const Node>(Node{std::move(items)}));
}

SpecTree SpecTree::list(std::vector<SpecTree> items) {
  return SpecTree(std::make_shared<const Node>(Node{std::move(items)}));
}

SpecTree SpecTree::of_leaves(const Tree& like, std::span<const PartitionSpec> leaf_specs,
                             CallSite site) {
  if (static_cast<int64_t>(leaf_specs.size()) != like.num_leaves()) {
    fail(site, fmt::format("SpecTree::of_leaves: {} spec(s) for a tree of {} leaves",
                           leaf_specs.size(), like.num_leaves()));
  }
  size_t next = 0;
  std::function<SpecTree(const Tree&)> mirror = [&](const Tree& tree) -> SpecTree {
    switch (tree.kind()) {
      case Tree::Kind::kNone:
        return SpecTree(PartitionSpec());  // no leaves to give a spec
      case Tree::Kind::kLeaf:
        return SpecTree(leaf_specs[next++]);
      case Tree::Kind::kDict: {
        std::vector<std::pair<std::string, SpecTree>> items;
        for (const auto& [key, child] : tree.items()) items.emplace_back(key, mirror(child));
        return dict(std::move(items));
      }
      case Tree::Kind::kList: {
        std::vector<SpecTree> items;
        for (size_t i = 0; i < tree.size(); ++i) items.push_back(mirror(tree[i]));
        return list(std::move(items));
      }
    }
    return SpecTree(PartitionSpec());
  };
  return mirror(like);
}

std::vector<PartitionSpec> SpecTree::leaf_specs(const Tree& tree, std::string_view what,
                                                CallSite site) const {
  std::vector<PartitionSpec> specs;
  std::function<void(const SpecTree&, const Tree&, const std::string&)> walk =
      [&](const SpecTree& spec, const Tree& node, const std::string& path) {
        auto mismatch = [&](const std::string& expected) {
          fail(site,
               fmt::format("{}: the specs do not match the tree at {}: the specs have {}, "
                           "the tree has {}",
                           what, tree_detail::quote_path(path), expected,
                           tree_detail::describe(node)),
               "give one PartitionSpec for a whole subtree, or a SpecTree of the tree's shape");
        };
        if (const auto* whole = std::get_if<PartitionSpec>(&spec.node_->value)) {
          for (int64_t i = 0; i < node.num_leaves(); ++i) specs.push_back(*whole);
          return;
        }
        if (const auto* items = std::get_if<Node::Items>(&spec.node_->value)) {
          std::vector<std::string> keys;
          for (const auto& item : *items) keys.push_back(item.first);
          if (!node.is_dict() || node.keys() != keys) {
            mismatch("a dict with keys " + tree_detail::format_keys(keys));
          }
          for (size_t i = 0; i < items->size(); ++i) {
            walk((*items)[i].second, node.items()[i].second, child_path(path, keys[i]));
          }
          return;
        }
        const auto& list = std::get<std::vector<SpecTree>>(spec.node_->value);
        if (!node.is_list() || node.size() != list.size()) {
          mismatch(fmt::format("a list of {}", list.size()));
        }
        for (size_t i = 0; i < list.size(); ++i) {
          walk(list[i], node[i], child_path(path, std::to_string(i)));
        }
      };
  walk(*this, tree, "");
  return specs;
}

}  // namespace kiln
