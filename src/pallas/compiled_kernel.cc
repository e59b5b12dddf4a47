// pallas::call's compiled mode (compiled_kernel.h): variants traced on the calling thread,
// one pass over the grid; then the grid's parallel points over the compute pool.
#include "pallas/compiled_kernel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/compute_pool.h"
#include "base/trace_events.h"
#include "jit/executable.h"
#include "kiln/ops.h"
#include "kiln/tracing.h"
#include "pallas/block_copier.h"
#include "runtime/cpu_device.h"
#include "runtime/device_array.h"

namespace kiln::pallas {

// ----- tracing ------------------------------------------------------------------------------

KernelTrace::KernelTrace(std::span<const Array> blocks)
    : blocks_(blocks.begin(), blocks.end()),
      current_(blocks.size()),
      loaded_(blocks.size(), false) {}

Array KernelTrace::load(const RefState& state, const Index& block, double fill) {
  const size_t slot = state.slot;
  if (!current_[slot].defined()) {
    current_[slot] = blocks_[slot];
    loaded_[slot] = true;
  }
  const Array& value = current_[slot];
  if (state.is_scratch) return value;
  // A ragged block: the elements past the array's edge read as `fill`, whatever the buffer
  // holds there (a store earlier in the body, or at an earlier point, wrote them too).
  const Index extent = state.visible_extent(block);
  const Dims visible = state.visible_block().dims();
  ask_valid_extent(state, extent);
  Array inside;
  for (size_t d = 0; d < extent.size(); ++d) {
    if (extent[d] == visible[d]) continue;
    Array along =
        iota(Shape(visible), DType::i32, static_cast<int64_t>(d)) < static_cast<double>(extent[d]);
    inside = inside.defined() ? bitwise_and(inside, along) : along;
  }
  if (!inside.defined()) return value;
  return where(inside, value, full(Shape(visible), fill, value.dtype()));
}

void KernelTrace::store(const RefState& state, const Array& value, const std::string& name) {
  if (!state.is_output && !state.is_scratch) {
    fail(kUnknownSite,
         fmt::format("{} is stored into; a compiled kernel's inputs are read-only", name),
         "store into an output or a scratch buffer");
  }
  const size_t slot = state.slot;  // Ref::store checked the value's shape
  current_[slot] = astype(value, state.aval.dtype);
  if (std::find(stored_.begin(), stored_.end(), slot) == stored_.end()) stored_.push_back(slot);
}

void KernelTrace::ask_program_id(size_t axis, int64_t answer) {
  Query query{Query::Kind::kProgramId, axis, Index{answer}};
  if (std::find(queries_.begin(), queries_.end(), query) == queries_.end()) {
    queries_.push_back(std::move(query));
  }
}

void KernelTrace::ask_valid_extent(const RefState& state, const Index& extent) {
  Query query{Query::Kind::kValidExtent, state.slot, extent};
  if (std::find(queries_.begin(), queries_.end(), query) == queries_.end()) {
    queries_.push_back(std::move(query));
  }
}

std::vector<Array> KernelTrace::results() const {
  std::vector<Array> results;
  for (size_t slot : stored_) results.push_back(current_[slot]);
  return results;
}

// ----- the plan: the variants, and which one each grid point runs --------------------------

namespace detail {

struct Variant {
  std::vector<KernelTrace::Query> queries;
  std::vector<bool> loaded;                                    // per slot
  std::vector<size_t> stored;                                  // the program's outputs, by slot
  std::vector<bool> writes;                                    // per slot: among `stored`
  std::shared_ptr<const kiln::detail::Executable> executable;  // null: stores nothing
};

struct CompiledPlan {
  std::vector<Variant> variants;
  std::vector<uint32_t> variant_of_point;  // row-major over the grid
};

}  // namespace detail

namespace {

using detail::CompiledPlan;
using detail::Variant;

// The call's buffers in slot order, and the block each slot sees at a point.
struct Slots {
  std::vector<RefState*> states;
  std::vector<const BlockSpec*> specs;  // null for scratch

