// The collectives' algorithms (collective_algorithms.h). Every transfer goes through
// Group::send, which counts it; every op runs on the device of its committed operands, so
// a combination runs where its parts were sent.
#include "sharding/collective_algorithms.h"

#include <functional>

#include "kiln/ops.h"

namespace kiln::spmd {
namespace {

// The size of the left part of a tree over n >= 2 values: the largest power of two below n.
size_t left_size(size_t n) {
  size_t left = 1;
  while (left * 2 < n) left *= 2;
  return left;
}

Array combine(const Array& a, const Array& b, Reduction reduction, CallSite site) {
  return reduction == Reduction::kSum ? add(a, b, site) : maximum(a, b, site);
}

// Elements [k * size, (k + 1) * size) of `x` along `dim`.
Array block(const Array& x, int64_t dim, int64_t k, int64_t size, CallSite site) {
  Dims start(static_cast<size_t>(x.rank()), 0);
  Dims limit(x.shape().dims().begin(), x.shape().dims().end());
  start[static_cast<size_t>(dim)] = k * size;
  limit[static_cast<size_t>(dim)] = (k + 1) * size;
  return slice(x, start, limit, {}, site);
}

// Segment k of n of a flat array: elements [k * total / n, (k + 1) * total / n), so that
// segments differ in size by at most one element when n does not divide the total.
Array segment(const Array& flat, int64_t k, int64_t n, CallSite site) {
  int64_t total = flat.shape()[0];
  return slice(flat, {k * total / n}, {(k + 1) * total / n}, {}, site);
}

std::vector<Array> to_first(const Group& group) {
  std::vector<Array> parts;
  for (int64_t k = 0; k < group.size(); ++k) parts.push_back(group.send(group.value(k), k, 0));
  return parts;
}

std::vector<Array> from_first(const Group& group, const Array& x) {
  std::vector<Array> out;
  for (int64_t k = 0; k < group.size(); ++k) out.push_back(group.send(x, 0, k));
  return out;
}

// have[i][j]: member i's copy of member j's part; a ring of n - 1 steps in which member i
// forwards to member i + 1 the part it received in the step before (its own first).
void ring_all_gather(const Group& group, std::vector<std::vector<Array>>& have) {
  const int64_t n = group.size();
  for (int64_t step = 0; step + 1 < n; ++step) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t part = (i - step + n) % n;
      int64_t next = (i + 1) % n;
      have[static_cast<size_t>(next)][static_cast<size_t>(part)] =
          group.send(have[static_cast<size_t>(i)][static_cast<size_t>(part)], i, next);
    }
  }
}

std::vector<std::vector<Array>> own_parts(const Group& group, std::vector<Array> parts) {
  std::vector<std::vector<Array>> have(static_cast<size_t>(group.size()),
                                       std::vector<Array>(static_cast<size_t>(group.size())));
  for (size_t j = 0; j < parts.size(); ++j) have[j][j] = std::move(parts[j]);
  return have;
}

// Member j's part j of every member's value (`part_of(value, j)`), combined in tree order.
std::vector<Array> scatter_reduce(const Group& group, Reduction reduction,
                                  const std::function<Array(const Array&, int64_t)>& part_of) {
  std::vector<Array> reduced;
  for (int64_t j = 0; j < group.size(); ++j) {
    std::vector<Array> parts;
    for (int64_t i = 0; i < group.size(); ++i) {
      Array part = part_of(group.value(i), j);
      parts.push_back(i == j ? part : group.send(part, i, j));
    }
    reduced.push_back(tree_combine(parts, reduction, group.site()));
  }
  return reduced;
}

}  // namespace

Array tree_combine(std::span<const Array> parts, Reduction reduction, CallSite site) {
  if (parts.size() == 1) return parts[0];
  size_t left = left_size(parts.size());
  return combine(tree_combine(parts.first(left), reduction, site),
                 tree_combine(parts.subspan(left), reduction, site), reduction, site);
}

