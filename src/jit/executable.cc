// Compiling a program into an executable and running it (see executable.h).
#include "jit/executable.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include "base/check.h"
#include "base/float_control.h"
#include "base/trace_events.h"
#include "jit/kernel_error.h"
#include "jit/pipeline.h"
#include "prims/bind.h"
#include "runtime/device_array.h"
#include "transforms/cost_analysis.h"
#include "transforms/eval.h"

namespace kiln::detail {

KernelFn equation_kernel(const Program& program, const Equation& equation) {
  std::vector<AbstractValue> in_types, out_types;
  for (VarId in : equation.inputs) in_types.push_back(program.aval(in));
  for (VarId out : equation.outputs) out_types.push_back(program.aval(out));
  return chosen_kernel(prim_def(equation.prim), in_types, out_types, equation.params);
}

namespace {

// Primitives an executable cannot run as kernels (functions of arrays such as control
// flow): a program with one of them runs equation by equation through the eager
// interpreter instead, after the same passes.
bool needs_interpreter(const Program& program) {
  for (const Equation& equation : program.equations) {
    const PrimDef& prim = prim_def(equation.prim);
    // Identities (optimization_barrier, checkpoint_name) share their operands' storage;
    // control flow runs its sub-programs compiled.
    const bool kernel_step = prim.jit_runs_kernel != nullptr && prim.ref_kernel != nullptr &&
                             prim.jit_runs_kernel(equation.params);
    if (prim.impl != nullptr && !kernel_step && !prim.has_flag(kAliasesOperand) &&
        control_flow_sub_programs(equation).empty()) {
      return true;
    }
  }
  return false;
}

struct InputBuffer {
  std::shared_ptr<Buffer> buffer;
  std::shared_ptr<Completion> ready;
};

}  // namespace

// Everything one run needs, kept alive until the task has run.
struct Executable::RunState {
  std::vector<InputBuffer> inputs;
  std::vector<InputBuffer> constants;
  std::shared_ptr<Buffer> arena;
  std::vector<std::shared_ptr<Buffer>> results;
  ComputePool* pool = nullptr;
  CallSite site;
};

std::shared_ptr<const Executable> Executable::compile(const Program& program,
                                                      const std::vector<bool>& donated,
                                                      const CompileOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto executable = std::make_shared<Executable>();
  IrDumper dumper(options.name);
  executable->program_ = std::make_shared<const Program>(optimize(program, dumper, options.fuse));
  const Program& optimized = *executable->program_;
  executable->donated_ = donated;
  static std::atomic<int64_t> compiled{0};
  executable->trace_id_ = compiled.fetch_add(1, std::memory_order_relaxed) + 1;
  executable->name_ = options.name;
  executable->flush_denormals_ = options.flush_denormals;
  executable->interpreted_ = needs_interpreter(optimized);
  if (!executable->interpreted_) {
    executable->steps_ = plan_steps(optimized, options.fuse);
    executable->plan_ = plan_memory(optimized, executable->steps_, donated);
    for (const StepPlan& step : executable->steps_) {
      bool alias = !step.fused() &&
                   prim_def(optimized.equations[step.equations[0]].prim).has_flag(kAliasesOperand);
      executable->step_names_.push_back(alias ? "" : step_trace_name(optimized, step));
    }
    executable->kernels_.resize(optimized.equations.size());
    for (size_t e = 0; e < optimized.equations.size(); ++e) {
      executable->kernels_[e] = equation_kernel(optimized, optimized.equations[e]);
    }
    const MemoryPlan& plan = executable->plan_;
    auto in_memory = [&plan](VarId var) {
      return plan.storage[static_cast<size_t>(plan.root[static_cast<size_t>(var)])].kind !=
             Storage::Kind::kNone;
    };
    executable->sub_.resize(executable->steps_.size());
    for (size_t s = 0; s < executable->steps_.size(); ++s) {
      const StepPlan& step = executable->steps_[s];
      if (step.fused()) continue;
      const Equation& equation = optimized.equations[step.equations[0]];
      for (const auto& sub : control_flow_sub_programs(equation)) {
        CompileOptions sub_options = options;
        sub_options.name = fmt::format("{}.{}", options.name, prim_name(equation.prim));
        executable->sub_[s].push_back(compile(*sub, {}, sub_options));
        if (executable->sub_[s].back()->interpreted()) executable->interpreted_ = true;
      }
    }
    executable->fused_.resize(executable->steps_.size());
    for (size_t s = 0; s < executable->steps_.size(); ++s) {
      const StepPlan& step = executable->steps_[s];
      if (step.fused()) {
        executable->fused_[s] =
            FusedLoop::build(optimized, step.equations, executable->kernels_, in_memory);
      }
    }
    dumper.write("steps", executable->steps_text());
    dumper.write("memory_plan", executable->plan_.report.to_string() + "\n");
    if (dumper.enabled()) {
      executable->step_timings_path_ = dumper.path_of("step_timings");
      executable->step_timings_ = std::make_unique<StepTimings>();
      executable->step_timings_->total_ns.assign(executable->steps_.size(), 0);
    }
  } else {
    dumper.write("steps",
                 "interpreted: the program holds primitives that run through the "
                 "eager interpreter\n");
  }
  executable->compile_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return executable;
}

Cost Executable::step_cost(size_t s) const {
  const StepPlan& step = steps_.at(s);
  const Program& program = *program_;
  if (!step.fused()) return equation_cost(program, program.equations[step.equations[0]]);
  Cost cost;
  for (size_t e : step.equations) {
    Cost one = equation_cost(program, program.equations[e]);
    cost.flops += one.flops;
    cost.transcendentals += one.transcendentals;
  }
  const FusedLoop& loop = fused_[s];
  for (VarId var : loop.externals)
    cost.bytes_read += static_cast<double>(program.aval(var).size_bytes());
  for (const auto& [tile, var] : loop.exports) {
    cost.bytes_written += static_cast<double>(program.aval(var).size_bytes());
  }
  return cost;
}

std::string Executable::steps_text() const {
  std::vector<std::string> notes(steps_.size());
  for (size_t s = 0; s < steps_.size() && s < fused_.size(); ++s) {
    if (steps_[s].fused() && fused_[s].program) notes[s] = "vector program";
  }
  return steps_to_string(*program_, steps_, notes);
}

std::vector<Array> Executable::run(std::span<const Array> inputs, const TargetDevice& placement,
                                   CallSite site, int64_t& donations_used,
                                   int64_t& donations_unusable) const {
  const Program& program = *program_;
  check_program_inputs(program, inputs, site);
  if (interpreted_) return eval_program(program, inputs, site);
  CpuDevice* device = placement.device;
  const bool committed = placement.committed;

  auto state = std::make_shared<RunState>();
  state->pool = &device->pool();
  state->site = site;
  // Donations first, while the inputs' buffers are held only by their arrays (and by the
  // kernel producing them, which lets go when it finishes).
  for (const ResultBuffer& result : plan_.results) {
    std::shared_ptr<Buffer> buffer;
    if (result.donor >= 0) {
      const auto& donor =
          static_cast<const DeviceArray&>(*inputs[static_cast<size_t>(result.donor)].impl());
      if (donor.buffer().use_count() > 1 && !donor.ready()->ready()) donor.ready()->wait();
      // Reusable only when nobody else holds the buffer: no other array shares it (a
      // reshape of it, say) and no queued kernel still reads it.
      bool passed_twice = false;  // f(w, w) with w donated: the other argument reads it
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (static_cast<int64_t>(i) == result.donor) continue;
        const auto* other = dynamic_cast<const DeviceArray*>(inputs[i].impl());
        passed_twice = passed_twice || (other != nullptr && other->buffer() == donor.buffer());
      }
      if (!passed_twice && donor.buffer().use_count() == 1) {
        buffer = donor.buffer();
        donor.mark_deleted();
        ++donations_used;
      } else {
        ++donations_unusable;
      }
    }
    if (!buffer) buffer = device->allocator().allocate(static_cast<size_t>(result.bytes));
    state->results.push_back(std::move(buffer));
  }
  for (const Array& input : inputs) {
    const auto& array = static_cast<const DeviceArray&>(*input.impl());
    state->inputs.push_back({array.buffer(), array.ready()});
  }
  for (const Array& constant : program.constant_values) {
    const DeviceArray& array = concrete(constant, site, "jit constant");
    state->constants.push_back({array.buffer(), array.ready()});
  }
  if (plan_.arena_bytes > 0) {
    state->arena = device->allocator().allocate(static_cast<size_t>(plan_.arena_bytes));
  }

