// numpy.einsum from dot_general, sum and transpose: the subscripts are parsed into one label
// per axis, each operand loses its repeated labels (diagonals) and the labels nothing else
// needs (summed), then the operands are contracted pairwise, a label shared by both sides
// becoming a batch axis while something later still needs it and a contracted axis
// otherwise. With three or more operands the order of the pairs is the cheapest by
// multiply-adds: every order for up to five operands (opt_einsum's "optimal", which
// jnp.einsum uses for so few), the cheapest next pair beyond that (its "greedy").
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "kiln/promotion.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

// A letter's character code, or kFirstEllipsisLabel + i for the i-th axis the ellipsis
// stands for (counted in the broadcast ellipsis, right-aligned like numpy's broadcasting).
using Label = int;
using Labels = std::vector<Label>;
constexpr Label kFirstEllipsisLabel = 256;

struct Term {
  Labels before_ellipsis, after_ellipsis;
  bool has_ellipsis = false;
};

struct Spec {
  std::vector<Term> inputs;
  std::optional<Term> output;  // none: numpy's implicit output
};

[[noreturn]] void bad_subscripts(std::string_view subscripts, const std::string& why,
                                 CallSite site) {
  fail(site, fmt::format("einsum: {} in \"{}\"", why, subscripts));
}

Term parse_term(std::string_view text, std::string_view subscripts, CallSite site) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i, 3) == "...") {
      if (term.has_ellipsis) bad_subscripts(subscripts, "more than one ellipsis in a term", site);
      term.has_ellipsis = true;
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(text[i]))) {
      (term.has_ellipsis ? term.after_ellipsis : term.before_ellipsis).push_back(text[i]);
    } else {
      bad_subscripts(
          subscripts,
          fmt::format("'{}' is not a letter (subscripts are a-z, A-Z and '...')", text[i]), site);
    }
  }
  return term;
}

Spec parse(std::string_view subscripts, CallSite site) {
  std::string text;
  for (char c : subscripts) {
    if (!std::isspace(static_cast<unsigned char>(c))) text += c;
  }
  Spec spec;
  size_t arrow = text.find("->");
  std::string inputs = text.substr(0, arrow);
  if (arrow != std::string::npos) {
    std::string output = text.substr(arrow + 2);
    if (output.find("->") != std::string::npos || output.find(',') != std::string::npos) {
      bad_subscripts(subscripts, "one output term after a single '->' expected", site);
    }
    spec.output = parse_term(output, subscripts, site);
  }
  size_t start = 0;
  while (true) {
    size_t comma = inputs.find(',', start);
    spec.inputs.push_back(
        parse_term(std::string_view(inputs).substr(
                       start, comma == std::string::npos ? std::string::npos : comma - start),
                   subscripts, site));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return spec;
}

int64_t count_label(const std::vector<Labels>& operands, Label label) {
  int64_t count = 0;
  for (const Labels& labels : operands) count += std::count(labels.begin(), labels.end(), label);
  return count;
}

std::string describe(Label label) {
  return label < kFirstEllipsisLabel ? fmt::format("'{}'", static_cast<char>(label))
                                     : fmt::format("axis {} of '...'", label - kFirstEllipsisLabel);
}

// One operand with its labels, after the broadcast of its ellipsis axes.
struct LabelledArray {
  Array array;
  Labels labels;
};

// Takes the diagonal of every label that appears twice or more in one operand: the axes
// are masked to where their indices agree and the later ones summed away.
LabelledArray diagonals(LabelledArray x, CallSite site) {
  for (size_t first = 0; first < x.labels.size(); ++first) {
    for (size_t later = x.labels.size(); later-- > first + 1;) {
      if (x.labels[later] != x.labels[first]) continue;
      const Shape& shape = x.array.shape();
      Device* device = device_of(x.array);
      Array same = equal(iota(shape, DType::i32, static_cast<int64_t>(first), device, site),
                         iota(shape, DType::i32, static_cast<int64_t>(later), device, site), site);
      x.array = sum(where(same, x.array, zeros_like(x.array, site), site),
                    {static_cast<int64_t>(later)}, false, site);
      x.labels.erase(x.labels.begin() + static_cast<std::ptrdiff_t>(later));
    }
  }
  return x;
}

// Sums away the labels of `x` that neither the output nor any other operand needs.
LabelledArray sum_unneeded(LabelledArray x, const Labels& needed, CallSite site) {
  Dims axes;
  Labels kept;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (std::find(needed.begin(), needed.end(), x.labels[i]) == needed.end()) {
      axes.push_back(static_cast<int64_t>(i));
    } else {
      kept.push_back(x.labels[i]);
    }
  }
  if (axes.empty()) return x;
  return {sum(x.array, axes, false, site), kept};
}