  Index block_at(KernelRun& run, size_t slot, const Index& point) const {
    if (specs[slot] == nullptr) return Index(static_cast<size_t>(states[slot]->rank()), 0);
    return run.block_at(*states[slot], *specs[slot], point);
  }
};

// The answer a point gives to a query a variant's trace asked.
Index answer_at(KernelRun& run, const Slots& slots, const KernelTrace::Query& query,
                const Index& point, size_t hidden_axes) {
  if (query.kind == KernelTrace::Query::Kind::kProgramId) {
    return Index{point[hidden_axes + query.which]};
  }
  return slots.states[query.which]->visible_extent(slots.block_at(run, query.which, point));
}

// A program's identity for sharing one compilation: its text, and the values of its
// constants that the text does not show (arrays; scalars print inline).
std::string program_key(const TracedProgram& traced) {
  std::string key = traced.to_string();
  for (const Array& constant : traced.program->constant_values) {
    if (constant.rank() == 0) continue;
    HostArray host = constant.to_host();
    key.append(reinterpret_cast<const char*>(host.bytes.data()), host.bytes.size());
  }
  return key;
}

// Variants whose traces asked the same questions (the same program_id axes and blocks'
// extents, in order), by their answers: a point is matched by answering each group's
// questions once and looking the answers up.
struct VariantGroup {
  std::vector<KernelTrace::Query> questions;  // the answers left empty
  std::map<std::vector<Index>, uint32_t> variant_by_answers;
};

// Walks the grid once on this thread: each point gets the variant whose questions it
// answers as that variant's trace did (the first group's, in the order they were made), or
// a new trace. Every spec and index is checked on the way, as the interpreter checks them.
std::shared_ptr<const CompiledPlan> make_plan(const detail::RegisteredKernel& kernel,
                                              KernelRun& run, const Slots& slots,
                                              const std::vector<std::shared_ptr<RefState>>& ins,
                                              const std::vector<std::shared_ptr<RefState>>& outs,
                                              const std::vector<std::shared_ptr<RefState>>& scratch,
                                              CallSite site) {
  auto plan = std::make_shared<CompiledPlan>();
  std::vector<AbstractValue> block_types;
  for (const RefState* state : slots.states) {
    block_types.emplace_back(state->visible_block(), state->aval.dtype);
  }
  std::map<std::string, std::shared_ptr<const kiln::detail::Executable>> compiled;
  std::vector<VariantGroup> groups;
  auto answers_at = [&](const std::vector<KernelTrace::Query>& questions, const Index& point) {
    std::vector<Index> answers;
    for (const KernelTrace::Query& question : questions) {
      answers.push_back(answer_at(run, slots, question, point, kernel.hidden_axes));
    }
    return answers;
  };
  run.for_each_point([&](const Index& point) {
    for (const VariantGroup& group : groups) {
      auto found = group.variant_by_answers.find(answers_at(group.questions, point));
      if (found == group.variant_by_answers.end()) continue;
      // The checks the interpreter makes at every point (index maps, races).
      run.kernel_at(point, ins, kernel.in_specs, outs, kernel.out_specs, scratch);
      plan->variant_of_point.push_back(found->second);
      return;
    }
    Variant variant;
    kiln::detail::FlatFunction body = [&](std::span<const Array> blocks) {
      KernelTrace trace(blocks);
      for (RefState* state : slots.states) state->trace = &trace;
      struct Untrace {  // the buffers forget the trace however the body ends
        const Slots& slots;
        ~Untrace() {
          for (RefState* state : slots.states) state->trace = nullptr;
        }
      } untrace{slots};
      Kernel k =
          run.kernel_at(point, ins, kernel.in_specs, outs, kernel.out_specs, scratch, &trace);
      detail::call_body(kernel, k, point, site);
      variant.queries = trace.queries();
      variant.loaded = trace.loaded();
      variant.stored = trace.stored();
      variant.writes.assign(slots.states.size(), false);
      for (size_t slot : variant.stored) variant.writes[slot] = true;
      return trace.results();
    };
    TracedProgram traced = kiln::detail::trace_flat(body, block_types, site);
    if (!variant.stored.empty()) {
      auto [it, added] = compiled.try_emplace(program_key(traced));
      if (added) {
        kiln::detail::CompileOptions options;
        options.name = fmt::format("pallas_{}", kernel.options.name);
        it->second = kiln::detail::Executable::compile(
            *traced.program, std::vector<bool>(traced.program->inputs.size(), false), options);
      }
      variant.executable = it->second;
    }
    const auto index = static_cast<uint32_t>(plan->variants.size());
    std::vector<KernelTrace::Query> questions = variant.queries;
    std::vector<Index> answers;
    for (KernelTrace::Query& question : questions) answers.push_back(std::move(question.answer));
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const VariantGroup& g) { return g.questions == questions; });
    if (group == groups.end()) group = groups.insert(groups.end(), VariantGroup{questions, {}});
    group->variant_by_answers.emplace(std::move(answers), index);
    plan->variant_of_point.push_back(index);
    plan->variants.push_back(std::move(variant));
  });
  return plan;
}