  auto completion = std::make_shared<Completion>();
  std::vector<Array> outputs;
  for (VarId out : program.outputs) {
    VarId root = plan_.root[static_cast<size_t>(out)];
    const Storage& storage = plan_.storage[static_cast<size_t>(root)];
    const AbstractValue& aval = program.aval(out);
    switch (storage.kind) {
      case Storage::Kind::kInput: {
        const Array& input = inputs[static_cast<size_t>(storage.index)];
        if (input.aval() == aval) {
          outputs.push_back(input);
        } else {  // an alias (reshape) of an input shares its buffer
          const auto& array = static_cast<const DeviceArray&>(*input.impl());
          outputs.emplace_back(std::make_shared<DeviceArray>(aval, array.device(), array.buffer(),
                                                             array.ready(), array.committed()));
        }
        break;
      }
      case Storage::Kind::kConstant: {
        const Array& constant = program.constant_values[static_cast<size_t>(storage.index)];
        const auto& array = static_cast<const DeviceArray&>(*constant.impl());
        outputs.emplace_back(std::make_shared<DeviceArray>(aval, array.device(), array.buffer(),
                                                           array.ready(), false));
        break;
      }
      case Storage::Kind::kResult:
        outputs.emplace_back(std::make_shared<DeviceArray>(
            aval, device, state->results[static_cast<size_t>(storage.index)], completion,
            committed));
        break;
      default:
        KILN_CHECK(false, "jit: result {} has no storage", out);
    }
  }

