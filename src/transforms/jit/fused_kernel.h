// The loop that runs a fused group of elementwise equations: the output range is cut into
// tiles small enough to stay in cache, and for each tile every member's own kernel runs on
// the tile, reading operands from the previous members' tiles or from memory. Members
// therefore compute exactly what they compute eagerly (same kernel, same per-element
// operations: elementwise kernels give a result that does not depend on the element's
// position), while intermediate values never travel to memory. A group made only of the
// float ops that have vector loops (an optimizer update, a chain of arithmetic) runs as a
// FusedProgram instead: the same vector loops, called back to back on 2 KiB tiles with
// no per-member kernel set-up, streaming results to memory without a fence per tile.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "base/compute_pool.h"
#include "ir/program.h"
#include "kernels/cpu/elementwise_simd.h"

namespace kiln::detail {

// Where a member's operand comes from.
struct FusedOperand {
  enum class Kind : uint8_t {
    kTile,      // an earlier member's result: its tile
    kDirect,    // a value of the group's shape in memory: read at the tile's offset
    kScalar,    // a one-element value: passed whole, broadcast by the kernel
    kExpanded,  // a value broadcast to the group's shape: copied into a tile per tile
  };
  Kind kind = Kind::kDirect;
  DType dtype = DType::f32;
  int64_t tile = 0;              // kTile: which tile buffer (kExpanded: the tile it is copied into)
  int64_t source = 0;            // kDirect/kScalar/kExpanded: index into the loop's external values
  std::vector<int64_t> strides;  // kExpanded: element stride per group axis (0: broadcast)
};

struct FusedMember {
  KernelFn kernel = nullptr;  // null for broadcast_in_dim, which is a pure expansion
  // The vector loop the eager kernel runs for this member (f32/f64 arithmetic and the hot
  // math functions): called directly on the tile, without the kernel's generic set-up.
  enum class Vector : uint8_t { kNone, kUnaryF32, kUnaryF64, kBinaryF32, kBinaryF64 };
  Vector vector = Vector::kNone;
  uint8_t vector_op = 0;  // a simd::UnaryOp or simd::BinaryOp
  // The last member writes its (single) exported result straight to memory: nothing in
  // the tile reads the operands after it, so even an in-place result is safe.
  int64_t direct_export = -1;
  const Params* params = nullptr;
  std::vector<FusedOperand> operands;
  std::vector<int64_t> result_tiles;  // one tile buffer per result
  std::vector<DType> result_dtypes;
};

// The fast form of a group whose members are all vector ops of one float dtype reading
// tiles, memory or single elements: one straight-line program (simd::run_program_*) run
// block by block over small tiles that stay in L1 cache, with tiles reused once dead.
// Slots: the loop's externals, then its exports (both set per block), then the tiles.
struct FusedProgram {
  DType dtype = DType::f32;
  std::vector<simd::ProgramStep> steps;
  std::vector<bool> external_scalar;  // per external: one element, read whole
  int64_t num_tiles = 0;
};

struct FusedLoop {
  Shape shape;  // every member's result shape
  std::vector<FusedMember> members;
  std::vector<DType> tile_dtypes;                  // per tile buffer
  std::vector<VarId> externals;                    // values read from memory
  std::vector<std::pair<int64_t, VarId>> exports;  // tile -> value written to memory
  std::optional<FusedProgram> program;             // when every member can run in one

  // Builds the loop for `equations` (a StepPlan's) of `program`; kernels[e] is the kernel
  // equation e runs eagerly; in_memory(v) says whether value v must be written to memory
  // (something outside the group reads it, or it is a result).
  static FusedLoop build(const Program& program, std::span<const size_t> equations,
                         std::span<const KernelFn> kernels,
                         const std::function<bool(VarId)>& in_memory);

  // Runs over the whole shape. external_data[i] points at externals[i]; export_data[j] at
  // the memory of exports[j].
  void run(std::span<const void* const> external_data, std::span<void* const> export_data,
           ComputePool& pool) const;

 private:
  void run_program(std::span<const void* const> external_data, std::span<void* const> export_data,
                   ComputePool& pool) const;
};

}  // namespace kiln::detail
