// jax.lax.gather and the jax.lax.scatter family with XLA's dimension numbers: slices of an
// operand at start indices (gather), and updates written, added, multiplied, or reduced by
// min / max into windows of an operand (scatter). The index vectors lie along the last axis
// of the indices, as in JAX.
//
//   // x[i] for each row i of idx (shape [n, 1]): slices of size 1 x 4, axis 0 collapsed.
//   Array rows = kiln::lax::gather(x, idx, {.offset_dims = {1}, .collapsed_slice_dims = {0},
//                                           .start_index_map = {0}}, {1, 4});
//   // x[i, j] += u for each (i, j) of idx (shape [n, 2]):
//   Array y = kiln::lax::scatter_add(x, idx, u, {.inserted_window_dims = {0, 1},
//                                                .scatter_dims_to_operand_dims = {0, 1}});
//
// Each is composed from kiln's one-axis gather and scatter on the flattened operand (each
// window element's flat position computed from the starts and iotas), so grad, jvp, vmap
// and jit go through it with no rule of its own.
//
// Out-of-range starts (a window that does not fit) follow `mode`: kError (the default, as
// kiln's take) fails the next synchronization; kClip moves the window inside; kFill is
// JAX's default FILL_OR_DROP: a gather returns `fill_value` for the whole window (NaN for
// floats, the lowest value for signed integers, the highest for unsigned ones, true for
// bool, as JAX), a scatter drops the whole window's updates.
#pragma once

#include <optional>

#include "kiln/array.h"
#include "kiln/index_mode.h"
#include "kiln/shape.h"

namespace kiln::lax {

struct GatherDimensionNumbers {
  Dims offset_dims;                  // output axes holding the window (ascending)
  Dims collapsed_slice_dims;         // operand axes of slice size 1 left out of the output
  Dims start_index_map;              // the operand axis each index-vector entry starts
  Dims operand_batching_dims;        // operand axes paired with...
  Dims start_indices_batching_dims;  // ...these axes of the indices (same sizes)
};

// The output: the indices' batch axes (all but the last) and the window's axes (those of
// slice_sizes not collapsed or batching), the latter at `offset_dims`.
Array gather(const Array& operand, const Array& start_indices,
             const GatherDimensionNumbers& dimension_numbers, Dims slice_sizes,
             IndexMode mode = IndexMode::kError, std::optional<double> fill_value = std::nullopt,
             CallSite site = {});

struct ScatterDimensionNumbers {
  Dims update_window_dims;             // updates' axes that hold a window (ascending)
  Dims inserted_window_dims;           // operand axes of window size 1 not in the updates
  Dims scatter_dims_to_operand_dims;   // the operand axis each index-vector entry starts
  Dims operand_batching_dims;          // operand axes paired with...
  Dims scatter_indices_batching_dims;  // ...these axes of the indices (same sizes)
};

// Each update element lands at its window's start plus its position in the window. Where
// windows overlap: scatter keeps the update that comes last in row-major order of the
// updates; scatter_add sums, scatter_mul multiplies, scatter_min / scatter_max reduce with
// the operand's value too (NaN wins, as in XLA).
Array scatter(const Array& operand, const Array& scatter_indices, const Array& updates,
              const ScatterDimensionNumbers& dimension_numbers, IndexMode mode = IndexMode::kError,
              CallSite site = {});
Array scatter_add(const Array& operand, const Array& scatter_indices, const Array& updates,
                  const ScatterDimensionNumbers& dimension_numbers,
                  IndexMode mode = IndexMode::kError, CallSite site = {});
Array scatter_mul(const Array& operand, const Array& scatter_indices, const Array& updates,
                  const ScatterDimensionNumbers& dimension_numbers,
                  IndexMode mode = IndexMode::kError, CallSite site = {});
Array scatter_min(const Array& operand, const Array& scatter_indices, const Array& updates,
                  const ScatterDimensionNumbers& dimension_numbers,
                  IndexMode mode = IndexMode::kError, CallSite site = {});
Array scatter_max(const Array& operand, const Array& scatter_indices, const Array& updates,
                  const ScatterDimensionNumbers& dimension_numbers,
                  IndexMode mode = IndexMode::kError, CallSite site = {});

}  // namespace kiln::lax
