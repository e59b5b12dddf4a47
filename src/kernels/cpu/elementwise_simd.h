// Vectorised (Highway) loops for the hot floating-point elementwise ops. Compiled for
// several instruction sets; the best one for this CPU is chosen at run time. Every element,
// including a run's tail, goes through the same vector code, so a value's result does not
// depend on where it sits in the array.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::simd {

enum class UnaryOp : uint8_t {
  kNeg,
  kAbs,
  kSqrt,
  kRsqrt,
  kFloor,
  kCeil,
  kRound,
  kExp,
  kLog,
  kTanh,
  kLogistic,
  // f32: Giles' single-precision approximation evaluated in f64 lanes, within 2 ulps of the
  // correctly rounded reference; f64: the reference's own scalar function, lane by lane.
  kErfInv,
  kCopy  // y = x bit for bit (jit's fused programs: a result copied out to memory)
};
enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kMax, kMin };

// How results are stored: kAuto streams past the caches (non-temporal stores) for long
// runs only; kStream always does, for a caller that writes a long result in short pieces
// (jit's fused loop, tile by tile). The values are the same either way.
enum class Store : uint8_t { kAuto, kStream };

// Operand b (or a) may be a single repeated element: a_stride/b_stride are 1 or 0.
void unary_f32(UnaryOp op, const float* x, float* y, size_t n, Store store = Store::kAuto);
void unary_f64(UnaryOp op, const double* x, double* y, size_t n, Store store = Store::kAuto);
// y = pred ? on_true : on_false over 4-byte elements (f32, i32, u32 as bits); strides
// are 1 or 0 (a repeated scalar).
void select_32(const bool* pred, size_t pred_stride, const uint32_t* on_true, size_t true_stride,
               const uint32_t* on_false, size_t false_stride, uint32_t* y, size_t n);
void binary_f32(BinaryOp op, const float* a, size_t a_stride, const float* b, size_t b_stride,
                float* y, size_t n, Store store = Store::kAuto);
void binary_f64(BinaryOp op, const double* a, size_t a_stride, const double* b, size_t b_stride,
                double* y, size_t n, Store store = Store::kAuto);

enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };

// One instruction of a straight-line vector program (jit's fused loops) over a block of
// elements of the program's float type T; each operand is a run of elements or one
// repeated element (its *_scalar flag). The program reads and writes `slots`, one pointer
// per slot, set by the caller per block. A result never shares its slot with one of its
// own operands.
struct ProgramStep {
  enum class Form : uint8_t {
    kUnary,      // y = op(a), a UnaryOp
    kBinary,     // y = op(a, b), a BinaryOp
    kCompare,    // y = op(a, b) as bools (one byte each, 0 or 1), a CompareOp
    kSelect,     // y = a ? b : c, with a bools and b, c of type T (moved as bits)
    kCopyBools,  // y = a over bools (a bool result copied out to memory)
  };
  Form form = Form::kUnary;
  uint8_t op = 0;
  bool a_scalar = false, b_scalar = false, c_scalar = false;
  bool stream = false;  // results go to memory nobody reads soon: non-temporal stores
  uint16_t a = 0, b = 0, c = 0, y = 0;
};
// Runs the steps in order over n elements of every slot. Streamed results are not fenced:
// call flush_streams() on the same thread before anything else reads them.
void run_program_f32(const ProgramStep* steps, size_t count, void* const* slots, size_t n);
void run_program_f64(const ProgramStep* steps, size_t count, void* const* slots, size_t n);
void flush_streams();

// Which instruction set the dispatcher chose (for `kiln devices`).
const char* target_name();

}  // namespace kiln::simd
