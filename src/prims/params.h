// Typed parameters of primitives. Each struct lists its fields once in fields(); one
// generic walk (params_walk.h) prints, hashes and compares every kind of params, so a new
// params struct needs no printer or hash of its own. Params is the variant of all of them.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/index_mode.h"
#include "kiln/shape.h"

namespace kiln {

template <typename Struct, typename Value>
struct Field {
  std::string_view name;
  Value Struct::*member;
};
// Spelled out for compilers without deduction for aggregates (clang before 17, which the
// fuzz preset uses).
template <typename Struct, typename Value>
Field(std::string_view, Value Struct::*) -> Field<Struct, Value>;

struct NoParams {
  static constexpr auto fields() { return std::tuple{}; }
  friend auto operator<=>(const NoParams&, const NoParams&) = default;
};

struct ConvertParams {
  DType new_dtype = DType::f32;
  static constexpr auto fields() {
    return std::tuple{Field{"new_dtype", &ConvertParams::new_dtype}};
  }
  friend auto operator<=>(const ConvertParams&, const ConvertParams&) = default;
};

// Output has `shape`; operand axis i becomes output axis broadcast_dimensions[i] (which
// must increase), where the operand's size is 1 or equal to the output's.
struct BroadcastInDimParams {
  Shape shape;
  Dims broadcast_dimensions;
  static constexpr auto fields() {
    return std::tuple{Field{"shape", &BroadcastInDimParams::shape},
                      Field{"broadcast_dimensions", &BroadcastInDimParams::broadcast_dimensions}};
  }
  friend auto operator<=>(const BroadcastInDimParams&, const BroadcastInDimParams&) = default;
};

struct ReshapeParams {
  Shape new_sizes;
  static constexpr auto fields() {
    return std::tuple{Field{"new_sizes", &ReshapeParams::new_sizes}};
  }
  friend auto operator<=>(const ReshapeParams&, const ReshapeParams&) = default;
};

// Output axis i is operand axis permutation[i].
struct TransposeParams {
  Dims permutation;
  static constexpr auto fields() {
    return std::tuple{Field{"permutation", &TransposeParams::permutation}};
  }
  friend auto operator<=>(const TransposeParams&, const TransposeParams&) = default;
};

struct SliceParams {
  Dims start_indices;
  Dims limit_indices;
  Dims strides;  // all ones when empty
  static constexpr auto fields() {
    return std::tuple{Field{"start_indices", &SliceParams::start_indices},
                      Field{"limit_indices", &SliceParams::limit_indices},
                      Field{"strides", &SliceParams::strides}};
  }
  friend auto operator<=>(const SliceParams&, const SliceParams&) = default;
};

// Operands: array, start indices (integer vector with one entry per axis). Starts are
// clamped so the slice stays inside the array, as in XLA.
struct DynamicSliceParams {
  Dims slice_sizes;
  static constexpr auto fields() {
    return std::tuple{Field{"slice_sizes", &DynamicSliceParams::slice_sizes}};
  }
  friend auto operator<=>(const DynamicSliceParams&, const DynamicSliceParams&) = default;
};

struct ConcatenateParams {
  int64_t dimension = 0;
  static constexpr auto fields() {
    return std::tuple{Field{"dimension", &ConcatenateParams::dimension}};
  }
  friend auto operator<=>(const ConcatenateParams&, const ConcatenateParams&) = default;
};

// Operands: array, scalar padding value. Negative low/high crop.
struct PadParams {
  Dims low;
  Dims high;
  Dims interior;
  static constexpr auto fields() {
    return std::tuple{Field{"low", &PadParams::low}, Field{"high", &PadParams::high},
                      Field{"interior", &PadParams::interior}};
  }
  friend auto operator<=>(const PadParams&, const PadParams&) = default;
};

struct IotaParams {
  DType dtype = DType::i32;
  Shape shape;
  int64_t dimension = 0;
  static constexpr auto fields() {
    return std::tuple{Field{"dtype", &IotaParams::dtype}, Field{"shape", &IotaParams::shape},
                      Field{"dimension", &IotaParams::dimension}};
  }
  friend auto operator<=>(const IotaParams&, const IotaParams&) = default;
};

// gather(operand, indices): like tf.gather(operand, indices, axis, batch_dims).
//   out.shape = operand.shape[:axis] + indices.shape[batch_dims:] + operand.shape[axis+1:]
// with operand.shape[:batch_dims] == indices.shape[:batch_dims] and batch_dims <= axis.
// batch_dims=0 is numpy's take; axis=1, batch_dims=1 picks one entry per row.
struct GatherParams {
  int64_t axis = 0;
  int64_t batch_dims = 0;
  IndexMode mode = IndexMode::kError;
  static constexpr auto fields() {
    return std::tuple{Field{"axis", &GatherParams::axis},
                      Field{"batch_dims", &GatherParams::batch_dims},
                      Field{"mode", &GatherParams::mode}};
  }
  friend auto operator<=>(const GatherParams&, const GatherParams&) = default;
};

// scatter(operand, indices, updates) / scatter_add: the transpose of gather with the same
// params; updates has gather's output shape. Repeated indices: scatter_add sums them in
// index order; scatter keeps the last.
struct ScatterParams {
  int64_t axis = 0;
  int64_t batch_dims = 0;
  IndexMode mode = IndexMode::kError;
  static constexpr auto fields() {
    return std::tuple{Field{"axis", &ScatterParams::axis},
                      Field{"batch_dims", &ScatterParams::batch_dims},
                      Field{"mode", &ScatterParams::mode}};
  }
  friend auto operator<=>(const ScatterParams&, const ScatterParams&) = default;
};

struct ReduceParams {
  Dims axes;  // sorted, unique
  static constexpr auto fields() { return std::tuple{Field{"axes", &ReduceParams::axes}}; }
  friend auto operator<=>(const ReduceParams&, const ReduceParams&) = default;
};

// Index of the first maximum/minimum along `axis`; NaN counts as the maximum (and as the
// minimum for argmin), as in numpy.
struct ArgReduceParams {
  int64_t axis = 0;
  DType index_dtype = DType::i32;
  static constexpr auto fields() {
    return std::tuple{Field{"axis", &ArgReduceParams::axis},
                      Field{"index_dtype", &ArgReduceParams::index_dtype}};
  }
  friend auto operator<=>(const ArgReduceParams&, const ArgReduceParams&) = default;
};

struct CumsumParams {
  int64_t axis = 0;
  bool reverse = false;
  static constexpr auto fields() {
    return std::tuple{Field{"axis", &CumsumParams::axis}, Field{"reverse", &CumsumParams::reverse}};
  }
  friend auto operator<=>(const CumsumParams&, const CumsumParams&) = default;
};

// Output axes: batch axes (in lhs_batch order), then lhs free axes, then rhs free axes.
// Both operands have one dtype; the result has preferred_element_type if set, else that
// dtype (accumulation is at least f32 for 16-bit floats).
struct DotGeneralParams {
  Dims lhs_contracting;
  Dims rhs_contracting;
  Dims lhs_batch;
  Dims rhs_batch;
  std::optional<DType> preferred_element_type;
  static constexpr auto fields() {
    return std::tuple{Field{"lhs_contracting", &DotGeneralParams::lhs_contracting},
                      Field{"rhs_contracting", &DotGeneralParams::rhs_contracting},
                      Field{"lhs_batch", &DotGeneralParams::lhs_batch},
                      Field{"rhs_batch", &DotGeneralParams::rhs_batch},
                      Field{"preferred_element_type", &DotGeneralParams::preferred_element_type}};
  }
  friend auto operator<=>(const DotGeneralParams&, const DotGeneralParams&) = default;
};

// 2-D convolution, lhs NHWC, rhs HWIO (I = C / feature_group_count), output NHWC.
// lhs_dilation > 1 is a transposed (fractionally strided) convolution.
struct ConvParams {
  Dims window_strides;  // {sh, sw}
  Dims padding_low;     // {ph_lo, pw_lo}
  Dims padding_high;    // {ph_hi, pw_hi}
  Dims lhs_dilation;    // {1, 1} for an ordinary convolution
  Dims rhs_dilation;    // {1, 1} for an undilated kernel
  int64_t feature_group_count = 1;
  static constexpr auto fields() {
    return std::tuple{Field{"window_strides", &ConvParams::window_strides},
                      Field{"padding_low", &ConvParams::padding_low},
                      Field{"padding_high", &ConvParams::padding_high},
                      Field{"lhs_dilation", &ConvParams::lhs_dilation},
                      Field{"rhs_dilation", &ConvParams::rhs_dilation},
                      Field{"feature_group_count", &ConvParams::feature_group_count}};
  }
  friend auto operator<=>(const ConvParams&, const ConvParams&) = default;
};

// A window per operand axis (size 1 on axes that are not pooled). Padding cells count as
// -inf for max and 0 for sum.
struct ReduceWindowParams {
  Dims window_dimensions;
  Dims window_strides;
  Dims padding_low;
  Dims padding_high;
  static constexpr auto fields() {
    return std::tuple{Field{"window_dimensions", &ReduceWindowParams::window_dimensions},
                      Field{"window_strides", &ReduceWindowParams::window_strides},
                      Field{"padding_low", &ReduceWindowParams::padding_low},
                      Field{"padding_high", &ReduceWindowParams::padding_high}};
  }
  friend auto operator<=>(const ReduceWindowParams&, const ReduceWindowParams&) = default;
};

// sort: operands share one shape; each 1-D line along `dimension` is reordered by the
// lexicographic order of the first `num_keys` operands, stably (equal keys keep their
// order). Floats order -inf < ... < -0 == 0 < ... < inf < NaN, as numpy and XLA do.
struct SortParams {
  int64_t dimension = -1;
  int64_t num_keys = 1;
  static constexpr auto fields() {
    return std::tuple{Field{"dimension", &SortParams::dimension},
                      Field{"num_keys", &SortParams::num_keys}};
  }
  friend auto operator<=>(const SortParams&, const SortParams&) = default;
};

// custom_vjp_call: a user function with its own VJP (kiln::custom_vjp), registered under
// `id` in the process's table of custom functions; `name` is for people reading programs.
struct CustomVjpParams {
  std::string name;
  int64_t id = 0;
  static constexpr auto fields() {
    return std::tuple{Field{"name", &CustomVjpParams::name}, Field{"id", &CustomVjpParams::id}};
  }
  friend auto operator<=>(const CustomVjpParams&, const CustomVjpParams&) = default;
};

// pallas_call: a Pallas-style kernel call (kiln/pallas.h), its body, grid and BlockSpecs
// registered under `id` in the process's table of kernel calls (src/pallas/kernel_call_prim.cc);
// `name` is the kernel's, for people reading programs.
struct KernelCallParams {
  std::string name;
  int64_t id = 0;
  static constexpr auto fields() {
    return std::tuple{Field{"name", &KernelCallParams::name}, Field{"id", &KernelCallParams::id}};
  }
  friend auto operator<=>(const KernelCallParams&, const KernelCallParams&) = default;
};

// checkpoint_name: the name a save_named checkpoint policy refers to (kiln/checkpoint.h).
struct CheckpointNameParams {
  std::string name;
  static constexpr auto fields() { return std::tuple{Field{"name", &CheckpointNameParams::name}}; }
  friend auto operator<=>(const CheckpointNameParams&, const CheckpointNameParams&) = default;
};

// ----- control flow (src/prims/control_flow_rules.cc) ------------------------------------
class Program;

// A closed sub-program held by a control-flow primitive (it refers to nothing outside
// itself: values it needs are operands of the equation). Compared by structure (its
// printed text, with a pointer-equality fast path), so equal params mean equal programs.
struct ProgramRef {
  std::shared_ptr<const Program> program;
  friend bool operator==(const ProgramRef& a, const ProgramRef& b);
  friend std::strong_ordering operator<=>(const ProgramRef& a, const ProgramRef& b);
};

// scan: operands are consts (num_consts), the initial carry (num_carry), then xs whose
// leading axes all equal `length`. body: (consts, carry, x slices) -> (carry, y slices).
// Results: the final carry, then ys stacked on a new leading axis of size length.
// reverse runs steps length-1..0 (ys stay indexed by step); unroll is how many steps one
// loop iteration runs (results do not depend on it); recompute makes the gradient run each
// step's forward again from its carry instead of keeping its costly results.
struct ScanParams {
  ProgramRef body;
  int64_t length = 0;
  int64_t num_consts = 0;
  int64_t num_carry = 0;
  bool reverse = false;
  int64_t unroll = 1;
  bool recompute = false;
  static constexpr auto fields() {
    return std::tuple{Field{"body", &ScanParams::body},
                      Field{"length", &ScanParams::length},
                      Field{"num_consts", &ScanParams::num_consts},
                      Field{"num_carry", &ScanParams::num_carry},
                      Field{"reverse", &ScanParams::reverse},
                      Field{"unroll", &ScanParams::unroll},
                      Field{"recompute", &ScanParams::recompute}};
  }
  friend auto operator<=>(const ScanParams&, const ScanParams&) = default;
};

// cond (JAX's switch): operands are an i32 scalar index, then the branch operands, which
// every branch takes. The index is clamped to [0, branches-1]; a bool predicate is two
// branches, false first. Every branch returns the same types.
struct CondParams {
  std::vector<ProgramRef> branches;
  static constexpr auto fields() { return std::tuple{Field{"branches", &CondParams::branches}}; }
  friend auto operator<=>(const CondParams&, const CondParams&) = default;
};

// while_loop: operands are cond's consts, body's consts, then the initial carry.
// cond: (cond consts, carry) -> bool[]; body: (body consts, carry) -> carry.
struct WhileParams {
  ProgramRef cond;
  ProgramRef body;
  int64_t cond_num_consts = 0;
  int64_t body_num_consts = 0;
  static constexpr auto fields() {
    return std::tuple{Field{"cond", &WhileParams::cond}, Field{"body", &WhileParams::body},
                      Field{"cond_num_consts", &WhileParams::cond_num_consts},
                      Field{"body_num_consts", &WhileParams::body_num_consts}};
  }
  friend auto operator<=>(const WhileParams&, const WhileParams&) = default;
};

// ----- SPMD (src/prims/spmd_rules.cc, src/sharding/) --------------------------------------
// A collective over mesh axes `axes` ("data", or "data,model" with the major axis first)
// of the enclosing shard_map, whose sizes multiply to `axis_size`: the devices that agree
// on every other axis form a group of axis_size members, indexed by their coordinates
// along `axes`. dimension: all_gather's axis, psum_scatter's scatter dimension,
// all_to_all's concat axis; split_dimension: all_to_all's split axis. tiled: all_gather
// and all_to_all concatenate (and psum_scatter splits) along the dimension instead of
// adding (removing) one of size axis_size. permutation: ppermute's (source, destination)
// pairs of group indices, flattened.
struct CollectiveParams {
  std::string axes;
  int64_t axis_size = 1;
  int64_t dimension = 0;
  int64_t split_dimension = 0;
  bool tiled = false;
  Dims permutation;
  static constexpr auto fields() {
    return std::tuple{Field{"axes", &CollectiveParams::axes},
                      Field{"axis_size", &CollectiveParams::axis_size},
                      Field{"dimension", &CollectiveParams::dimension},
                      Field{"split_dimension", &CollectiveParams::split_dimension},
                      Field{"tiled", &CollectiveParams::tiled},
                      Field{"permutation", &CollectiveParams::permutation}};
  }
  friend auto operator<=>(const CollectiveParams&, const CollectiveParams&) = default;
};

// shard_map: `body` runs on every device of the mesh ("data=2,model=2", row-major over
// `devices`, their ids) on that device's blocks of the operands, split by `in_specs`
// ("{data,_} {_}", one spec per operand); its results are the blocks of the results,
// assembled by `out_specs`. The body's types are the blocks'.
struct ShardMapParams {
  ProgramRef body;
  std::string mesh;
  Dims devices;
  std::string in_specs;
  std::string out_specs;
  static constexpr auto fields() {
    return std::tuple{Field{"body", &ShardMapParams::body}, Field{"mesh", &ShardMapParams::mesh},
                      Field{"devices", &ShardMapParams::devices},
                      Field{"in_specs", &ShardMapParams::in_specs},
                      Field{"out_specs", &ShardMapParams::out_specs}};
  }
  friend auto operator<=>(const ShardMapParams&, const ShardMapParams&) = default;
};

using Params =
    std::variant<NoParams, ConvertParams, BroadcastInDimParams, ReshapeParams, TransposeParams,
                 SliceParams, DynamicSliceParams, ConcatenateParams, PadParams, IotaParams,
                 GatherParams, ScatterParams, ReduceParams, ArgReduceParams, CumsumParams,
                 DotGeneralParams, ConvParams, ReduceWindowParams, CustomVjpParams,
                 KernelCallParams, SortParams, CheckpointNameParams, ScanParams, CondParams,
                 WhileParams, CollectiveParams, ShardMapParams>;

std::string_view index_mode_name(IndexMode mode);

}  // namespace kiln
