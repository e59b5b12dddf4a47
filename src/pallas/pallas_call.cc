// pallas::call in interpret mode (kiln/pallas.h): every buffer lives on the host for the
// whole call; at each grid point the body's Refs copy their block out of it (load) and back
// (store), element runs along the last dimension at a time, the parts past the array's edge
// left out. Every index the specs produce is checked before the body runs.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/ops.h"
#include "kiln/pallas.h"
#include "pallas/compiled_kernel.h"
#include "pallas/kernel_call.h"
#include "pallas/kernel_run.h"
#include "prims/bind.h"
#include "prims/ids/custom.h"

namespace kiln::pallas {

Array Ref::load(double fill) const {
  const RefState& s = *state_;
  if (s.trace != nullptr) return s.trace->load(s, block_, fill);
  AbstractValue type(s.visible_block(), s.aval.dtype);
  HostArray block = full(Shape(s.block), fill, s.aval.dtype).to_host();
  const size_t size = s.element_size();
  s.for_each_run(block_, [&](size_t at, size_t into, size_t count) {
    std::memcpy(block.bytes.data() + into * size, s.bytes.data() + at * size, count * size);
  });
  return from_host_bytes(block.bytes.data(), type, nullptr, CallSite());
}

void Ref::store(const Array& value) const {
  RefState& s = *state_;
  if (!value.defined() || value.shape() != s.visible_block()) {
    fail(kUnknownSite,
         fmt::format("{} stores {} into a block of shape {}", name_,
                     value.defined() ? value.aval().to_string() : "an empty Array",
                     s.visible_block().to_string()),
         "a store writes the whole block (ragged edges are left out for you)");
  }
  if (s.trace != nullptr) return s.trace->store(s, value, name_);
  HostArray host = astype(value, s.aval.dtype).to_host();
  const size_t size = s.element_size();
  s.for_each_run(block_, [&](size_t at, size_t from, size_t count) {
    std::memcpy(s.bytes.data() + at * size, host.bytes.data() + from * size, count * size);
  });
}

AbstractValue Ref::block_type() const {
  return AbstractValue(state_->visible_block(), state_->aval.dtype);
}

Dims Ref::valid_extent() const {
  Index extent = state_->visible_extent(block_);
  if (state_->trace != nullptr) state_->trace->ask_valid_extent(*state_, extent);
  return Dims(extent.begin(), extent.end());
}

int64_t Kernel::program_id(int64_t axis) const {
  const auto rank = static_cast<int64_t>(grid_.size() - hidden_axes_);
  if (axis < 0 || axis >= rank) {
    fail(kUnknownSite, fmt::format("program_id({}) of a grid of rank {}", axis, rank));
  }
  const int64_t id = point_[hidden_axes_ + static_cast<size_t>(axis)];
  if (trace_ != nullptr) trace_->ask_program_id(static_cast<size_t>(axis), id);
  return id;
}

int64_t Kernel::num_programs(int64_t axis) const {
  const auto rank = static_cast<int64_t>(grid_.size() - hidden_axes_);
  if (axis < 0 || axis >= rank) {
    fail(kUnknownSite, fmt::format("num_programs({}) of a grid of rank {}", axis, rank));
  }
  return grid_[hidden_axes_ + static_cast<size_t>(axis)];
}

namespace {

const Ref& ref_at(const std::vector<Ref>& refs, size_t i, const char* what) {
  if (i >= refs.size()) {
    fail(kUnknownSite, fmt::format("{}({}) of {} {}", what, i, refs.size(),
                                   refs.size() == 1 ? "buffer" : "buffers"));
  }
  return refs[i];
}

}  // namespace

const Ref& Kernel::in(size_t i) const {
  return ref_at(in_, i, "in");
}
const Ref& Kernel::out(size_t i) const {
  return ref_at(out_, i, "out");
}
const Ref& Kernel::scratch(size_t i) const {
  return ref_at(scratch_, i, "scratch");
}

namespace {

// An environment variable that takes one of two words (true for the first), or nothing: read
// once; any other value is an error naming the variable, what it sets and `unset_hint`.
std::optional<bool> either_word(const char* variable, std::string_view yes, std::string_view no,
                                std::string_view what, std::string_view unset_hint) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  if (std::string_view(value) == yes) return true;
  if (std::string_view(value) == no) return false;
  fail(kUnknownSite, fmt::format("{}='{}' is not {}: '{}' or '{}'", variable, value, what, yes, no),
       std::string(unset_hint));
}

// KILN_PALLAS: "interpret" or "compiled" runs every call so, whatever its options say (a
// kernel's bug hunted in interpret mode without editing it); unset: each call's own.
std::optional<bool> interpret_setting() {
  static const std::optional<bool> setting =
      either_word("KILN_PALLAS", "interpret", "compiled", "a kernel mode",
                  "unset KILN_PALLAS for each call's CallOptions::interpret");
  return setting;
}

std::atomic<int> forced_mode{-1};  // detail::ForcedMode: -1 none, 0 compiled, 1 interpret

// KILN_PALLAS_DOUBLE_BUFFER: "on" or "off" sets every compiled call's double buffering.
std::optional<bool> double_buffer_setting() {
  static const std::optional<bool> setting =
      either_word("KILN_PALLAS_DOUBLE_BUFFER", "on", "off", "a double-buffering setting",
                  "unset KILN_PALLAS_DOUBLE_BUFFER for each call's CallOptions::double_buffer");
  return setting;
}

std::atomic<int> forced_double_buffer{-1};  // detail::ForcedDoubleBuffer: -1 none, 0 off, 1 on

}  // namespace

