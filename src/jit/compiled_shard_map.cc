// The compiled shard_map run (see compiled_shard_map.h).
#include "jit/compiled_shard_map.h"

#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "prims/ids/spmd.h"
#include "runtime/cpu_device.h"
#include "runtime/device_array.h"
#include "sharding/shard_map_run.h"
#include "transforms/trace.h"

namespace kiln::detail {
namespace {

bool is_collective(const Equation& equation) {
  return prim_def(equation.prim).family == Family::kSpmd;
}

// Segment `members` of `body` as a program of its own: its inputs are the body variables
// it reads before defining, its outputs those in `exported`.
ShardMapSegment build_segment(const Program& body, const std::vector<size_t>& members,
                              const std::vector<bool>& exported, int64_t index) {
  ShardMapSegment segment;
  Program program;
  std::vector<VarId> local(body.num_vars(), -1);
  auto local_of = [&](VarId var) {
    auto& slot = local[static_cast<size_t>(var)];
    if (slot < 0) {
      slot = program.add_var(body.aval(var));
      program.inputs.push_back(slot);
      segment.inputs.push_back(var);
    }
    return slot;
  };
  for (size_t e : members) {
    const Equation& equation = body.equations[e];
    Equation copy = equation;
    for (VarId& in : copy.inputs) in = local_of(in);
    for (VarId& out : copy.outputs) {
      VarId body_var = out;
      out = program.add_var(body.aval(body_var));
      local[static_cast<size_t>(body_var)] = out;
      if (exported[static_cast<size_t>(body_var)]) {
        program.outputs.push_back(out);
        segment.outputs.push_back(body_var);
      }
    }
    program.equations.push_back(std::move(copy));
  }
  CompileOptions options;
  options.name = fmt::format("shard_map segment {}", index);
  segment.executable =
      Executable::compile(program, std::vector<bool>(program.inputs.size(), false), options);
  return segment;
}

using Plan = std::vector<ShardMapSegment>;

// Plans by body program. A body lives as long as the programs that hold it (a jit cache
// entry, say); an entry whose body is gone is dropped when the next plan is added.
std::shared_ptr<const Plan> cached_plan(const std::shared_ptr<const Program>& body) {
  struct Entry {
    std::weak_ptr<const Program> body;
    std::shared_ptr<const Plan> plan;
  };
  static std::mutex mutex;
  static std::map<const Program*, Entry> plans;
  {
    std::lock_guard lock(mutex);
    auto found = plans.find(body.get());
    if (found != plans.end() && found->second.body.lock() == body) return found->second.plan;
  }
  auto plan = std::make_shared<const Plan>(plan_shard_map_segments(*body));
  std::lock_guard lock(mutex);
  std::erase_if(plans, [](const auto& entry) { return entry.second.body.expired(); });
  plans[body.get()] = Entry{body, plan};
  return plan;
}

}  // namespace

std::vector<ShardMapSegment> plan_shard_map_segments(const Program& body) {
  std::vector<int64_t> depth(body.num_vars(), 0);
  std::vector<int64_t> equation_depth(body.equations.size(), 0);
  int64_t deepest = 0;
  for (size_t e = 0; e < body.equations.size(); ++e) {
    const Equation& equation = body.equations[e];
    int64_t d = 0;
    for (VarId in : equation.inputs) d = std::max(d, depth[static_cast<size_t>(in)]);
    if (is_collective(equation) && !equation.inputs.empty()) ++d;
    for (VarId out : equation.outputs) depth[static_cast<size_t>(out)] = d;
    equation_depth[e] = d;
    deepest = std::max(deepest, d);
  }
  // Which segment defines each variable (-1: an input, a constant or a collective's
  // result), and which of them are read outside it.
  std::vector<int64_t> defined_in(body.num_vars(), -1);
  for (size_t e = 0; e < body.equations.size(); ++e) {
    if (is_collective(body.equations[e])) continue;
    for (VarId out : body.equations[e].outputs)
      defined_in[static_cast<size_t>(out)] = equation_depth[e];
  }
  std::vector<bool> exported(body.num_vars(), false);
  for (size_t e = 0; e < body.equations.size(); ++e) {
    const Equation& equation = body.equations[e];
    int64_t reader = is_collective(equation) ? -1 : equation_depth[e];
    for (VarId in : equation.inputs) {
      if (defined_in[static_cast<size_t>(in)] != reader) exported[static_cast<size_t>(in)] = true;
    }
  }
  for (VarId out : body.outputs) exported[static_cast<size_t>(out)] = true;

  std::vector<ShardMapSegment> segments;
  for (int64_t k = 0; k <= deepest; ++k) {
    std::vector<size_t> collectives, members;
    for (size_t e = 0; e < body.equations.size(); ++e) {
      if (equation_depth[e] != k) continue;
      (is_collective(body.equations[e]) ? collectives : members).push_back(e);
    }
    ShardMapSegment segment;
    if (!members.empty()) segment = build_segment(body, members, exported, k);
    segment.collectives_before = std::move(collectives);
    segments.push_back(std::move(segment));
  }
  return segments;
}

std::vector<std::shared_ptr<const Executable>> shard_map_segment_executables(
    const Program& program) {
  std::vector<std::shared_ptr<const Executable>> executables;
  for (const Equation& equation : program.equations) {
    if (equation.prim != prim::shard_map) continue;
    for (const ShardMapSegment& segment :
         *cached_plan(std::get<ShardMapParams>(equation.params).body.program)) {
      if (segment.executable) executables.push_back(segment.executable);
    }
  }
  return executables;
}

std::vector<Array> compiled_shard_map_impl(std::span<const Array> inputs, const Params& params,
                                           CallSite site) {
  const auto& p = std::get<ShardMapParams>(params);
  std::shared_ptr<const Plan> plan = cached_plan(p.body.program);
  spmd::LockstepRun run = spmd::begin_lockstep(inputs, p, site);
  const Program& body = *p.body.program;
  std::vector<Array> segment_inputs;
  for (const ShardMapSegment& segment : *plan) {
    for (size_t e : segment.collectives_before) {
      ScopeOverride scope(body.equations[e].scope);
      spmd::run_collective_equation(run, body.equations[e]);
    }
    if (!segment.executable) continue;
    for (size_t d = 0; d < run.env.size(); ++d) {
      std::vector<Array>& env = run.env[d];
      segment_inputs.clear();
      for (VarId var : segment.inputs) segment_inputs.push_back(env[static_cast<size_t>(var)]);
      TargetDevice placement{static_cast<CpuDevice*>(run.mesh.devices()[d]), true, std::nullopt};
      int64_t donations_used = 0, donations_unusable = 0;
      std::vector<Array> results = segment.executable->run(segment_inputs, placement, site,
                                                           donations_used, donations_unusable);
      for (size_t r = 0; r < results.size(); ++r) {
        env[static_cast<size_t>(segment.outputs[r])] = std::move(results[r]);
      }
    }
  }
  return spmd::finish_lockstep(run, inputs, site);
}

}  // namespace kiln::detail

namespace kiln {

void register_compiled_spmd(PrimTable& table) {
  table[prim::shard_map].impl = detail::compiled_shard_map_impl;
}

}  // namespace kiln