// Where a block lies in its array when it is one run of memory: every dimension before the
// first one the block spans more than one element of is a single index, every one after it
// spans the whole array. Such a block, not ragged, is read and written in place.
bool contiguous_blocking(const RefState& state) {
  int64_t d = 0;
  while (d < state.rank() && state.block[static_cast<size_t>(d)] == 1) ++d;
  for (int64_t e = d + 1; e < state.rank(); ++e) {
    if (state.block[static_cast<size_t>(e)] != state.aval.shape[e]) return false;
  }
  return true;
}

// One worker's buffers: a block per slot, where it sits, and a second buffer per slot for
// the program to write a stored block into (the two are swapped after the run). Double
// buffered, each input has a third, into which the block copier copies the block the next
// point reads while this one computes (swapped in when the next point places it). Kept
// from unit to unit (allocating them per unit faulted their pages in again every time).
class BlockBuffers {
 public:
  // The buffers come from the device's allocator, so its memory statistics count them.
  // `track` and `kernel_name`: where and how the copies are drawn in a trace.
  BlockBuffers(const Slots& slots, CachingAllocator& allocator, bool double_buffer,
               trace::Track track, const std::string& kernel_name)
      : slots_(slots),
        track_(track),
        copy_name_(fmt::format("{} copy", kernel_name)),
        copy_ahead_name_(fmt::format("{} copy ahead", kernel_name)) {
    for (const RefState* state : slots.states) {
      auto bytes =
          static_cast<size_t>(state->visible_block().num_elements()) * state->element_size();
      // Not cleared: a block is gathered (zeros past a ragged edge) before the program reads
      // it, scratch is zeroed when a unit begins, and a stored block is written whole.
      for (auto* buffers : {&current_, &next_}) buffers->push_back(allocator.allocate(bytes));
      in_place_.push_back(!state->is_scratch && contiguous_blocking(*state));
      const bool input = !state->is_scratch && !state->is_output;
      ahead_.push_back(double_buffer && input ? allocator.allocate(bytes) : nullptr);
    }
    at_.resize(slots.states.size());
    ahead_at_.resize(slots.states.size());
    dirty_.assign(slots.states.size(), false);
  }
  // A copy still running writes into these buffers.
  ~BlockBuffers() { settle(); }
  BlockBuffers(const BlockBuffers&) = delete;
  BlockBuffers& operator=(const BlockBuffers&) = delete;

  // A unit starts with no block in its buffers and zeroed scratch.
  void begin_unit() {
    settle();
    for (size_t slot = 0; slot < current_.size(); ++slot) {
      at_[slot].clear();
      ahead_at_[slot].clear();
      if (slots_.states[slot]->is_scratch) zero(*current_[slot]);
    }
  }

  bool double_buffered(size_t slot) const { return ahead_[slot] != nullptr; }

