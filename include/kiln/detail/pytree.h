// Internals of kiln's transformations: how arguments and results of a transformed
// function become flat lists of Arrays ("pytrees": Arrays, std::vector<Array>, Trees, and
// pairs/tuples of these) and back, and FlatCall, a function seen as a function of its
// leaves. Not part of the public API; names and signatures may change.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/tree.h"

namespace kiln::detail {

template <typename T>
struct PytreeAdapter {
  static constexpr bool kIsPytree = false;
};

template <>
struct PytreeAdapter<Array> {
  static constexpr bool kIsPytree = true;
  static void flatten(const Array& value, std::vector<Array>& leaves) { leaves.push_back(value); }
  static Array unflatten(const Array&, const Array*& next) { return *next++; }
  static std::string structure(const Array&) { return "*"; }
};

template <>
struct PytreeAdapter<std::vector<Array>> {
  static constexpr bool kIsPytree = true;
  static void flatten(const std::vector<Array>& value, std::vector<Array>& leaves) {
    leaves.insert(leaves.end(), value.begin(), value.end());
  }
  static std::vector<Array> unflatten(const std::vector<Array>& like, const Array*& next) {
    std::vector<Array> out(next, next + like.size());
    next += like.size();
    return out;
  }
  static std::string structure(const std::vector<Array>& value) {
    std::string text = "[";
    for (size_t i = 0; i < value.size(); ++i) text += i == 0 ? "*" : ", *";
    return text + "]";
  }
};

template <>
struct PytreeAdapter<Tree> {
  static constexpr bool kIsPytree = true;
  static void flatten(const Tree& value, std::vector<Array>& leaves) {
    std::vector<Array> own = value.leaves();
    leaves.insert(leaves.end(), own.begin(), own.end());
  }
  static Tree unflatten(const Tree& like, const Array*& next) {
    auto count = static_cast<size_t>(like.num_leaves());
    Tree out = kiln::unflatten(like.structure(), std::span<const Array>(next, count));
    next += count;
    return out;
  }
  static std::string structure(const Tree& value) { return value.structure().to_string(); }
};

template <typename... T>
struct PytreeAdapter<std::tuple<T...>> {
  static constexpr bool kIsPytree = (PytreeAdapter<std::decay_t<T>>::kIsPytree && ...);
  static void flatten(const std::tuple<T...>& value, std::vector<Array>& leaves) {
    std::apply(
        [&](const auto&... item) { (PytreeAdapter<std::decay_t<T>>::flatten(item, leaves), ...); },
        value);
  }
  static std::tuple<T...> unflatten(const std::tuple<T...>& like, const Array*& next) {
    return std::apply(
        [&](const auto&... item) {
          return std::tuple<T...>{PytreeAdapter<std::decay_t<T>>::unflatten(item, next)...};
        },
        like);
  }
  static std::string structure(const std::tuple<T...>& value) {
    std::string text;
    std::apply(
        [&](const auto&... item) {
          ((text += (text.empty() ? "" : ", ") + PytreeAdapter<std::decay_t<T>>::structure(item)),
           ...);
        },
        value);
    return "(" + text + ")";
  }
};

template <typename A, typename B>
struct PytreeAdapter<std::pair<A, B>> {
  static constexpr bool kIsPytree =
      PytreeAdapter<std::decay_t<A>>::kIsPytree && PytreeAdapter<std::decay_t<B>>::kIsPytree;
  static void flatten(const std::pair<A, B>& value, std::vector<Array>& leaves) {
    PytreeAdapter<std::decay_t<A>>::flatten(value.first, leaves);
    PytreeAdapter<std::decay_t<B>>::flatten(value.second, leaves);
  }
  static std::pair<A, B> unflatten(const std::pair<A, B>& like, const Array*& next) {
    A first = PytreeAdapter<std::decay_t<A>>::unflatten(like.first, next);
    B second = PytreeAdapter<std::decay_t<B>>::unflatten(like.second, next);
    return {std::move(first), std::move(second)};
  }
  static std::string structure(const std::pair<A, B>& value) {
    return "(" + PytreeAdapter<std::decay_t<A>>::structure(value.first) + ", " +
           PytreeAdapter<std::decay_t<B>>::structure(value.second) + ")";
  }
};

template <typename T>
inline constexpr bool kIsPytree = PytreeAdapter<std::decay_t<T>>::kIsPytree;

// "*" for an Array, "[*, *]" for a vector, "{b: *, w: *}" for a Tree, "(*, [*])" for a
// pair or tuple: what must agree between a value and its cotangent.
template <typename T>
std::string structure_of(const T& value) {
  return PytreeAdapter<std::decay_t<T>>::structure(value);
}

// Raises "<what>: the <role> has structure S, but the <expected_role> has structure E".
void fail_structure_mismatch(std::string_view what, std::string_view role, const std::string& found,
                             std::string_view expected_role, const std::string& expected,
                             CallSite site);

template <typename T>
void flatten_into(const T& value, std::vector<Array>& leaves) {
  if constexpr (kIsPytree<T>) PytreeAdapter<std::decay_t<T>>::flatten(value, leaves);
}

template <typename T>
std::vector<Array> flatten(const T& value) {
  std::vector<Array> leaves;
  flatten_into(value, leaves);
  return leaves;
}

// A value shaped like `like` built from leaves (static values are returned as they are).
template <typename T>
std::decay_t<T> unflatten_like(const T& like, const Array*& next) {
  if constexpr (kIsPytree<T>) {
    return PytreeAdapter<std::decay_t<T>>::unflatten(like, next);
  } else {
    return like;
  }
}

template <typename T>
int64_t leaf_count(const T& value) {
  std::vector<Array> leaves;
  flatten_into(value, leaves);
  return static_cast<int64_t>(leaves.size());
}

// A function of flat leaves, as the transformations see every function.
using FlatFunction = std::function<std::vector<Array>(std::span<const Array>)>;

template <typename... Args>
std::vector<Array> flatten_args(const Args&... args) {
  std::vector<Array> leaves;
  (flatten_into(args, leaves), ...);
  return leaves;
}

// f(args...) seen as a function of the leaves of its pytree arguments. Remembers the last
// result so that flat results can be given the result's structure again.
template <typename F, typename... Args>
class FlatCall {
 public:
  using Result = std::decay_t<std::invoke_result_t<const F&, const std::decay_t<Args>&...>>;
  static_assert(kIsPytree<Result>,
                "a transformed function must return an Array, a Tree, a std::vector<Array>, or "
                "a pair/tuple of these");