LabelledArray contract(const LabelledArray& a, const LabelledArray& b, const Labels& needed_later,
                       CallSite site) {
  Dims a_batch, b_batch, a_contract, b_contract;
  Labels batch, a_free, b_free;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    Label label = a.labels[i];
    auto in_b = std::find(b.labels.begin(), b.labels.end(), label);
    if (in_b == b.labels.end()) {
      a_free.push_back(label);
      continue;
    }
    int64_t j = in_b - b.labels.begin();
    bool later = std::find(needed_later.begin(), needed_later.end(), label) != needed_later.end();
    (later ? a_batch : a_contract).push_back(static_cast<int64_t>(i));
    (later ? b_batch : b_contract).push_back(j);
    if (later) batch.push_back(label);
  }
  for (Label label : b.labels) {
    if (std::find(a.labels.begin(), a.labels.end(), label) == a.labels.end()) {
      b_free.push_back(label);
    }
  }
  auto [left, right] = promote_operands(a.array, b.array, site);
  Array out =
      dot_general(left, right, a_contract, b_contract, a_batch, b_batch, std::nullopt, site);
  Labels labels = batch;
  labels.insert(labels.end(), a_free.begin(), a_free.end());
  labels.insert(labels.end(), b_free.begin(), b_free.end());
  return {out, labels};
}

// ----- the order of the contractions ---------------------------------------------------

using LabelSizes = std::vector<std::pair<Label, int64_t>>;

bool has_label(const Labels& labels, Label label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

// The labels of every operand but those at `skip_a` and `skip_b`, and the output's.
Labels labels_besides(const std::vector<Labels>& operands, const Labels& output, size_t skip_a,
                      size_t skip_b) {
  Labels needed = output;
  for (size_t k = 0; k < operands.size(); ++k) {
    if (k != skip_a && k != skip_b) {
      needed.insert(needed.end(), operands[k].begin(), operands[k].end());
    }
  }
  return needed;
}

Labels only_needed(const Labels& labels, const Labels& needed) {
  Labels kept;
  for (Label label : labels) {
    if (has_label(needed, label)) kept.push_back(label);
  }
  return kept;
}

struct Pair {
  size_t first, second;  // positions in the current list; the result takes `first`'s place
};

// Contracts operands i and j of `operands` at the level of labels (what einsum() does with
// the arrays) and returns the multiply-adds it costs: one per combination of the labels
// of both sides, after each has summed what nothing else needs.
double contract_labels(std::vector<Labels>& operands, const Labels& output, Pair pair,
                       const LabelSizes& sizes) {
  auto [i, j] = pair;
  Labels a = only_needed(operands[i], labels_besides(operands, output, i, operands.size()));
  Labels b = only_needed(operands[j], labels_besides(operands, output, j, operands.size()));
  Labels both = a;
  for (Label label : b) {
    if (!has_label(both, label)) both.push_back(label);
  }
  double cost = 1;
  for (Label label : both) {
    for (const auto& [known, size] : sizes) {
      if (known == label) cost *= static_cast<double>(size);
    }
  }
  operands[i] = only_needed(both, labels_besides(operands, output, i, j));
  operands.erase(operands.begin() + static_cast<std::ptrdiff_t>(j));
  return cost;
}

// The cheapest sequence of pairs for `operands`, and its cost in `best_cost`.
std::vector<Pair> cheapest_order(const std::vector<Labels>& operands, const Labels& output,
                                 const LabelSizes& sizes, double& best_cost) {
  best_cost = 0;
  if (operands.size() < 2) return {};
  constexpr size_t kSearchEveryOrderUpTo = 5;
  bool exhaustive = operands.size() <= kSearchEveryOrderUpTo;
  std::vector<Pair> best;
  best_cost = -1;
  for (size_t i = 0; i < operands.size(); ++i) {
    for (size_t j = i + 1; j < operands.size(); ++j) {
      std::vector<Labels> next = operands;
      double cost = contract_labels(next, output, Pair{i, j}, sizes);
      std::vector<Pair> rest;
      double rest_cost = 0;
      if (exhaustive) rest = cheapest_order(next, output, sizes, rest_cost);
      // Strictly cheaper only: among equal costs the first pair in order wins.
      if (best_cost < 0 || cost + rest_cost < best_cost) {
        best_cost = cost + rest_cost;
        best = {Pair{i, j}};
        best.insert(best.end(), rest.begin(), rest.end());
      }
    }
  }
  if (!exhaustive) {
    // Greedy: take the cheapest first pair, then choose again among what remains.
    std::vector<Labels> next = operands;
    double cost = contract_labels(next, output, best.front(), sizes);
    double rest_cost = 0;
    std::vector<Pair> rest = cheapest_order(next, output, sizes, rest_cost);
    best.resize(1);
    best.insert(best.end(), rest.begin(), rest.end());
    best_cost = cost + rest_cost;
  }
  return best;
}

}  // namespace