  // Whether `block` of input `slot` would have to be copied when a point reads it: it is
  // not in the buffer already and cannot be read in place.
  bool needs_copy(size_t slot, const Index& block) const {
    if (at_[slot] == block) return false;
    return !(in_place_[slot] && whole_block_offset(*slots_.states[slot], block));
  }

  // Hands the copies of `blocks` (slot, block), which the next point reads, to the block
  // copier; the point that places them takes them from there.
  void copy_ahead(const std::vector<std::pair<size_t, Index>>& blocks) {
    if (blocks.empty()) return;
    settle();  // the buffers the last copy wrote may be the ones this one writes
    std::vector<std::byte*> buffers;
    for (const auto& [slot, block] : blocks) {
      ahead_at_[slot] = block;
      buffers.push_back(bytes(ahead_[slot]));
    }
    pending_ = detail::copy_ahead(
        [this, blocks, buffers = std::move(buffers)] {
          for (size_t i = 0; i < blocks.size(); ++i) {
            gather_into(blocks[i].first, blocks[i].second, buffers[i]);
          }
        },
        copy_ahead_name_);
  }

  struct Place {
    const std::byte* read = nullptr;  // the program's input
    std::byte* write = nullptr;       // its output, when it stores the block
    bool in_place = false;            // `write` is the array's own memory
  };

  // Puts `block` of `slot` where the program reads and writes it. A block of one run of
  // memory, whole, is read in place, and written in place when the body does not read it
  // (a store writes the whole block); any other is gathered into the buffer, elements past
  // the edge zeroed, an output's block there before written back first.
  Place place(size_t slot, const Index& block, bool read, bool written) {
    RefState& state = *slots_.states[slot];
    Place place;
    if (state.is_scratch) {
      place.read = bytes(current_[slot]);
      place.write = bytes(next_[slot]);
      return place;
    }
    const std::optional<size_t> offset =
        in_place_[slot] ? whole_block_offset(state, block) : std::nullopt;
    if (offset && !state.is_output) {
      place.read = state.data + *offset;
      return place;
    }
    if (offset && !read) {
      if (dirty_[slot]) write_back(slot);
      at_[slot].clear();
      place.write = state.data + *offset;
      place.in_place = true;
      return place;
    }
    if (at_[slot] != block) {
      if (dirty_[slot]) write_back(slot);
      at_[slot] = block;
      if (read && !ahead_at_[slot].empty() && ahead_at_[slot] == block) {
        settle();
        std::swap(current_[slot], ahead_[slot]);
        ahead_at_[slot].clear();
      } else if (read) {
        trace::Span span("pallas", copy_name_, track_);
        gather_into(slot, block, bytes(current_[slot]));
      }
    }
    place.read = bytes(current_[slot]);
    if (written) place.write = bytes(next_[slot]);
    return place;
  }

  // The program wrote `slot`'s new block where place() said.
  void stored(size_t slot, const Place& place) {
    if (place.in_place) return;
    std::swap(current_[slot], next_[slot]);
    if (slots_.states[slot]->is_output) dirty_[slot] = true;
  }

  void finish() {
    settle();
    for (size_t slot = 0; slot < current_.size(); ++slot) {
      if (dirty_[slot]) write_back(slot);
    }
  }

 private:
  // The byte offset of `block` in its array, if it lies wholly inside it.
  static std::optional<size_t> whole_block_offset(const RefState& state, const Index& block) {
    Dims strides = state.aval.shape.strides();
    int64_t offset = 0;
    for (int64_t d = 0; d < state.rank(); ++d) {
      const auto u = static_cast<size_t>(d);
      if (state.valid(block, d) != state.block[u]) return std::nullopt;
      offset += block[u] * state.block[u] * strides[u];
    }
    return static_cast<size_t>(offset) * state.element_size();
  }

  static std::byte* bytes(const std::shared_ptr<Buffer>& buffer) {
    return static_cast<std::byte*>(buffer->data());
  }
  static void zero(const Buffer& buffer) {
    if (buffer.bytes() > 0) std::memset(buffer.data(), 0, buffer.bytes());
  }

