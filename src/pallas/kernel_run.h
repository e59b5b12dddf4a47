// The interpret-mode machinery that pallas::call's two paths share (src/pallas): a buffer and
// its blocking (RefState), and one call's checked setup and grid walk (KernelRun). The
// interpreter (pallas_call.cc) runs the body at each point on these; the compiled path
// (compiled_kernel.cc) uses them to check the call and to trace the body's variants.
#pragma once

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/pallas.h"
#include "pallas/kernel_call.h"

namespace kiln::pallas {

class KernelTrace;

inline std::string index_text(const Index& index) {
  return fmt::format("({})", fmt::join(index, ", "));
}

// A buffer and its blocking.
class RefState {
 public:
  std::string name;            // "input 1", "output 0", "scratch 0"
  AbstractValue aval;          // the whole buffer
  Dims block;                  // the block's shape (-1 resolved, a squeezed dimension 1)
  std::vector<bool> squeezed;  // per dimension: dropped from the block the body sees
  std::vector<std::byte> bytes;
  bool is_output = false;
  // Outputs: the parallel grid coordinates of the first point that stored each block, to
  // catch two points a parallel run would race on.
  std::map<Index, Index> writers;
  std::vector<size_t> parallel_axes;
  // The compiled path's tracing: loads and stores go to `trace` instead of `bytes`, as the
  // value of the traced program's input `slot` (inputs, then outputs, then scratch).
  KernelTrace* trace = nullptr;
  size_t slot = 0;
  // The compiled path's buffer: the input's or result's device memory itself (`bytes` is
  // the interpreter's host copy).
  std::byte* data = nullptr;
  bool is_scratch = false;

  int64_t rank() const { return aval.shape.rank(); }
  // The block as the body sees it: the squeezed dimensions (each of size 1) left out, which
  // leaves the bytes' row-major order as it is.
  Shape visible_block() const {
    Dims visible;
    for (size_t d = 0; d < block.size(); ++d) {
      if (!squeezed[d]) visible.push_back(block[d]);
    }
    return Shape(visible);
  }
  size_t element_size() const { return static_cast<size_t>(dtype_size(aval.dtype)); }

  // The number of elements of block `index` along dimension d that lie inside the array.
  int64_t valid(const Index& index, int64_t d) const {
    int64_t start = index[static_cast<size_t>(d)] * block[static_cast<size_t>(d)];
    return std::clamp<int64_t>(aval.shape[d] - start, 0, block[static_cast<size_t>(d)]);
  }
  // valid() along each dimension the body sees (the squeezed ones left out).
  Index visible_extent(const Index& index) const {
    Index extent;
    for (int64_t d = 0; d < rank(); ++d) {
      if (!squeezed[static_cast<size_t>(d)]) extent.push_back(valid(index, d));
    }
    return extent;
  }

  // Calls copy(buffer offset, block offset, elements) for each run of the block's elements
  // that lies inside the array, the runs along the last dimension.
  template <typename F>
  void for_each_run(const Index& index, F&& copy) const {
    const int64_t r = rank();
    if (r == 0) {
      copy(size_t{0}, size_t{0}, size_t{1});
      return;
    }
    Index valid_extent(static_cast<size_t>(r));
    for (int64_t d = 0; d < r; ++d) {
      valid_extent[static_cast<size_t>(d)] = valid(index, d);
      if (valid_extent[static_cast<size_t>(d)] == 0) return;
    }
    Dims array_strides = aval.shape.strides();
    Dims block_strides = Shape(block).strides();
    Index row(static_cast<size_t>(r), 0);  // position inside the block; the last stays 0
    const size_t run = static_cast<size_t>(valid_extent[static_cast<size_t>(r - 1)]);
    while (true) {
      int64_t buffer_offset = 0;
      int64_t block_offset = 0;
      for (int64_t d = 0; d < r; ++d) {
        size_t u = static_cast<size_t>(d);
        buffer_offset += (index[u] * block[u] + row[u]) * array_strides[u];
        block_offset += row[u] * block_strides[u];
      }
      copy(static_cast<size_t>(buffer_offset), static_cast<size_t>(block_offset), run);
      int64_t d = r - 2;
      for (; d >= 0; --d) {
        size_t u = static_cast<size_t>(d);
        if (++row[u] < valid_extent[u]) break;
        row[u] = 0;
      }
      if (d < 0) return;
    }
  }
};

// One call: the checked setup, then the grid's points in order.
class KernelRun {
 public:
  KernelRun(Index grid, const CallOptions& options, size_t hidden_axes, CallSite site)
      : grid_(std::move(grid)), options_(options), hidden_axes_(hidden_axes), site_(site) {}