Array einsum(std::string_view subscripts, const std::vector<Array>& operands, CallSite site) {
  Spec spec = parse(subscripts, site);
  if (spec.inputs.size() != operands.size()) {
    fail(site, fmt::format("einsum: \"{}\" names {} operand(s), {} given", subscripts,
                           spec.inputs.size(), operands.size()));
  }
  // Each operand's labels, its ellipsis axes numbered from the right so that they
  // broadcast like numpy's trailing axes.
  int64_t ellipsis_rank = 0;
  std::vector<Labels> labels(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    require_defined("einsum", operands[i], site);
    const Term& term = spec.inputs[i];
    int64_t named = static_cast<int64_t>(term.before_ellipsis.size() + term.after_ellipsis.size());
    int64_t rank = operands[i].rank();
    if (term.has_ellipsis ? rank < named : rank != named) {
      fail(site, fmt::format("einsum: operand {} is {}, but its subscripts name {} axes{}", i,
                             operands[i].aval().to_string(), named,
                             term.has_ellipsis ? " (and '...' for any more)" : ""));
    }
    ellipsis_rank = std::max(ellipsis_rank, rank - named);
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    const Term& term = spec.inputs[i];
    int64_t own = operands[i].rank() -
                  static_cast<int64_t>(term.before_ellipsis.size() + term.after_ellipsis.size());
    labels[i] = term.before_ellipsis;
    for (int64_t k = ellipsis_rank - own; k < ellipsis_rank; ++k) {
      labels[i].push_back(kFirstEllipsisLabel + static_cast<Label>(k));
    }
    labels[i].insert(labels[i].end(), term.after_ellipsis.begin(), term.after_ellipsis.end());
  }

  // Every label's size; ellipsis axes of size 1 broadcast, named ones must agree.
  std::vector<std::pair<Label, int64_t>> sizes;
  for (size_t i = 0; i < operands.size(); ++i) {
    for (size_t axis = 0; axis < labels[i].size(); ++axis) {
      Label label = labels[i][axis];
      int64_t size = operands[i].shape()[static_cast<int64_t>(axis)];
      auto known = std::find_if(sizes.begin(), sizes.end(),
                                [&](const auto& entry) { return entry.first == label; });
      if (known == sizes.end()) {
        sizes.emplace_back(label, size);
      } else if (known->second != size) {
        bool broadcasts = label >= kFirstEllipsisLabel && (known->second == 1 || size == 1);
        if (!broadcasts) {
          fail(site, fmt::format("einsum: {} has size {} where it first appears and {} in "
                                 "operand {} ({})",
                                 describe(label), known->second, size, i,
                                 operands[i].aval().to_string()));
        }
        known->second = std::max(known->second, size);
      }
    }
  }

  Labels output;
  Labels ellipsis;
  for (int64_t k = 0; k < ellipsis_rank; ++k) {
    ellipsis.push_back(kFirstEllipsisLabel + static_cast<Label>(k));
  }
  if (spec.output) {
    const Term& out = *spec.output;
    if (!out.has_ellipsis && ellipsis_rank > 0) {
      bad_subscripts(subscripts,
                     "the operands' '...' axes need a '...' in the output (or name them)", site);
    }
    output = out.before_ellipsis;
    if (out.has_ellipsis) output.insert(output.end(), ellipsis.begin(), ellipsis.end());
    output.insert(output.end(), out.after_ellipsis.begin(), out.after_ellipsis.end());
    for (size_t i = 0; i < output.size(); ++i) {
      if (std::count(output.begin(), output.end(), output[i]) > 1) {
        bad_subscripts(subscripts,
                       fmt::format("{} appears twice in the output", describe(output[i])), site);
      }
      if (count_label(labels, output[i]) == 0) {
        bad_subscripts(subscripts,
                       fmt::format("the output's {} is in no operand", describe(output[i])), site);
      }
    }
  } else {
    // numpy's implicit output: the ellipsis axes, then the labels used once, sorted.
    output = ellipsis;
    Labels once;
    for (const Labels& operand : labels) {
      for (Label label : operand) {
        if (label < kFirstEllipsisLabel && count_label(labels, label) == 1) once.push_back(label);
      }
    }
    std::sort(once.begin(), once.end());
    output.insert(output.end(), once.begin(), once.end());
  }

  std::vector<LabelledArray> pending;
  for (size_t i = 0; i < operands.size(); ++i) {
    Array array = operands[i];
    // Broadcast the size-1 ellipsis axes up front: dot_general's batch axes must agree.
    Shape full_shape = array.shape();
    for (size_t axis = 0; axis < labels[i].size(); ++axis) {
      for (const auto& [label, size] : sizes) {
        if (label == labels[i][axis]) full_shape[static_cast<int64_t>(axis)] = size;
      }
    }
    if (full_shape != array.shape()) array = broadcast_to(array, full_shape, site);
    pending.push_back(diagonals({array, labels[i]}, site));
  }
  std::vector<Labels> operand_labels;
  for (const LabelledArray& x : pending) operand_labels.push_back(x.labels);
  double cost = 0;
  std::vector<Pair> order = cheapest_order(operand_labels, output, sizes, cost);
  for (Pair pair : order) {
    auto [i, j] = pair;
    std::vector<Labels> now;
    for (const LabelledArray& x : pending) now.push_back(x.labels);
    LabelledArray a = sum_unneeded(pending[i], labels_besides(now, output, i, now.size()), site);
    LabelledArray b = sum_unneeded(pending[j], labels_besides(now, output, j, now.size()), site);
    pending[i] = contract(a, b, labels_besides(now, output, i, j), site);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(j));
  }
  LabelledArray result = sum_unneeded(pending[0], output, site);

  Dims permutation;
  for (Label label : output) {
    auto at = std::find(result.labels.begin(), result.labels.end(), label);
    permutation.push_back(at - result.labels.begin());
  }
  bool identity = true;
  for (size_t i = 0; i < permutation.size(); ++i) {
    identity &= permutation[i] == static_cast<int64_t>(i);
  }
  return identity ? result.array : transpose(result.array, permutation, site);
}

Array einsum(std::string_view subscripts, const Array& a, CallSite site) {
  return einsum(subscripts, std::vector<Array>{a}, site);
}

Array einsum(std::string_view subscripts, const Array& a, const Array& b, CallSite site) {
  return einsum(subscripts, std::vector<Array>{a, b}, site);
}

}  // namespace kiln
