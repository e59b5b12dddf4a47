// Which primitives have a Highway vector loop (elementwise_simd.h) for f32 and f64: the
// one table that both the eager kernels (elementwise.cc) and jit's fused loops
// (jit/fused_kernel.cc) consult, so the two always run the same loop and give
// the same bits (arithmetic rounds, so the loop must be the same; comparisons are exact).
#pragma once

#include <optional>

#include "kernels/cpu/elementwise_simd.h"
#include "prims/ids/binary.h"
#include "prims/ids/unary.h"
#include "prims/registry.h"

namespace kiln {

constexpr std::optional<simd::UnaryOp> vector_unary_op(PrimId prim) {
  switch (prim) {
    case prim::neg:
      return simd::UnaryOp::kNeg;
    case prim::abs:
      return simd::UnaryOp::kAbs;
    case prim::sqrt:
      return simd::UnaryOp::kSqrt;
    case prim::rsqrt:
      return simd::UnaryOp::kRsqrt;
    case prim::floor:
      return simd::UnaryOp::kFloor;
    case prim::ceil:
      return simd::UnaryOp::kCeil;
    case prim::round:
      return simd::UnaryOp::kRound;
    case prim::exp:
      return simd::UnaryOp::kExp;
    case prim::log:
      return simd::UnaryOp::kLog;
    case prim::tanh:
      return simd::UnaryOp::kTanh;
    case prim::logistic:
      return simd::UnaryOp::kLogistic;
    case prim::erf_inv:
      return simd::UnaryOp::kErfInv;
    default:
      return std::nullopt;
  }
}

constexpr std::optional<simd::BinaryOp> vector_binary_op(PrimId prim) {
  switch (prim) {
    case prim::add:
      return simd::BinaryOp::kAdd;
    case prim::sub:
      return simd::BinaryOp::kSub;
    case prim::mul:
      return simd::BinaryOp::kMul;
    case prim::div:
      return simd::BinaryOp::kDiv;
    case prim::max:
      return simd::BinaryOp::kMax;
    case prim::min:
      return simd::BinaryOp::kMin;
    default:
      return std::nullopt;
  }
}

// Comparisons have vector loops in jit's fused programs only: eagerly they run the plain
// loop over the scalar definitions, which give the same bools (elementwise_simd.cc keeps
// the vector comparisons equal to C++'s operators, NaN included).
constexpr std::optional<simd::CompareOp> vector_compare_op(PrimId prim) {
  switch (prim) {
    case prim::eq:
      return simd::CompareOp::kEq;
    case prim::ne:
      return simd::CompareOp::kNe;
    case prim::lt:
      return simd::CompareOp::kLt;
    case prim::le:
      return simd::CompareOp::kLe;
    case prim::gt:
      return simd::CompareOp::kGt;
    case prim::ge:
      return simd::CompareOp::kGe;
    default:
      return std::nullopt;
  }
}

}  // namespace kiln
