// Pytrees: nested dicts and lists of Arrays, the shape of model parameters, gradients and
// optimizer state. A Tree flattens to its leaves (depth first, dict keys sorted) and back,
// and tree_map applies a function leaf by leaf across trees of the same structure.
//
//   kiln::Tree params = kiln::Tree::dict({{"w", w}, {"b", b}});
//   kiln::Tree next = kiln::tree_map([](const Array& p, const Array& g) { return p - 0.1 * g; },
//                                    params, grads);
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/error.h"

namespace kiln {

// A dict key as written in `tree["w"]`, carrying the caller's line for errors.
struct TreeKey {
  template <typename K>
  requires std::convertible_to<const K&, std::string_view> TreeKey(
      const K& key, CallSite site = {})  // NOLINT: implicit, so that tree["w"] works
      : key(key), site(site) {}
  std::string_view key;
  CallSite site;
};

// A list index as written in `tree[0]`, carrying the caller's line for errors. Kept signed
// so that a negative index is reported as such rather than as a huge unsigned one.
struct TreeIndex {
  template <std::integral I>
  requires(!std::same_as<I, bool>)
      TreeIndex(I index, CallSite site = {})  // NOLINT: implicit, so that tree[0] works
      : index(clamp(index)), site(site) {}
  int64_t index;
  CallSite site;

 private:
  template <std::integral I>
  static int64_t clamp(I value) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t)) {
      constexpr auto kMax = static_cast<I>(std::numeric_limits<int64_t>::max());
      return static_cast<int64_t>(value > kMax ? kMax : value);
    } else {
      return static_cast<int64_t>(value);
    }
  }
};

// The structure of a Tree without its leaves: kinds, dict keys, list lengths. Two trees
// with equal TreeDefs can be combined leaf by leaf; leaf shapes and dtypes are not part of
// the structure (as in JAX).
//
//   params.structure().to_string();   // "{b: *, w: *}"
class TreeDef {
 public:
  TreeDef();  // the structure of a none tree
  int64_t num_leaves() const;
  // Leaves print as "*", none as "none": "{dense: {bias: *, kernel: *}, layers: [*, *]}".
  std::string to_string() const;
  friend bool operator==(const TreeDef& a, const TreeDef& b);

 private:
  friend struct TreeAccess;
  struct Node;
  explicit TreeDef(std::shared_ptr<const Node> node) : node_(std::move(node)) {}

  std::shared_ptr<const Node> node_;
};

// A pytree: none (an empty node), a leaf holding one Array, a dict of string keys to
// Trees kept sorted by key, or a list of Trees. Trees are immutable values: copying one is
// cheap and "updates" (`with`) return a new tree sharing the unchanged parts.
//
//   Tree mlp = Tree::dict({{"dense1", Tree::dict({{"kernel", w1}, {"bias", b1}})},
//                          {"layers", Tree::list({w2, w3})},
//                          {"dropout", Tree()}});
//   mlp["dense1"]["kernel"].leaf();   // w1
//   mlp.leaves_with_paths();          // dense1/bias, dense1/kernel, layers/0, layers/1
class Tree {
 public:
  enum class Kind { kNone, kLeaf, kDict, kList };
  using Item = std::pair<std::string, Tree>;

  Tree();  // none
  // A leaf; the array must be defined (not a default-constructed Array).
  Tree(Array leaf, CallSite site = {});  // NOLINT: implicit, so that arrays nest directly
  // Keys must be non-empty, must not contain '/' (the path separator) and must be unique;
  // entries are sorted by key whatever the order given.
  static Tree dict(std::initializer_list<Item> items, CallSite site = {});
  static Tree dict(std::vector<Item> items, CallSite site = {});
  static Tree list(std::vector<Tree> items);

  Kind kind() const;
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_leaf() const { return kind() == Kind::kLeaf; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_list() const { return kind() == Kind::kList; }

  // The array of a leaf; an error for any other kind, naming what the node is.
  const Array& leaf(CallSite site = {}) const;
  // Dict entry by key; a missing key is an error listing the keys (with a did-you-mean).
  const Tree& operator[](TreeKey key) const;
  // List entry by position; out of range is an error.
  const Tree& operator[](TreeIndex index) const;
  bool contains(std::string_view key) const;  // false for anything but a dict
  // A copy of this dict with `key` set to `value` (added, or replaced if present).
  Tree with(std::string_view key, Tree value, CallSite site = {}) const;

  // Entries of a dict or list, 0 for none; a leaf has no entries (use leaf().size()).
  size_t size(CallSite site = {}) const;
  // A dict's keys in (sorted) order, and its entries.
  std::vector<std::string> keys(CallSite site = {}) const;
  const std::vector<Item>& items(CallSite site = {}) const;

  int64_t num_leaves() const;
  // Sum of the leaves' sizes in bytes.
  int64_t size_bytes() const;
  // Depth first: dict entries in key order, list entries in order; none nodes add nothing.
  std::vector<Array> leaves() const;
  // Leaves with their paths: keys and list positions joined by '/' ("layers/0/w"); the
  // path of a tree that is itself a leaf is "".
  std::vector<std::pair<std::string, Array>> leaves_with_paths() const;
  TreeDef structure() const;
  // Structure with leaf types, without waiting for any value:
  // "{dense1: {bias: f32[512], kernel: f32[784,512]}, dropout: none}".
  std::string to_string() const;

 private:
  friend struct TreeAccess;
  struct Node;
  explicit Tree(std::shared_ptr<const Node> node) : node_(std::move(node)) {}

  std::shared_ptr<const Node> node_;  // null for none
};

// The inverse of leaves(): a tree of structure `def` holding `leaves` in order. The count
// must equal def.num_leaves().
Tree unflatten(const TreeDef& def, std::span<const Array> leaves, CallSite site = {});

// fn applied to every leaf; the result has the same structure.
Tree tree_map(const std::function<Array(const Array&)>& fn, const Tree& tree, CallSite site = {});
// fn applied to corresponding leaves of two trees of the same structure (e.g. params and
// their gradients).
Tree tree_map(const std::function<Array(const Array&, const Array&)>& fn, const Tree& a,
              const Tree& b, CallSite site = {});
// n-ary: fn gets one leaf from each tree, in the order of `trees`; all trees must share
// their structure, and the result has it too.
Tree tree_map(const std::function<Array(std::span<const Array>)>& fn, std::span<const Tree> trees,
              CallSite site = {});

bool same_structure(const Tree& a, const Tree& b);
// Throws a kiln::Error saying where the trees first differ and how, e.g.
// "<what>: tree structures differ at 'dense1/bias': a leaf f32[512] vs a dict with keys {w}".
void check_same_structure(const Tree& a, const Tree& b, std::string_view what, CallSite site = {});

std::ostream& operator<<(std::ostream& out, const Tree& tree);
std::ostream& operator<<(std::ostream& out, const TreeDef& def);

}  // namespace kiln