  // The semantics, one per grid axis (the default resolved).
  const std::vector<GridAxis>& semantics() const { return semantics_; }

  void check_grid() {
    for (size_t a = 0; a < grid_.size(); ++a) {
      if (grid_[a] < 1) {
        refuse(fmt::format("grid axis {} has extent {}; every axis needs at least 1 point", a,
                           grid_[a]));
      }
    }
    semantics_ = options_.semantics;
    if (semantics_.empty()) {
      semantics_.assign(grid_.size(), GridAxis::kParallel);
      if (!grid_.empty()) semantics_.back() = GridAxis::kArbitrary;
    }
    if (semantics_.size() != grid_.size()) {
      refuse(
          fmt::format("{} axis semantics for a grid of rank {}", semantics_.size(), grid_.size()));
    }
    for (size_t a = 1; a < semantics_.size(); ++a) {
      if (semantics_[a - 1] == GridAxis::kArbitrary && semantics_[a] == GridAxis::kParallel) {
        refuse(
            fmt::format("grid axis {} runs in order (arbitrary) but axis {} after it is "
                        "parallel: the reduction axes must come last",
                        a - 1, a));
      }
    }
    for (size_t a = 0; a < semantics_.size(); ++a) {
      if (semantics_[a] == GridAxis::kParallel) parallel_axes_.push_back(a);
    }
  }

  // `allocate`: false for a check that runs no body (no bytes are needed).
  std::shared_ptr<RefState> buffer(std::string name, const AbstractValue& aval,
                                   const BlockSpec& spec, bool allocate) {
    auto state = std::make_shared<RefState>();
    state->name = std::move(name);
    state->aval = aval;
    if (static_cast<int64_t>(spec.block_shape.size()) != aval.shape.rank()) {
      refuse(
          fmt::format("the BlockSpec of {} has {} block dimension(s), the array {} has rank "
                      "{}",
                      state->name, spec.block_shape.size(), aval.to_string(), aval.shape.rank()));
    }
    for (int64_t d = 0; d < aval.shape.rank(); ++d) {
      int64_t b = spec.block_shape[static_cast<size_t>(d)];
      const bool squeezed = b == kSqueezed;
      if (b == -1) b = std::max<int64_t>(aval.shape[d], 1);
      if (squeezed) b = 1;
      if (b < 1) {
        refuse(
            fmt::format("the BlockSpec of {} has block size {} along dimension {}; sizes are "
                        "positive, -1 for the whole dimension, or kSqueezed",
                        state->name, b, d));
      }
      state->block.push_back(b);
      state->squeezed.push_back(squeezed);
    }
    if (!spec.index_map && static_cast<int64_t>(grid_.size()) != aval.shape.rank()) {
      refuse(
          fmt::format("the BlockSpec of {} has no index map, so the grid's coordinates are "
                      "its block indices, but the grid has rank {} and the array {}",
                      state->name, grid_.size(), aval.shape.rank()));
    }
    if (allocate) state->bytes.assign(static_cast<size_t>(aval.size_bytes()), std::byte{0});
    return state;
  }

