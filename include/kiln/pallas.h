// Pallas-style tiled kernels on the CPU (JAX's pallas_call; docs/kernels.md). A kernel is a
// body run once per point of a grid; BlockSpecs say which block of each array the body
// sees at each point, and the body reads and writes those blocks through Refs with kiln's
// array operations:
//
//   // C = A @ B in bm x bn tiles, the K axis in bk steps accumulated in the output block.
//   auto body = [](const pallas::Kernel& k) {
//     if (k.program_id(2) == 0) k.out(0).store(zeros(k.out(0).block_type().shape));
//     k.out(0).store(k.out(0).load() + matmul(k.in(0).load(), k.in(1).load()));
//   };
//   Array c = pallas::call(body, {AbstractValue({m, n}, DType::f32)}, {m / bm, n / bn, kk / bk},
//       {pallas::BlockSpec({bm, bk}, [](pallas::Index g) { return pallas::Index{g[0], g[2]}; }),
//        pallas::BlockSpec({bk, bn}, [](pallas::Index g) { return pallas::Index{g[2], g[1]}; })},
//       {pallas::BlockSpec({bm, bn}, [](pallas::Index g) { return pallas::Index{g[0], g[1]}; })},
//       {a, b})[0];
//
// Semantics (those of Pallas): the grid's points run in row-major order; the axes marked
// `parallel` (all but the last, by default) may run in any order, the others (`arbitrary`,
// the reductions) in order, and they must come last. A block index i along a dimension of
// block size b covers elements [i*b, (i+1)*b); a block that runs past the array's edge is
// ragged: load() fills the missing elements with zeros (or the value given) and store()
// writes only the elements inside the array. An output's block keeps what was stored in it
// while consecutive points revisit it, so a reduction accumulates there; outputs start as
// zeros, and so does scratch, which lives for the whole call (compiled: for each point of
// the parallel axes, whose in-order points a worker runs on scratch of its own).
//
// Two modes (CallOptions::interpret): compiled, the default, traces the body into programs
// of kiln ops on blocks and compiles them with jit's compiler, the parallel points spread
// over the compute pool; interpret mode runs the body eagerly at each point, one block at
// a time, for debugging. Both check every index, and what a parallel run would race on: an
// output block written by two points that differ in a parallel axis is an error.
//
// Inside jit, grad, vmap or make_program a call is a primitive of the program,
// `pallas_call[name=..., id=...]` (the body, grid and specs registered under the id in this
// process): it prints and parses back as program text, runs under jit (compiled, its
// variants traced where the call is traced and the kernel one step of the compiled program;
// in interpret mode the program runs equation by equation), and batches under vmap as the
// same kernel over one more, leading, parallel grid axis that the body does not see
// (program_id(0) is still its own first axis; each example's scratch starts as zeros). A kernel has
// no derivative of its own: wrap it in custom_vjp with its backward kernel, as Pallas kernels are
// in JAX. Every spec and index is checked when the call is made.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "kiln/cost_types.h"
#include "kiln/error.h"
#include "kiln/shape.h"

namespace kiln::pallas {

// Grid coordinates, or block indices (one per array dimension).
using Index = std::vector<int64_t>;

// The number of blocks of size `block` (> 0) that cover `size` elements, the last one
// ragged when it does not divide: a grid's extent (Pallas' pl.cdiv).
constexpr int64_t cdiv(int64_t size, int64_t block) {
  return (size + block - 1) / block;
}

// A block size of one element that the body does not see: the dimension is dropped from
// the block load() returns and store() takes (Pallas' None). vmap indexes its batch so.
inline constexpr int64_t kSqueezed = -2;

struct BlockSpec {
  // The block's size along each dimension of its array (-1: the whole dimension;
  // kSqueezed: one element, dropped from the block the body sees).
  Dims block_shape;
  // The point's grid coordinates -> the block's index along each dimension of the array.
  // Empty: the point's coordinates themselves (the grid then has the array's rank).
  std::function<Index(const Index& grid_point)> index_map;