  auto self = shared_from_this();
  device->enqueue([self, state, completion]() mutable {
    // The buffers are let go before the completion is signalled, so that whoever waits on
    // it sees only the arrays' own references (see the donation check in run()).
    auto finish = [&](std::shared_ptr<const Error> error) {
      state.reset();
      if (error) {
        completion->set_failed(std::move(error));
      } else {
        completion->set_done();
      }
    };
    for (const auto* group : {&state->inputs, &state->constants}) {
      for (const InputBuffer& input : *group) {
        input.ready->wait();
        if (input.ready->error()) return finish(input.ready->error());
      }
    }
    try {
      self->execute(*state);
      finish(nullptr);
    } catch (const Error& error) {
      finish(std::make_shared<Error>(error));
    } catch (const std::exception& error) {
      finish(std::make_shared<Error>(
          fmt::format("jit: a kernel failed while running: {}", error.what()), "", state->site));
    }
  });
  return outputs;
}

void Executable::execute(RunState& state) const {
  // On the device's thread for the run; the pool's chunks take it from there.
  ScopedFloatControl float_mode(with_flush_denormals(float_control(), flush_denormals_));
  Frame frame;
  frame.pool = state.pool;
  for (const InputBuffer& input : state.inputs) {
    frame.inputs.push_back(static_cast<const std::byte*>(input.buffer->data()));
  }
  for (const InputBuffer& constant : state.constants) {
    frame.constants.push_back(static_cast<const std::byte*>(constant.buffer->data()));
  }
  frame.arena = state.arena ? static_cast<std::byte*>(state.arena->data()) : nullptr;
  for (const auto& result : state.results)
    frame.results.push_back(static_cast<std::byte*>(result->data()));
  execute_frame(frame);
}