  // The block of `state` at `point`, checked against the array's blocks.
  Index block_at(const RefState& state, const BlockSpec& spec, const Index& point) {
    Index block;
    try {
      block = spec.index_map ? spec.index_map(point) : point;
    } catch (const Error& error) {
      refuse(fmt::format("the index map of {} at grid point {}: {}", state.name, index_text(point),
                         error.message()));
    }
    if (static_cast<int64_t>(block.size()) != state.rank()) {
      refuse(fmt::format(
          "the index map of {} returned {} at grid point {}: {} indices for an "
          "array of rank {}",
          state.name, index_text(block), index_text(point), block.size(), state.rank()));
    }
    for (int64_t d = 0; d < state.rank(); ++d) {
      size_t u = static_cast<size_t>(d);
      int64_t blocks = std::max<int64_t>(1, cdiv(state.aval.shape[d], state.block[u]));
      if (block[u] < 0 || block[u] >= blocks) {
        refuse(
            fmt::format("the index map of {} returned block {} at grid point {}: index {} "
                        "along dimension {} is outside [0, {}) ({} in blocks of {})",
                        state.name, index_text(block), index_text(point), block[u], d, blocks,
                        state.aval.to_string(), Shape(state.block).to_string()));
      }
    }
    return block;
  }

  void check_race(RefState& state, const Index& block, const Index& point) {
    Index parallel;
    for (size_t a : parallel_axes_) parallel.push_back(point[a]);
    auto [it, first] = state.writers.emplace(block, parallel);
    if (!first && it->second != parallel) {
      refuse(fmt::format("{} block {} is written at grid points that differ in a parallel axis "
                         "({} and now {}, parallel axes {}): a parallel run would race on it",
                         state.name, index_text(block), index_text(it->second),
                         index_text(parallel), fmt::join(parallel_axes_, ", ")),
             "index the output by every parallel axis, or mark the axis arbitrary");
    }
  }

  [[noreturn]] void refuse(const std::string& message, std::string hint = {}) const {
    fail(site_, fmt::format("pallas kernel '{}': {}", options_.name, message), std::move(hint));
  }

  const Index& grid() const { return grid_; }

  // Each point of the grid in row-major order.
  template <typename F>
  void for_each_point(F&& run_point) const {
    Index point(grid_.size(), 0);
    while (true) {
      run_point(point);
      int64_t a = static_cast<int64_t>(grid_.size()) - 1;
      for (; a >= 0; --a) {
        size_t u = static_cast<size_t>(a);
        if (++point[u] < grid_[u]) break;
        point[u] = 0;
      }
      if (a < 0) return;
    }
  }

  Kernel kernel_at(const Index& point, const std::vector<std::shared_ptr<RefState>>& ins,
                   const std::vector<BlockSpec>& in_specs,
                   const std::vector<std::shared_ptr<RefState>>& outs,
                   const std::vector<BlockSpec>& out_specs,
                   const std::vector<std::shared_ptr<RefState>>& scratch,
                   KernelTrace* trace = nullptr) {
    Kernel k;
    k.trace_ = trace;
    k.name_ = options_.name;
    k.point_ = point;
    k.grid_ = grid_;
    k.hidden_axes_ = hidden_axes_;
    for (size_t i = 0; i < ins.size(); ++i) {
      k.in_.push_back(Ref(ins[i], block_at(*ins[i], in_specs[i], point), ins[i]->name));
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      Index block = block_at(*outs[i], out_specs[i], point);
      check_race(*outs[i], block, point);
      k.out_.push_back(Ref(outs[i], std::move(block), outs[i]->name));
    }
    for (const auto& s : scratch) {
      k.scratch_.push_back(Ref(s, Index(static_cast<size_t>(s->rank()), 0), s->name));
    }
    return k;
  }

  const CallOptions& options() const { return options_; }

 private:
  Index grid_;
  const CallOptions& options_;
  size_t hidden_axes_;
  CallSite site_;
  std::vector<GridAxis> semantics_;
  std::vector<size_t> parallel_axes_;
};

// A call's buffers, each checked against its spec.
struct KernelBuffers {
  std::vector<std::shared_ptr<RefState>> ins, outs, scratch;
};

namespace detail {

// Checks the kernel's grid, specs and scratch (what KernelRun::check_grid and buffer check)
// and makes its buffers; `host_bytes`: the outputs and scratch get zeroed host bytes (the
// interpreter's), else none.
KernelBuffers set_up_buffers(const RegisteredKernel& kernel, KernelRun& run, bool host_bytes);

// Runs the body at `point` (interpreting, or tracing a variant); an error it raises is
// raised again naming the kernel and the point.
void call_body(const RegisteredKernel& kernel, const Kernel& k, const Index& point, CallSite site);

}  // namespace detail

}  // namespace kiln::pallas