  // Waits for the copy ahead, if one is out (or runs it here if the copier has not begun).
  void settle() {
    if (pending_) pending_->finish(track_);
    pending_.reset();
  }

  // Reads `block` of `slot` into `buffer`, the elements past the array's edge zeroed.
  void gather_into(size_t slot, const Index& block, std::byte* buffer) const {
    const RefState& state = *slots_.states[slot];
    const size_t size = state.element_size();
    if (!whole_block_offset(state, block)) {
      std::memset(buffer, 0, static_cast<size_t>(state.visible_block().num_elements()) * size);
    }
    state.for_each_run(block, [&](size_t at, size_t into, size_t count) {
      std::memcpy(buffer + into * size, state.data + at * size, count * size);
    });
  }

  void write_back(size_t slot) {
    RefState& state = *slots_.states[slot];
    const size_t size = state.element_size();
    const std::byte* buffer = bytes(current_[slot]);
    state.for_each_run(at_[slot], [&](size_t at, size_t from, size_t count) {
      std::memcpy(state.data + at * size, buffer + from * size, count * size);
    });
    dirty_[slot] = false;
  }

  const Slots& slots_;
  trace::Track track_;
  std::string copy_name_;
  std::string copy_ahead_name_;
  std::vector<std::shared_ptr<Buffer>> current_;
  std::vector<std::shared_ptr<Buffer>> next_;
  std::vector<std::shared_ptr<Buffer>> ahead_;  // inputs, double buffered; else null
  std::vector<bool> in_place_;
  std::vector<Index> at_;        // empty: no block in the buffer
  std::vector<Index> ahead_at_;  // the block copied (or being copied) into ahead_
  std::shared_ptr<detail::BlockCopy> pending_;
  std::vector<bool> dirty_;
};

// What a worker keeps between the units it runs.
struct Worker {
  Worker(const Slots& slots, CachingAllocator& allocator, size_t arena_bytes, bool double_buffer,
         int id, const std::string& kernel_name)
      : track(trace::kernel_worker_track(id)),
        buffers(slots, allocator, double_buffer, track, kernel_name),
        arena(allocator.allocate(arena_bytes)) {}
  trace::Track track;
  ComputePool serial{1};  // the block programs run on this worker alone
  BlockBuffers buffers;
  std::shared_ptr<Buffer> arena;  // the largest variant's
  std::vector<const std::byte*> inputs;
  std::vector<std::byte*> outputs;
  std::vector<BlockBuffers::Place> places;
  std::vector<std::pair<size_t, Index>> ahead;  // the next point's blocks to copy
};

// Workers for the units, made as needed (at most one per pool thread is ever in use).
class Workers {
 public:
  Workers(const Slots& slots, CachingAllocator& allocator, size_t arena_bytes, bool double_buffer,
          std::string kernel_name)
      : slots_(slots),
        allocator_(allocator),
        arena_bytes_(arena_bytes),
        double_buffer_(double_buffer),
        kernel_name_(std::move(kernel_name)) {}
  std::unique_ptr<Worker> take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) {
      return std::make_unique<Worker>(slots_, allocator_, arena_bytes_, double_buffer_, made_++,
                                      kernel_name_);
    }
    std::unique_ptr<Worker> worker = std::move(free_.back());
    free_.pop_back();
    return worker;
  }
  void give_back(std::unique_ptr<Worker> worker) {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(worker));
  }

 private:
  const Slots& slots_;
  CachingAllocator& allocator_;
  size_t arena_bytes_;
  bool double_buffer_;
  std::string kernel_name_;
  int made_ = 0;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Worker>> free_;
};

}  // namespace