  FlatCall(F f, const Args&... args) : f_(std::move(f)), args_(args...) {}

  FlatFunction function() const {
    return [f = f_, args = args_, last = last_](std::span<const Array> leaves) {
      const Array* next = leaves.data();
      auto rebuilt = std::apply(
          [&](const auto&... arg) {
            return std::tuple<std::decay_t<Args>...>{unflatten_like(arg, next)...};
          },
          args);
      Result result = std::apply(f, rebuilt);
      std::vector<Array> out = flatten(result);
      *last = std::move(result);
      return out;
    };
  }
  std::vector<Array> leaves() const {
    return std::apply([](const auto&... arg) { return flatten_args(arg...); }, args_);
  }
  // Leaf range [begin, end) of argument `argnum`.
  std::pair<size_t, size_t> leaf_range(size_t argnum) const {
    size_t begin = 0, index = 0, found_begin = 0, found_end = 0;
    std::apply(
        [&](const auto&... arg) {
          auto visit = [&](const auto& value) {
            size_t count = static_cast<size_t>(flatten(value).size());
            if (index == argnum) found_begin = begin, found_end = begin + count;
            begin += count;
            ++index;
          };
          (visit(arg), ...);
        },
        args_);
    return {found_begin, found_end};
  }
  Result rebuild_result(std::span<const Array> leaves) const {
    const Array* next = leaves.data();
    return unflatten_like(last_->value(), next);
  }
  const std::tuple<std::decay_t<Args>...>& args() const { return args_; }

 private:
  F f_;
  std::tuple<std::decay_t<Args>...> args_;
  std::shared_ptr<std::optional<Result>> last_ = std::make_shared<std::optional<Result>>();
};

}  // namespace kiln::detail