void Executable::execute_into(std::span<const std::byte* const> inputs,
                              std::span<std::byte* const> outputs, ComputePool& pool,
                              std::byte* arena) const {
  const Program& program = *program_;
  Frame frame;
  frame.pool = &pool;
  frame.inputs.assign(inputs.begin(), inputs.end());
  for (const Array& constant : program.constant_values) {
    const DeviceArray& array = concrete(constant, kUnknownSite, "jit constant");
    wait_ready(array, kUnknownSite);
    frame.constants.push_back(static_cast<const std::byte*>(array.buffer()->data()));
  }
  std::vector<std::byte> own_arena;
  if (arena == nullptr) {
    own_arena.resize(arena_bytes());
    arena = own_arena.data();
  }
  auto base = reinterpret_cast<uintptr_t>(arena);
  frame.arena = reinterpret_cast<std::byte*>((base + 63) / 64 * 64);
  // A result buffer is the caller's memory for the first output that lives in it; any
  // other output (an input, a constant, an alias, a repeat) is copied there afterwards.
  frame.results.assign(plan_.results.size(), nullptr);
  std::vector<std::vector<std::byte>> spare(plan_.results.size());
  std::vector<bool> written_in_place(program.outputs.size(), false);
  for (size_t j = 0; j < program.outputs.size(); ++j) {
    VarId out = program.outputs[j];
    const Storage& storage =
        plan_.storage[static_cast<size_t>(plan_.root[static_cast<size_t>(out)])];
    if (storage.kind != Storage::Kind::kResult ||
        program.aval(out) != program.aval(plan_.root[static_cast<size_t>(out)]))
      continue;
    auto k = static_cast<size_t>(storage.index);
    if (frame.results[k] != nullptr) continue;
    frame.results[k] = outputs[j];
    written_in_place[j] = true;
  }
  for (size_t k = 0; k < frame.results.size(); ++k) {
    if (frame.results[k] != nullptr) continue;
    spare[k].resize(static_cast<size_t>(plan_.results[k].bytes));
    frame.results[k] = spare[k].data();
  }
  execute_frame(frame);
  for (size_t j = 0; j < program.outputs.size(); ++j) {
    if (written_in_place[j]) continue;
    VarId out = program.outputs[j];
    auto bytes = static_cast<size_t>(program.aval(out).size_bytes());
    if (bytes > 0) std::memcpy(outputs[j], frame.data_of(*this, out), bytes);
  }
}

std::byte* Executable::Frame::data_of(const Executable& executable, VarId var) const {
  const MemoryPlan& plan = executable.plan_;
  const Storage& storage = plan.storage[static_cast<size_t>(plan.root[static_cast<size_t>(var)])];
  auto index = static_cast<size_t>(storage.index);
  switch (storage.kind) {
    case Storage::Kind::kInput:
      return const_cast<std::byte*>(inputs[index]);
    case Storage::Kind::kConstant:
      return const_cast<std::byte*>(constants[index]);
    case Storage::Kind::kArena:
      return arena + storage.index;
    case Storage::Kind::kResult:
      return results[index];
    case Storage::Kind::kNone:
      break;
  }
  KILN_CHECK(false, "jit: value {} has no storage", var);
  return nullptr;
}