std::vector<Array> all_reduce(const Group& group, Reduction reduction,
                              CollectiveAlgorithm algorithm) {
  const int64_t n = group.size();
  const CallSite site = group.site();
  if (n == 1) return {group.keep(group.value(0), 0)};
  if (algorithm == CollectiveAlgorithm::kReference) {
    std::vector<Array> parts = to_first(group);
    return from_first(group, tree_combine(parts, reduction, site));
  }
  if (algorithm == CollectiveAlgorithm::kTree) {
    // Up the tree: node [lo, hi) combines on member lo, the same split as tree_combine.
    std::function<Array(int64_t, int64_t)> up = [&](int64_t lo, int64_t hi) {
      if (hi - lo == 1) return group.keep(group.value(lo), lo);
      int64_t mid = lo + static_cast<int64_t>(left_size(static_cast<size_t>(hi - lo)));
      Array left = up(lo, mid);
      Array right = up(mid, hi);
      return combine(left, group.send(right, mid, lo), reduction, site);
    };
    std::vector<Array> out(static_cast<size_t>(n));
    std::function<void(int64_t, int64_t, const Array&)> down = [&](int64_t lo, int64_t hi,
                                                                   const Array& x) {
      out[static_cast<size_t>(lo)] = x;
      if (hi - lo == 1) return;
      int64_t mid = lo + static_cast<int64_t>(left_size(static_cast<size_t>(hi - lo)));
      down(mid, hi, group.send(x, lo, mid));
      down(lo, mid, x);
    };
    down(0, n, up(0, n));
    return out;
  }
  const Shape shape = group.value(0).shape();
  const int64_t total = shape.num_elements();
  std::vector<Array> reduced = scatter_reduce(group, reduction, [&](const Array& value, int64_t j) {
    return segment(reshape(value, Shape{total}, site), j, n, site);
  });
  std::vector<std::vector<Array>> have = own_parts(group, std::move(reduced));
  ring_all_gather(group, have);
  std::vector<Array> out;
  for (const std::vector<Array>& parts : have) {
    out.push_back(reshape(concatenate(parts, 0, site), shape, site));
  }
  return out;
}

std::vector<Array> reduce_scatter(const Group& group, int64_t dimension, bool tiled,
                                  CollectiveAlgorithm algorithm) {
  const int64_t n = group.size();
  const CallSite site = group.site();
  const int64_t size = group.value(0).shape()[dimension] / n;
  std::vector<Array> out;
  if (algorithm == CollectiveAlgorithm::kReference) {
    std::vector<Array> parts = to_first(group);
    Array total = tree_combine(parts, Reduction::kSum, site);
    for (int64_t k = 0; k < n; ++k)
      out.push_back(group.send(block(total, dimension, k, size, site), 0, k));
  } else {
    out = scatter_reduce(group, Reduction::kSum, [&](const Array& value, int64_t j) {
      return block(value, dimension, j, size, site);
    });
  }
  if (!tiled) {
    for (Array& part : out) part = squeeze(part, {dimension}, site);
  }
  return out;
}

std::vector<Array> all_gather(const Group& group, int64_t dimension, bool tiled,
                              CollectiveAlgorithm algorithm) {
  const CallSite site = group.site();
  auto join = [&](const std::vector<Array>& parts) {
    return tiled ? concatenate(parts, dimension, site) : stack(parts, dimension, site);
  };
  if (algorithm == CollectiveAlgorithm::kReference) return from_first(group, join(to_first(group)));
  std::vector<Array> own;
  for (int64_t k = 0; k < group.size(); ++k) own.push_back(group.keep(group.value(k), k));
  std::vector<std::vector<Array>> have = own_parts(group, std::move(own));
  ring_all_gather(group, have);
  std::vector<Array> out;
  for (const std::vector<Array>& parts : have) out.push_back(join(parts));
  return out;
}

std::vector<Array> all_to_all(const Group& group, int64_t split_dimension, int64_t concat_dimension,
                              CollectiveAlgorithm algorithm) {
  const int64_t n = group.size();
  const CallSite site = group.site();
  const int64_t size = group.value(0).shape()[split_dimension] / n;
  std::vector<Array> first;
  if (algorithm == CollectiveAlgorithm::kReference) first = to_first(group);
  std::vector<Array> out;
  for (int64_t j = 0; j < n; ++j) {
    std::vector<Array> received;
    for (int64_t i = 0; i < n; ++i) {
      if (algorithm == CollectiveAlgorithm::kReference) {
        received.push_back(block(first[static_cast<size_t>(i)], split_dimension, j, size, site));
      } else {
        Array part = block(group.value(i), split_dimension, j, size, site);
        received.push_back(i == j ? part : group.send(part, i, j));
      }
    }
    Array joined = concatenate(received, concat_dimension, site);
    out.push_back(algorithm == CollectiveAlgorithm::kReference ? group.send(joined, 0, j) : joined);
  }
  return out;
}

std::vector<Array> permute(const Group& group, const Dims& pairs, CollectiveAlgorithm algorithm) {
  std::vector<Array> out(static_cast<size_t>(group.size()));
  for (size_t p = 0; p + 1 < pairs.size(); p += 2) {
    int64_t from = pairs[p];
    int64_t to = pairs[p + 1];
    const Array& x = group.value(from);
    out[static_cast<size_t>(to)] = algorithm == CollectiveAlgorithm::kReference
                                       ? group.send(group.send(x, from, 0), 0, to)
                                       : group.send(x, from, to);
  }
  for (int64_t k = 0; k < group.size(); ++k) {
    if (!out[static_cast<size_t>(k)].defined()) {
      out[static_cast<size_t>(k)] = group.keep(zeros_like(group.value(k), group.site()), k);
    }
  }
  return out;
}

}  // namespace kiln::spmd
