// The loop that runs a fused group of elementwise equations: the output range is cut into
// tiles small enough to stay in cache, and for each tile every member's own kernel runs on
// the tile, reading operands from the previous members' tiles or from memory. Members
// therefore compute exactly what they compute eagerly (same kernel, same per-element
// operations: elementwise kernels give a result that does not depend on the element's
// position), while intermediate values never travel to memory. A group made only of ops
// with vector loops over one float type (an optimizer update, a chain of arithmetic, a
// layer's bias + ReLU with its comparisons, selects and broadcasts) runs as a
// FusedProgram instead: the same arithmetic loops as eager, called back to back on 2 KiB
// tiles with no per-member kernel set-up, streaming results to memory without a fence per
// tile (comparisons and selects are exact, so their program loops need not be eager's).
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
  // Comparisons and selects of f32/f64 have vector loops in a FusedProgram only (their
  // results are exact, so any loop gives the eager kernel's bits).
  enum class Vector : uint8_t {
    kNone,
    kUnaryF32,
    kUnaryF64,
    kBinaryF32,
    kBinaryF64,
    kCompare,  // operands f32 or f64, result bool
    kSelect,   // bool predicate, values and result f32 or f64
  };
  Vector vector = Vector::kNone;
  uint8_t vector_op = 0;  // a simd::UnaryOp, simd::BinaryOp or simd::CompareOp
  // The last member writes its (single) exported result straight to memory: nothing in
  // the tile reads the operands after it, so even an in-place result is safe.
  int64_t direct_export = -1;
  const Params* params = nullptr;
  // The equation's primitive and the user's line that called it, for its kernel's errors.
  PrimId prim{};
  CallSite site = kUnknownSite;
  std::vector<FusedOperand> operands;
  std::vector<int64_t> result_tiles;  // one tile buffer per result
  std::vector<DType> result_dtypes;

  bool arithmetic() const { return vector != Vector::kNone && vector < Vector::kCompare; }
};

// The fast form of a group whose members are vector ops of one float dtype (arithmetic,
// comparisons, selects, broadcasts) reading tiles, memory or single elements: one
// straight-line program (simd::run_program_*) run block by block over small tiles that
// stay in L1 cache, with tiles reused once dead.
// Slots: the loop's externals, then its exports (both set per block), then the tiles.
struct FusedProgram {
  // A value broadcast to the group's shape: per block, either read in place (a block
  // within one row of a value that varies along the last axis only) or expanded into its
  // own tile slot, which no other result ever reuses.
  struct Expansion {
    int64_t source = 0;  // index into the loop's externals
    std::vector<int64_t> strides;
    int64_t item = 0;  // bytes per element
    int64_t row = 0;   // > 0: only the last axis varies, and it is this long
    uint16_t slot = 0;
  };
  DType dtype = DType::f32;  // the float type of every value (comparison results are bool)
  std::vector<simd::ProgramStep> steps;
  std::vector<bool> external_scalar;   // per external: one element, read whole
  std::vector<int64_t> external_item;  // per external: bytes per element
  std::vector<int64_t> export_item;    // per export: bytes per element
  std::vector<Expansion> expansions;
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

// The steps of compiling a fused group into a FusedProgram (FusedLoop::build runs them;
// declared here so that tests can check each on its own).

// How a group's tiles are used, by member index.
struct TileUses {
  std::vector<int64_t> last_reader;  // per tile: the last member that reads it, or -1
  std::vector<int64_t> export_of;    // per tile: its index among the loop's exports, or -1
  // Per tile: some step reads it as a run of elements (a unary loop has no repeated-element
  // form), so a broadcast single element feeding it is expanded rather than aliased.
  std::vector<bool> read_as_run;
};
TileUses tile_uses(const FusedLoop& loop);

// Which slot each member of a program reads and writes (slots as in FusedProgram: the
// loop's externals, then its exports, then the tiles).
struct ProgramSlots {
  struct Member {
    std::vector<int64_t> operands;  // per operand: its slot
    std::vector<bool> scalar;       // per operand: one element, repeated
    // The slot the member's result is in: a step's, or for a broadcast the slot readers
    // find it in (its expansion's, or the external element itself when `result_scalar`).
    int64_t result = -1;
    bool result_scalar = false;
    bool to_memory = false;  // a step writing straight into its export's slot
  };
  std::vector<Member> members;
  std::vector<FusedProgram::Expansion> expansions;
  std::vector<int64_t> scalar_externals;  // single elements that broadcasts read in place
  int64_t num_tiles = 0;
};
// Tile slots are taken when a step writes them and given back after their last reader, so
// later results reuse them; every expansion's slot is taken first and never given back
// (expansions are written at the start of each block, before any step runs).
ProgramSlots allocate_slots(const FusedLoop& loop, const TileUses& uses);

// The program's steps: one per member that computes, then one copy out to memory per
// exported result that a step did not write there itself.
std::vector<simd::ProgramStep> generate_steps(const FusedLoop& loop, const TileUses& uses,
                                              const ProgramSlots& slots);

// The group as one straight-line program, or nothing when a member has no vector loop
// over the group's float dtype (integer ops, conversions, a non-float broadcast...).
std::optional<FusedProgram> build_program(const FusedLoop& loop);

}  // namespace kiln::detail