void Executable::execute_frame(const Frame& frame) const {
  StepScratch scratch;
  // Read once per run: a recording that starts midway sees this run's next call.
  const bool tracing = trace::recording();
  const bool timing = step_timings_ != nullptr;
  std::vector<int64_t> step_ns(timing ? steps_.size() : 0, 0);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const bool traced = tracing && !step_names_[s].empty();
    if (!traced && !timing) {
      run_step(s, frame, scratch);
      continue;
    }
    const int64_t start_ns = trace::now_ns();
    run_step(s, frame, scratch);
    const int64_t duration_ns = trace::now_ns() - start_ns;
    if (timing) step_ns[s] = duration_ns;
    if (traced) {
      trace::Event event;
      event.track = trace::thread_track();
      event.name = step_names_[s];
      event.category = "kernel";
      event.args = {{"executable", static_cast<double>(trace_id_)},
                    {"step", static_cast<double>(s)}};
      event.start_ns = start_ns;
      event.duration_ns = duration_ns;
      trace::record(std::move(event));
    }
  }
  if (timing) record_step_timings(step_ns);
}

void Executable::record_step_timings(const std::vector<int64_t>& step_ns) const {
  std::lock_guard lock(step_timings_->mutex);
  StepTimings& timings = *step_timings_;
  ++timings.calls;
  int64_t total = 0;
  for (size_t s = 0; s < step_ns.size(); ++s) {
    timings.total_ns[s] += step_ns[s];
    total += timings.total_ns[s];
  }
  std::string text = fmt::format(
      "# {}: the time of each step summed over {} call{} (KILN_DUMP_IR); the steps are those "
      "of the .steps.txt file\n# step   total ms    mean ms   share  name\n",
      name_, timings.calls, timings.calls == 1 ? "" : "s");
  for (size_t s = 0; s < step_ns.size(); ++s) {
    double ms = static_cast<double>(timings.total_ns[s]) * 1e-6;
    text += fmt::format(
        "{:6} {:10.3f} {:10.3f} {:6.1f}%  {}\n", s, ms, ms / static_cast<double>(timings.calls),
        total > 0 ? 100.0 * static_cast<double>(timings.total_ns[s]) / static_cast<double>(total)
                  : 0.0,
        step_names_[s].empty() ? "(alias: no work)" : step_names_[s]);
  }
  // A failure to write loses a debugging aid, not the run: the program's results stand.
  std::ofstream(step_timings_path_) << text;
}

void Executable::run_step(size_t s, const Frame& frame, StepScratch& scratch) const {
  const Program& program = *program_;
  auto data_of = [&](VarId var) { return frame.data_of(*this, var); };
  const StepPlan& step = steps_[s];
  if (step.fused()) {
    const FusedLoop& loop = fused_[s];
    scratch.external_data.clear();
    for (VarId var : loop.externals) scratch.external_data.push_back(data_of(var));
    scratch.export_data.clear();
    for (const auto& [tile, var] : loop.exports) scratch.export_data.push_back(data_of(var));
    loop.run(scratch.external_data, scratch.export_data, *frame.pool);
    return;
  }
  const size_t e = step.equations[0];
  const Equation& equation = program.equations[e];
  const PrimDef& prim = prim_def(equation.prim);
  if (prim.has_flag(kAliasesOperand)) return;  // shares its operand's storage
  std::vector<const std::byte*> operands;
  for (VarId in : equation.inputs) operands.push_back(data_of(in));
  std::vector<std::byte*> results;
  for (VarId out : equation.outputs) results.push_back(data_of(out));
  if (!sub_[s].empty()) {
    run_control_flow(equation, sub_[s], operands, results, *frame.pool);
    return;
  }
  scratch.kernel_inputs.clear();
  for (size_t i = 0; i < operands.size(); ++i) {
    scratch.kernel_inputs.push_back({operands[i], &program.aval(equation.inputs[i])});
  }
  scratch.kernel_outputs.clear();
  for (size_t i = 0; i < results.size(); ++i) {
    scratch.kernel_outputs.push_back({results[i], &program.aval(equation.outputs[i])});
  }
  try {
    kernels_[e](
        KernelCall{scratch.kernel_inputs, scratch.kernel_outputs, equation.params, *frame.pool});
  } catch (const Error& error) {
    throw primitive_failed(equation.prim, equation.site, error);
  }
}

}  // namespace kiln::detail