bool detail::interpreted(const CallOptions& options) {
  const std::optional<bool> setting = interpret_setting();  // a bad value is an error even so
  const int forced = forced_mode.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  return setting.value_or(options.interpret);
}

bool detail::double_buffered(const CallOptions& options) {
  const std::optional<bool> setting = double_buffer_setting();
  const int forced = forced_double_buffer.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  return setting.value_or(options.double_buffer);
}

namespace detail {

void call_body(const RegisteredKernel& kernel, const Kernel& k, const Index& point, CallSite site) {
  try {
    kernel.body(k);
  } catch (const Error& error) {
    // Tracing, the body cannot read a block's values on the host: say what to do instead.
    const bool read_traced = error.message().find("traced value") != std::string::npos;
    fail(site,
         fmt::format("pallas kernel '{}' at grid point {}: {}", kernel.options.name,
                     index_text(point), error.message()),
         read_traced ? "a compiled body computes on its blocks with kiln ops and cannot read "
                       "their values on the host: compute with them, or set "
                       "CallOptions::interpret"
                     : error.hint());
  }
}

KernelBuffers set_up_buffers(const RegisteredKernel& kernel, KernelRun& run, bool host_bytes) {
  if (!kernel.body) run.refuse("the kernel body is an empty function");
  run.check_grid();
  if (kernel.in_specs.size() != kernel.in_types.size()) {
    run.refuse(
        fmt::format("{} in_specs for {} inputs", kernel.in_specs.size(), kernel.in_types.size()));
  }
  if (kernel.out_specs.size() != kernel.out_types.size()) {
    run.refuse(fmt::format("{} out_specs for {} outputs", kernel.out_specs.size(),
                           kernel.out_types.size()));
  }
  KernelBuffers buffers;
  for (size_t i = 0; i < kernel.in_types.size(); ++i) {
    buffers.ins.push_back(
        run.buffer(fmt::format("input {}", i), kernel.in_types[i], kernel.in_specs[i], false));
  }
  for (size_t i = 0; i < kernel.out_types.size(); ++i) {
    buffers.outs.push_back(run.buffer(fmt::format("output {}", i), kernel.out_types[i],
                                      kernel.out_specs[i], host_bytes));
    buffers.outs.back()->is_output = true;
  }
  int64_t scratch_bytes = 0;
  for (size_t i = 0; i < kernel.options.scratch.size(); ++i) {
    const AbstractValue& type = kernel.options.scratch[i];
    scratch_bytes += type.size_bytes();
    Dims whole = type.shape.dims();
    // One block, the whole buffer, at every point (kernel_at places it; no map is called).
    buffers.scratch.push_back(
        run.buffer(fmt::format("scratch {}", i), type,
                   BlockSpec(whole, [rank = whole.size()](const Index&) { return Index(rank, 0); }),
                   host_bytes));
    buffers.scratch.back()->is_scratch = true;
  }
  if (scratch_bytes > kernel.options.scratch_limit_bytes) {
    run.refuse(fmt::format("scratch of {} bytes, more than the limit of {} bytes", scratch_bytes,
                           kernel.options.scratch_limit_bytes),
               "use smaller blocks, or raise CallOptions::scratch_limit_bytes");
  }
  return buffers;
}

namespace {

// Runs the kernel: with `inputs`, the body at every grid point; without (dry_run), every
// check the run makes, with no buffer allocated and no body called. `semantics`, when
// given, receives the grid axes' resolved semantics.
std::vector<Array> run_kernel(const RegisteredKernel& kernel, std::span<const Array> inputs,
                              CallSite site, bool dry_run,
                              std::vector<GridAxis>* semantics = nullptr) {
  // The compiled path reads the inputs' and writes the results' device memory: only the
  // interpreter keeps host copies.
  const bool interpret = !dry_run && interpreted(kernel.options);
  if (!dry_run && !interpret) return run_compiled(kernel, inputs, site);
  KernelRun run(kernel.grid, kernel.options, kernel.hidden_axes, site);
  KernelBuffers buffers = set_up_buffers(kernel, run, interpret);
  const auto& [ins, outs, scratch] = buffers;
  if (interpret) {
    for (size_t i = 0; i < ins.size(); ++i) ins[i]->bytes = inputs[i].to_host().bytes;
  }
  if (semantics) *semantics = run.semantics();
  const auto hidden = static_cast<std::ptrdiff_t>(kernel.hidden_axes);
  Index example;  // the hidden (batch) coordinates of the point before
  run.for_each_point([&](const Index& point) {
    Kernel k = run.kernel_at(point, ins, kernel.in_specs, outs, kernel.out_specs, scratch);
    if (dry_run) return;
    // Each example of a batched call starts with zeroed scratch, as its own call would.
    Index this_example(point.begin(), point.begin() + hidden);
    if (hidden > 0 && !example.empty() && this_example != example) {
      for (const auto& buffer : scratch)
        std::fill(buffer->bytes.begin(), buffer->bytes.end(), std::byte{0});
    }
    example = std::move(this_example);
    call_body(kernel, k, point, site);
  });
  std::vector<Array> results;
  if (dry_run) return results;
  for (const auto& out : outs) {
    results.push_back(from_host_bytes(out->bytes.data(), out->aval, nullptr, site));
  }
  return results;
}

}  // namespace

namespace {

// What a Forced* guard stores: -1 for none, else the setting.
int forced_value(std::optional<bool> setting) {
  return setting ? static_cast<int>(*setting) : -1;
}

}  // namespace

ForcedMode::ForcedMode(std::optional<bool> interpret)
    : previous_(forced_mode.exchange(forced_value(interpret))) {}
ForcedMode::~ForcedMode() {
  forced_mode.store(previous_);
}

ForcedDoubleBuffer::ForcedDoubleBuffer(std::optional<bool> on)
    : previous_(forced_double_buffer.exchange(forced_value(on))) {}
ForcedDoubleBuffer::~ForcedDoubleBuffer() {
  forced_double_buffer.store(previous_);
}

void check_kernel(RegisteredKernel& kernel, CallSite site) {
  run_kernel(kernel, {}, site, /*dry_run=*/true, &kernel.options.semantics);
}

std::vector<Array> run_call(const RegisteredKernel& kernel, std::span<const Array> inputs,
                            CallSite site) {
  return run_kernel(kernel, inputs, site, /*dry_run=*/false);
}

}  // namespace detail

