// Which primitives have a Highway vector loop (elementwise_simd.h) for f32 and f64: the
// one table that both the eager kernels (elementwise.cc) and jit's fused loops
// (jit/fused_kernel.cc) consult, so the two always run the same loop and give
// the same bits (arithmetic rounds, so the loop must be the same; comparisons are exact).
#pragma once

#include <optional>

#include "kernels/cpu/elementwise_simd.h"
#include "prims/registry.h"

namespace kiln {

constexpr std::optional<simd::UnaryOp> vector_unary_op(PrimId prim) {
  switch (prim) {
    case PrimId::neg:
      return simd::UnaryOp::kNeg;
    case PrimId::abs:
      return simd::UnaryOp::kAbs;
    case PrimId::sqrt:
      return simd::UnaryOp::kSqrt;
    case PrimId::rsqrt:
      return simd::UnaryOp::kRsqrt;
    case PrimId::floor:
      return simd::UnaryOp::kFloor;
    case PrimId::ceil:
      return simd::UnaryOp::kCeil;
    case PrimId::round:
      return simd::UnaryOp::kRound;
    case PrimId::exp:
      return simd::UnaryOp::kExp;
    case PrimId::log:
      return simd::UnaryOp::kLog;
    case PrimId::tanh:
      return simd::UnaryOp::kTanh;
    case PrimId::logistic:
      return simd::UnaryOp::kLogistic;
    default:
      return std::nullopt;
  }
}

constexpr std::optional<simd::BinaryOp> vector_binary_op(PrimId prim) {
  switch (prim) {
    case PrimId::add:
      return simd::BinaryOp::kAdd;
    case PrimId::sub:
      return simd::BinaryOp::kSub;
    case PrimId::mul:
      return simd::BinaryOp::kMul;
    case PrimId::div:
      return simd::BinaryOp::kDiv;
    case PrimId::max:
      return simd::BinaryOp::kMax;
    case PrimId::min:
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
    case PrimId::eq:
      return simd::CompareOp::kEq;
    case PrimId::ne:
      return simd::CompareOp::kNe;
    case PrimId::lt:
      return simd::CompareOp::kLt;
    case PrimId::le:
      return simd::CompareOp::kLe;
    case PrimId::gt:
      return simd::CompareOp::kGt;
    case PrimId::ge:
      return simd::CompareOp::kGe;
    default:
      return std::nullopt;
  }
}

}  // namespace kiln