  BlockSpec(Dims shape, std::function<Index(const Index&)> map = {})
      : block_shape(std::move(shape)), index_map(std::move(map)) {}
};

enum class GridAxis { kParallel, kArbitrary };

class RefState;     // the buffer behind a Ref, and where its block sits
class KernelTrace;  // what the compiled path records while it traces the body

// One block of an input, output or scratch buffer, as the body sees it at this point.
class Ref {
 public:
  // The block as an array of the block's shape; elements past the array's edge read as
  // `fill` (inputs and outputs; scratch has no edge).
  Array load(double fill = 0) const;
  // Writes `value` (the block's shape; converted to the buffer's dtype as astype does) into
  // the block, the elements past the array's edge left out.
  void store(const Array& value) const;
  // The block's type as the body sees it ("f32[32,64]", squeezed dimensions left out), and
  // how many of its rows/columns lie inside the array.
  AbstractValue block_type() const;
  Dims valid_extent() const;

 private:
  friend class KernelRun;
  Ref(std::shared_ptr<RefState> state, Index block, std::string name)
      : state_(std::move(state)), block_(std::move(block)), name_(std::move(name)) {}
  std::shared_ptr<RefState> state_;
  Index block_;  // the block's index along each dimension (scratch: all zeros)
  std::string name_;
};

// What the body gets at each grid point.
class Kernel {
 public:
  int64_t program_id(int64_t axis) const;
  int64_t num_programs(int64_t axis) const;
  const Ref& in(size_t i) const;
  const Ref& out(size_t i) const;
  const Ref& scratch(size_t i) const;
  const std::string& name() const { return name_; }