std::vector<Array> call(const KernelBody& body, std::vector<AbstractValue> out_types, Index grid,
                        std::vector<BlockSpec> in_specs, std::vector<BlockSpec> out_specs,
                        const std::vector<Array>& inputs, const CallOptions& options,
                        CallSite site) {
  detail::RegisteredKernel kernel{.body = body,
                                  .in_types = {},
                                  .out_types = std::move(out_types),
                                  .grid = std::move(grid),
                                  .in_specs = std::move(in_specs),
                                  .out_specs = std::move(out_specs),
                                  .options = options,
                                  .hidden_axes = 0};
  if (options.name.empty() || options.name.find_first_of("\"\n") != std::string::npos) {
    fail(site,
         fmt::format("pallas kernel name '{}': a name is printed quoted in program text",
                     options.name),
         "give CallOptions::name a non-empty name without quotes or line breaks");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      fail(site, fmt::format("pallas kernel '{}': input {} is an empty Array", options.name, i));
    }
    kernel.in_types.push_back(inputs[i].aval());
  }
  // Eagerly the run makes every check before the first body runs; a traced call is
  // checked now, where the user wrote it, rather than when the program runs.
  if (&current_interpreter() == &eager_interpreter()) {
    return detail::run_call(kernel, inputs, site);
  }
  detail::check_kernel(kernel, site);
  const std::string name = kernel.options.name;
  int64_t id = detail::register_kernel(std::move(kernel), site);
  return bind(prim::pallas_call, inputs, KernelCallParams{name, id}, site);
}

}  // namespace kiln::pallas