namespace {

// The call's buffers in slot order (inputs, outputs, scratch), each told its slot.
Slots slots_of(const detail::RegisteredKernel& kernel, const KernelBuffers& buffers) {
  Slots slots;
  for (size_t i = 0; i < buffers.ins.size(); ++i) {
    slots.states.push_back(buffers.ins[i].get());
    slots.specs.push_back(&kernel.in_specs[i]);
  }
  for (size_t i = 0; i < buffers.outs.size(); ++i) {
    slots.states.push_back(buffers.outs[i].get());
    slots.specs.push_back(&kernel.out_specs[i]);
  }
  for (const auto& buffer : buffers.scratch) {
    slots.states.push_back(buffer.get());
    slots.specs.push_back(nullptr);
  }
  for (size_t slot = 0; slot < slots.states.size(); ++slot) slots.states[slot]->slot = slot;
  return slots;
}

}  // namespace

namespace detail {

std::shared_ptr<const CompiledPlan> compiled_plan(const RegisteredKernel& kernel, CallSite site) {
  auto make = [&] {
    KernelRun run(kernel.grid, kernel.options, kernel.hidden_axes, site);
    KernelBuffers buffers = set_up_buffers(kernel, run, /*host_bytes=*/false);
    Slots slots = slots_of(kernel, buffers);
    return make_plan(kernel, run, slots, buffers.ins, buffers.outs, buffers.scratch, site);
  };
  if (!kernel.compiled) return make();
  std::lock_guard lock(kernel.compiled->mutex);
  if (!kernel.compiled->plan) kernel.compiled->plan = make();
  return kernel.compiled->plan;
}

namespace {

// The grid point after `point` in row-major order.
Index next_point(const Index& grid, Index point) {
  for (size_t a = grid.size(); a-- > 0;) {
    if (++point[a] < grid[a]) break;
    point[a] = 0;
  }
  return point;
}

// Double buffering: hands the copies of the input blocks that grid point `flat` (`point`)
// will read and does not find in place to the block copier.
void copy_ahead(const CompiledPlan& plan, KernelRun& run, const Slots& slots, int64_t flat,
                const Index& point, BlockBuffers& buffers,
                std::vector<std::pair<size_t, Index>>& blocks) {
  const Variant& next = plan.variants[plan.variant_of_point[static_cast<size_t>(flat)]];
  blocks.clear();
  if (!next.executable) return;
  for (size_t slot = 0; slot < slots.states.size(); ++slot) {
    if (!next.loaded[slot] || !buffers.double_buffered(slot)) continue;
    Index block = slots.block_at(run, slot, point);
    if (buffers.needs_copy(slot, block)) blocks.emplace_back(slot, std::move(block));
  }
  buffers.copy_ahead(blocks);
}

}  // namespace

void run_compiled_into(const RegisteredKernel& kernel, std::span<const std::byte* const> inputs,
                       std::span<std::byte* const> outputs, ComputePool& pool, CallSite site) {
  std::shared_ptr<const CompiledPlan> plan = compiled_plan(kernel, site);
  KernelRun run(kernel.grid, kernel.options, kernel.hidden_axes, site);
  KernelBuffers call_buffers = set_up_buffers(kernel, run, /*host_bytes=*/false);
  for (size_t i = 0; i < call_buffers.ins.size(); ++i) {
    call_buffers.ins[i]->data = const_cast<std::byte*>(inputs[i]);  // only ever read
  }
  for (size_t j = 0; j < call_buffers.outs.size(); ++j) {
    call_buffers.outs[j]->data = outputs[j];
    const auto bytes = static_cast<size_t>(call_buffers.outs[j]->aval.size_bytes());
    if (bytes > 0) std::memset(outputs[j], 0, bytes);
  }
  Slots slots = slots_of(kernel, call_buffers);
  // Block buffers from the default device's allocator, so that its statistics count them
  // (a kernel step does not know its device; kiln runs one CPU device's memory in practice).
  CachingAllocator& allocator = cpu_device(default_device()).allocator();

  // The leading parallel axes make the units of work; each runs the in-order axes after
  // them in order. A unit's points are consecutive in row-major order.
  const Index& grid = run.grid();
  const std::vector<GridAxis>& semantics = run.semantics();
  int64_t units = 1, points_per_unit = 1;
  for (size_t a = 0; a < grid.size(); ++a) {
    (semantics[a] == GridAxis::kParallel ? units : points_per_unit) *= grid[a];
  }
  size_t arena_bytes = 0;
  for (const Variant& variant : plan->variants) {
    if (variant.executable) arena_bytes = std::max(arena_bytes, variant.executable->arena_bytes());
  }
  const bool double_buffer = double_buffered(kernel.options);
  Workers workers(slots, allocator, arena_bytes, double_buffer, kernel.options.name);
  const std::string compute_name = fmt::format("{} compute", kernel.options.name);
  pool.parallel_for(units, [&](int64_t unit) {
    std::unique_ptr<Worker> worker = workers.take();
    BlockBuffers& buffers = worker->buffers;
    buffers.begin_unit();
    Index point(grid.size(), 0);
    int64_t rest = unit * points_per_unit;
    for (size_t a = grid.size(); a-- > 0;) {
      point[a] = rest % grid[a];
      rest /= grid[a];
    }
    for (int64_t p = 0; p < points_per_unit; ++p) {
      const int64_t flat = unit * points_per_unit + p;
      const Variant& variant = plan->variants[plan->variant_of_point[static_cast<size_t>(flat)]];
      if (variant.executable) {
        worker->inputs.assign(slots.states.size(), nullptr);
        worker->places.assign(slots.states.size(), {});
        for (size_t slot = 0; slot < slots.states.size(); ++slot) {
          const bool read = variant.loaded[slot];
          const bool written = variant.writes[slot];
          if (!read && !written) continue;
          worker->places[slot] =
              buffers.place(slot, slots.block_at(run, slot, point), read, written);
          worker->inputs[slot] = worker->places[slot].read;
        }
        worker->outputs.clear();
        for (size_t slot : variant.stored) worker->outputs.push_back(worker->places[slot].write);
        if (double_buffer && p + 1 < points_per_unit) {
          copy_ahead(*plan, run, slots, flat + 1, next_point(grid, point), buffers, worker->ahead);
        }
        try {
          trace::Span span("pallas", compute_name, worker->track);
          variant.executable->execute_into(worker->inputs, worker->outputs, worker->serial,
                                           static_cast<std::byte*>(worker->arena->data()));
        } catch (const Error& error) {
          fail(site,
               fmt::format("pallas kernel '{}' at grid point {}: {}", kernel.options.name,
                           index_text(point), error.message()),
               error.hint());
        }
        for (size_t slot : variant.stored) buffers.stored(slot, worker->places[slot]);
      }
      point = next_point(grid, point);
    }
    buffers.finish();
    workers.give_back(std::move(worker));
  });
}

std::vector<Array> run_compiled(const RegisteredKernel& kernel, std::span<const Array> inputs,
                                CallSite site) {
  // The inputs' memory, read in place; the results' new buffers on the inputs' device.
  TargetDevice target = target_of(inputs, site, "pallas_call");
  CpuDevice& device = target.device != nullptr ? *target.device : cpu_device(default_device());
  std::vector<const std::byte*> input_data;
  for (const Array& input : inputs) {
    const DeviceArray& array = concrete(input, site, "pallas_call");
    wait_ready(array, site);
    input_data.push_back(static_cast<const std::byte*>(array.buffer()->data()));
  }
  std::vector<std::shared_ptr<Buffer>> results;
  std::vector<std::byte*> output_data;
  for (const AbstractValue& type : kernel.out_types) {
    results.push_back(device.allocator().allocate(static_cast<size_t>(type.size_bytes())));
    output_data.push_back(static_cast<std::byte*>(results.back()->data()));
  }
  run_compiled_into(kernel, input_data, output_data, device.pool(), site);
  std::vector<Array> arrays;
  for (size_t j = 0; j < results.size(); ++j) {
    arrays.push_back(
        Array(std::make_shared<DeviceArray>(kernel.out_types[j], &device, std::move(results[j]),
                                            Completion::done(), target.committed)));
  }
  return arrays;
}

}  // namespace detail

}  // namespace kiln::pallas
