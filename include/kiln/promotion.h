// Type promotion: which dtype a binary op computes in, following JAX's promotion lattice
// (https://jax.readthedocs.io/en/latest/type_promotion.html), with weak types for C++
// scalar literals. The full table is in docs/arrays.md (a test keeps it in step).
//
//   kiln::promote({DType::i32, false}, {DType::f32, true});   // f32 weak   (i32 * 2.0)
//   kiln::promote({DType::bf16, false}, {DType::f32, true});  // bf16       (x * 2.0)
//   kiln::promote({DType::bf16, false}, {DType::f16, false}); // f32
#pragma once

#include <string>

#include "kiln/dtype.h"

namespace kiln {

struct PromotedType {
  DType dtype;
  bool weak = false;
  friend bool operator==(const PromotedType&, const PromotedType&) = default;
};

// The least upper bound of the two types in JAX's lattice
//   bool -> int* -> {u8, i8}; u8 -> {i16, u16}; u16 -> {i32, u32}; u32 -> {i64, u64};
//   i8 -> i16 -> i32 -> i64 -> float*; u64 -> float*; float* -> {bf16, f16} -> f32 -> f64
// where int* and float* are the weak (literal) types, which materialise as i32 and f32.
PromotedType promote(PromotedType a, PromotedType b);

// The promotion table as a Markdown table (rows and columns: every dtype, then the weak
// int and float literal types); docs/arrays.md embeds it.
std::string promotion_table_markdown();

}  // namespace kiln
