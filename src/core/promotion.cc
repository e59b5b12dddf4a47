// JAX's type-promotion lattice and its least-upper-bound (see include/kiln/promotion.h).
// The lattice includes i8/i16/u16/u64, which kiln does not store, because the joins of the
// dtypes kiln has pass through them (u8 with i32 meets at i32 via i16).
#include "kiln/promotion.h"

#include <fmt/format.h>
#include <array>
#include <bitset>
#include <vector>

#include "base/check.h"
#include "kiln/error.h"

namespace kiln {
namespace {

enum Node : int {
  b1,
  iw,
  fw,
  u8n,
  u16n,
  u32n,
  u64n,
  i8n,
  i16n,
  i32n,
  i64n,
  bf16n,
  f16n,
  f32n,
  f64n,
  kNodes
};

using NodeSet = std::bitset<kNodes>;

constexpr std::array<std::initializer_list<Node>, kNodes> kEdges = {{
    /*b1*/ {iw},
    /*iw*/ {u8n, i8n},
    /*fw*/ {bf16n, f16n},
    /*u8*/ {i16n, u16n},
    /*u16*/ {i32n, u32n},
    /*u32*/ {i64n, u64n},
    /*u64*/ {fw},
    /*i8*/ {i16n},
    /*i16*/ {i32n},
    /*i32*/ {i64n},
    /*i64*/ {fw},
    /*bf16*/ {f32n},
    /*f16*/ {f32n},
    /*f32*/ {f64n},
    /*f64*/ {},
}};

// Upper set of each node: itself and everything reachable.
std::array<NodeSet, kNodes> compute_upper_sets() {
  std::array<NodeSet, kNodes> upper{};
  // Nodes are listed so that edges only point to later "levels"; iterate to a fixpoint.
  for (int n = 0; n < kNodes; ++n) upper[n].set(n);
  bool changed = true;
  while (changed) {
    changed = false;
    for (int n = 0; n < kNodes; ++n) {
      for (Node next : kEdges[n]) {
        NodeSet merged = upper[n] | upper[next];
        if (merged != upper[n]) {
          upper[n] = merged;
          changed = true;
        }
      }
    }
  }
  return upper;
}

const std::array<NodeSet, kNodes>& upper_sets() {
  static const std::array<NodeSet, kNodes> sets = compute_upper_sets();
  return sets;
}

Node node_of(PromotedType t) {
  if (t.weak && t.dtype != DType::bool_) return is_floating(t.dtype) ? fw : iw;
  switch (t.dtype) {
    case DType::bool_:
      return b1;
    case DType::u8:
      return u8n;
    case DType::u32:
      return u32n;
    case DType::i32:
      return i32n;
    case DType::i64:
      return i64n;
    case DType::f16:
      return f16n;
    case DType::bf16:
      return bf16n;
    case DType::f32:
      return f32n;
    case DType::f64:
      return f64n;
  }
  return b1;
}

PromotedType type_of(Node node) {
  switch (node) {
    case b1:
      return {DType::bool_, false};
    case iw:
      return {DType::i32, true};
    case fw:
      return {DType::f32, true};
    case u8n:
      return {DType::u8, false};
    case u32n:
      return {DType::u32, false};
    case i32n:
      return {DType::i32, false};
    case i64n:
      return {DType::i64, false};
    case bf16n:
      return {DType::bf16, false};
    case f16n:
      return {DType::f16, false};
    case f32n:
      return {DType::f32, false};
    case f64n:
      return {DType::f64, false};
    default:
      break;
  }
  KILN_CHECK(false, "promotion reached a dtype kiln does not store (lattice node {})",
             static_cast<int>(node));
  return {DType::f32, false};
}

}  // namespace

PromotedType promote(PromotedType a, PromotedType b) {
  const auto& upper = upper_sets();
  NodeSet common = upper[node_of(a)] & upper[node_of(b)];
  // The join is the common upper bound that is below every other common upper bound.
  for (int n = 0; n < kNodes; ++n) {
    if (common.test(n) && (upper[n] & common) == common) return type_of(static_cast<Node>(n));
  }
  KILN_CHECK(false, "no least upper bound");
  return a;
}

std::string promotion_table_markdown() {
  struct Column {
    std::string label;
    PromotedType type;
  };
  std::vector<Column> columns;
  for (DType dtype : kAllDTypes)
    columns.push_back({std::string(dtype_name(dtype)), {dtype, false}});
  columns.push_back({"int literal", {DType::i32, true}});
  columns.push_back({"float literal", {DType::f32, true}});

  auto cell = [](PromotedType t) {
    return fmt::format("{}{}", dtype_name(t.dtype), t.weak ? "~" : "");
  };
  std::string text = "| |";
  for (const auto& column : columns) text += " " + column.label + " |";
  text += "\n|---|";
  for (size_t i = 0; i < columns.size(); ++i) text += "---|";
  text += "\n";
  for (const auto& row : columns) {
    text += "| **" + row.label + "** |";
    for (const auto& column : columns) text += " " + cell(promote(row.type, column.type)) + " |";
    text += "\n";
  }
  return text;
}

}  // namespace kiln