 private:
  friend class KernelRun;
  std::string name_;
  Index point_;
  Index grid_;
  // Leading grid axes the body does not see (vmap's batch axes): program_id(a) is axis
  // a + hidden_axes_ of the grid.
  size_t hidden_axes_ = 0;
  // Set while the compiled path traces the body: program_id() is recorded there.
  KernelTrace* trace_ = nullptr;
  std::vector<Ref> in_;
  std::vector<Ref> out_;
  std::vector<Ref> scratch_;
};

using KernelBody = std::function<void(const Kernel&)>;

struct CallOptions {
  std::string name = "kernel";  // in errors and reports
  // One per grid axis; empty: parallel, except the last axis, which runs in order.
  std::vector<GridAxis> semantics = {};
  // Scratch buffers: their types; each is one block for the whole call.
  std::vector<AbstractValue> scratch = {};
  // The most bytes of scratch a call may ask for.
  int64_t scratch_limit_bytes = int64_t{64} << 20;
  // What one call costs, for cost_analysis and the roofline (Pallas' CostEstimate): kiln
  // cannot see inside a body. Unset: no FLOPs, and the bytes of the operands and results.
  std::optional<Cost> cost_estimate = std::nullopt;
  // false (compiled): the body is traced into a program per variant (the points whose
  // program_id() and ragged edges it reads alike share one), each compiled by jit's
  // compiler, and the grid's parallel points run on the compute pool, each worker with block
  // buffers and scratch of its own (zeroed when it starts a point of the parallel axes).
  // The body must compute on its blocks with kiln ops only: reading their values on the
  // host is an error. true: interpret mode, for writing and debugging a kernel (each point's
  // body run eagerly on host copies of its blocks). KILN_PALLAS=interpret|compiled sets
  // every call's mode. docs/kernels.md, *Compiled mode*.
  bool interpret = false;
  // Compiled mode: while a worker computes on one grid point's blocks, the input blocks its
  // next point reads are copied into a second set of buffers by the block copier, a thread
  // standing in for the DMA engine a CPU does not have; the trace shows the copies and the
  // compute as separate events. The results are the same bits either way. Off by default:
  // on the CPUs measured it is slower, even with a core to itself (docs/kernels.md,
  // *Double buffering*, has the measurements). KILN_PALLAS_DOUBLE_BUFFER=on|off sets every
  // call's.
  bool double_buffer = false;
};

// Runs `body` over `grid` and returns the outputs (`out_types`, each filled block by block
// through `out_specs`). Inputs are read through `in_specs`, one per input.
std::vector<Array> call(const KernelBody& body, std::vector<AbstractValue> out_types, Index grid,
                        std::vector<BlockSpec> in_specs, std::vector<BlockSpec> out_specs,
                        const std::vector<Array>& inputs, const CallOptions& options = {},
                        CallSite site = {});

// ----- kernels kiln ships (checked by `kiln kernels check`) ------------------------------

struct MatmulBlocks {
  int64_t m = 128;
  int64_t n = 128;
  int64_t k = 128;
};
// a [M, K] @ b [K, N] in m x n output tiles, the K axis in k steps (the grid's last axis, in
// order) accumulated in an f32 scratch tile: f32, or bf16 / f16 inputs with f32
// accumulation; the result in the inputs' dtype, rounded once.
Array matmul(const Array& a, const Array& b, MatmulBlocks blocks = {}, CallSite site = {});

// The row kernels' default rows per grid point: as many rows, up to 8, as 64 KiB of f32
// holds (one row of a 50,304-token vocabulary; 8 rows of 2,048 or fewer), so that the
// passes over a block after the first read it from cache (docs/kernels.md).
inline constexpr int64_t kAutoBlockRows = 0;
// The rows kAutoBlockRows picks for rows of n elements.
int64_t auto_block_rows(int64_t n);

// Softmax over the last axis of x [rows, n], `block_rows` rows per grid point, computed in
// f32 (the row's maximum subtracted first) and rounded once to x's dtype.
Array softmax(const Array& x, int64_t block_rows = kAutoBlockRows, CallSite site = {});

// LayerNorm over the last axis of x [rows, n]: (x - mean) / sqrt(var + eps) * scale + bias
// with scale and bias [n] in x's dtype, `block_rows` rows per grid point, the statistics
// (biased variance) and the result computed in f32 and rounded once to x's dtype.
Array layer_norm(const Array& x, const Array& scale, const Array& bias, double eps = 1e-5,
                 int64_t block_rows = kAutoBlockRows, CallSite site = {});

// Softmax cross-entropy of each row of logits [rows, n] against an integer label in [0, n)
// (labels [rows]): logsumexp(row) - row[label], f32 [rows], computed in f32 without writing
// the probabilities, `block_rows` rows per grid point. A label outside [0, n) is an error
// naming its row (checked by the body as it reads the labels' block).
Array softmax_cross_entropy(const Array& logits, const Array& labels,
                            int64_t block_rows = kAutoBlockRows, CallSite site = {});
// Its backward pass: the cotangent of the logits, (softmax(row) - onehot(label)) * g[row],
// for g f32 [rows] (the cotangent of each row's loss), in f32 and rounded once to the
// logits' dtype; the labels are checked as the forward pass checks them.
Array softmax_cross_entropy_grad(const Array& logits, const Array& labels, const Array& g,
                                 int64_t block_rows = kAutoBlockRows, CallSite site = {});

struct AttentionBlocks {
  int64_t q = 64;  // query rows per grid point
  int64_t k = 64;  // key rows per step of the (last, in-order) key axis
};
// Flash attention's forward pass (Dao et al. 2022): softmax(q k^T * scale) v for q, k, v
// [batch x heads, T, D] without the T x T matrix: each point holds a block of query rows
// and runs through the key blocks in order, keeping the rows' running maximum, the running
// sum of exponentials and the weighted values (online softmax) in f32 scratch. `causal`
// masks keys after the query (key blocks wholly after a query block are skipped).
// f32, bf16 or f16; the result in q's dtype. Differentiable: its VJP is
// flash_attention_grad's kernels (a custom_vjp), so grad never sees the T x T matrix.
Array flash_attention(const Array& q, const Array& k, const Array& v, bool causal,
                      AttentionBlocks blocks = {}, CallSite site = {});

struct AttentionGrads {
  Array dq, dk, dv;
};
// Its backward pass for the output's cotangent d_out (q's shape and dtype), as FlashAttention-2
// computes it without the T x T matrix: the forward kernel's per-row logsumexp and
// delta = rowsum(d_out * out), then one kernel for dK and dV (each key block through the
// query blocks in order) and one for dQ (each query block through the key blocks), the
// probabilities recomputed per block in f32; the gradients in q's dtype.
AttentionGrads flash_attention_grad(const Array& q, const Array& k, const Array& v,
                                    const Array& d_out, bool causal, AttentionBlocks blocks = {},
                                    CallSite site = {});

}  // namespace kiln::pallas
