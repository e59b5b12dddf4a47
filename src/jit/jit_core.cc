// The untyped half of kiln::jit (include/kiln/jit.h): signatures, the cache of
// executables, recompilation reasons, statistics.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "jit/executable.h"
#include "kiln/jit.h"
#include "prims/bind.h"
#include "runtime/device_array.h"
#include "runtime/sharded_array.h"
#include "sharding/spmd_partitioner.h"

namespace kiln {
namespace detail {
namespace {

bool log_recompiles() {
  const char* value = std::getenv("KILN_LOG_RECOMPILES");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

bool same_arg(const ArgSignature& a, const ArgSignature& b) {
  if (a.is_static != b.is_static || a.type_name != b.type_name) return false;
  if (a.is_static) {
    return a.static_value.hash == b.static_value.hash &&
           a.static_value.equals(a.static_value.value.get(), b.static_value.value.get());
  }
  return a.structure == b.structure && a.leaves == b.leaves;
}

bool same_signature(const CallSignature& a, const CallSignature& b) {
  if (a.args.size() != b.args.size()) return false;
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (!same_arg(a.args[i], b.args[i])) return false;
  }
  return true;
}

std::string leaves_text(const std::vector<AbstractValue>& leaves) {
  std::string text;
  for (const AbstractValue& leaf : leaves) text += (text.empty() ? "" : ", ") + leaf.to_string();
  return text;
}

// Why `now` needed a new executable, compared with the signature compiled last: the first
// argument that differs, and how.
std::string difference(const CallSignature& before, const CallSignature& now) {
  for (size_t i = 0; i < now.args.size() && i < before.args.size(); ++i) {
    const ArgSignature& a = before.args[i];
    const ArgSignature& b = now.args[i];
    if (same_arg(a, b)) continue;
    if (a.is_static && b.is_static && a.type_name == b.type_name) {
      return fmt::format("argument {} (static) changed from {} to {}", i, a.static_value.text,
                         b.static_value.text);
    }
    if (a.is_static != b.is_static || a.type_name != b.type_name) {
      return fmt::format("argument {} changed type ({} to {})", i, a.type_name, b.type_name);
    }
    if (a.structure != b.structure) {
      return fmt::format("argument {} changed structure from {} to {}", i, a.structure,
                         b.structure);
    }
    for (size_t leaf = 0; leaf < a.leaves.size() && leaf < b.leaves.size(); ++leaf) {
      if (a.leaves[leaf] == b.leaves[leaf]) continue;
      if (a.leaves.size() == 1) {
        return fmt::format("argument {} changed from {} to {}", i, a.leaves[leaf].to_string(),
                           b.leaves[leaf].to_string());
      }
      return fmt::format("argument {} leaf {} changed from {} to {}", i, leaf,
                         a.leaves[leaf].to_string(), b.leaves[leaf].to_string());
    }
    return fmt::format("argument {} changed from ({}) to ({})", i, leaves_text(a.leaves),
                       leaves_text(b.leaves));
  }
  return fmt::format("the number of arguments changed from {} to {}", before.args.size(),
                     now.args.size());
}

// "argument 2" or "argument 0 leaf 3": which argument flat leaf `index` belongs to (static
// arguments have no leaves).
std::string leaf_name(const CallSignature& signature, size_t index) {
  for (size_t i = 0; i < signature.args.size(); ++i) {
    const ArgSignature& arg = signature.args[i];
    if (arg.is_static) continue;
    if (index < arg.leaves.size()) {
      return arg.leaves.size() == 1 ? fmt::format("argument {}", i)
                                    : fmt::format("argument {} leaf {}", i, index);
    }
    index -= arg.leaves.size();
  }
  return fmt::format("leaf {}", index);
}

// A compiled program runs on one device's queue, so its committed arguments must agree on
// the device, as an eager op's operands must (uncommitted ones follow them).
// The device the call runs on (see target_of()); arguments committed to two devices are an
// error naming both by argument and leaf.
// Sharded arguments (on a mesh) do not take part: only a program that runs equation by
// equation reads them, and there they reach shard_map, which places its operands itself.
// A program compiled into one device's kernels cannot read one.
TargetDevice placement_of(const std::string& name, const CallSignature& signature,
                          std::span<const Array> leaves, bool interpreted, CallSite site) {
  std::vector<Array> on_one_device;
  std::vector<size_t> index;  // of each in `leaves`
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (as_sharded(leaves[i]) == nullptr) {
      on_one_device.push_back(leaves[i]);
      index.push_back(i);
    } else if (!interpreted) {
      fail(site,
           fmt::format("jit '{}': {} ({}) is sharded over several devices; a compiled program "
                       "takes sharded arguments only into shard_map",
                       name, leaf_name(signature, i), leaves[i].aval().to_string()),
           "pass it to kiln::shard_map inside the function, or device_put it to one device "
           "first");
    }
  }
  TargetDevice placement = target_of(on_one_device, site, "jit");
  if (placement.conflict) {
    size_t a = index[placement.conflict->first], b = index[placement.conflict->second];
    const DeviceArray& first = concrete(leaves[a], site, "jit");
    const DeviceArray& other = concrete(leaves[b], site, "jit");
    fail(site,
         fmt::format("jit '{}': arguments are committed to different devices: {} ({}) on "
                     "{}, {} ({}) on {}",
                     name, leaf_name(signature, a), first.aval().to_string(),
                     first.device()->to_string(), leaf_name(signature, b), other.aval().to_string(),
                     other.device()->to_string()),
         fmt::format("move them to one device first, e.g. kiln::device_put(x, "
                     "kiln::device({}))",
                     first.device()->id()));
  }
  return placement;
}

// The program of `fn` partitioned by `options`' shardings: traced on whole arrays, then
// traced again as the one shard_map that runs it on blocks (sharding/spmd_partitioner.h).
TracedProgram trace_partitioned(const JitOptions& options, const FlatFunction& fn,
                                const std::vector<AbstractValue>& types, CallSite site) {
  const Mesh& mesh = options.in_shardings.front().mesh();
  std::vector<PartitionSpec> in_specs, out_specs;
  auto same_mesh = [&](const NamedSharding& sharding, const std::string& what) {
    if (!(sharding.mesh() == mesh)) {
      fail(site,
           fmt::format("jit '{}': {} is on {}, in_shardings[0] on {}; one partitioned program "
                       "runs on one mesh",
                       options.name, what, sharding.mesh().to_string(), mesh.to_string()),
           "build every NamedSharding from the same kiln::Mesh");
    }
  };
  for (size_t i = 0; i < options.in_shardings.size(); ++i) {
    same_mesh(options.in_shardings[i], fmt::format("in_shardings[{}]", i));
    in_specs.push_back(options.in_shardings[i].spec());
  }
  for (size_t j = 0; j < options.out_shardings.size(); ++j) {
    same_mesh(options.out_shardings[j], fmt::format("out_shardings[{}]", j));
    out_specs.push_back(options.out_shardings[j].spec());
  }
  // The whole program sees whole arrays, whatever split the arguments arrive with.
  std::vector<AbstractValue> whole = types;
  for (AbstractValue& type : whole) type.sharding = ShardingSpec{};
  TracedProgram traced = trace_flat(fn, whole, site);
  FlatFunction partitioned = spmd::partitioned_function(traced.program, mesh, std::move(in_specs),
                                                        std::move(out_specs), options.name, site);
  return trace_flat(partitioned, whole, site);
}

}  // namespace

JitCore::JitCore(JitOptions options) : options_(std::move(options)) {}

bool JitCore::tracing() {
  return &current_interpreter() != &eager_interpreter();
}

void JitCore::check_argnums(const CallSignature& signature, CallSite site) const {
  const auto count = static_cast<int>(signature.args.size());
  auto check_range = [&](int argnum, const char* what) {
    if (argnum < 0 || argnum >= count) {
      fail(site,
           fmt::format("jit '{}': {} names argument {}, but the function is called with {} "
                       "argument(s)",
                       options_.name, what, argnum, count),
           "argument numbers count from 0");
    }
  };
  for (int argnum : options_.static_argnums) {
    check_range(argnum, "static_argnums");
    const ArgSignature& arg = signature.args[static_cast<size_t>(argnum)];
    if (!arg.is_static) {
      fail(site,
           fmt::format("jit '{}': static_argnums names argument {}, which is an Array or pytree "
                       "({}); Arrays are not hashable, so they cannot be static",
                       options_.name, argnum, leaves_text(arg.leaves)),
           "drop it from static_argnums to trace it, or pass a hashable value (an int, a "
           "string, a struct with std::hash) instead");
    }
  }
  for (int argnum : options_.donate_argnums) {
    check_range(argnum, "donate_argnums");
    const ArgSignature& arg = signature.args[static_cast<size_t>(argnum)];
    if (arg.is_static) {
      fail(site,
           fmt::format("jit '{}': donate_argnums names argument {}, a static value ({}); only "
                       "Arrays and pytrees have buffers to donate",
                       options_.name, argnum, arg.static_value.text));
    }
    for (int other : options_.static_argnums) {
      if (other == argnum) {
        fail(site, fmt::format("jit '{}': argument {} is both static and donated", options_.name,
                               argnum));
      }
    }
  }
}

std::vector<bool> JitCore::donated_leaves(const CallSignature& signature) const {
  std::vector<bool> donated;
  for (size_t i = 0; i < signature.args.size(); ++i) {
    const ArgSignature& arg = signature.args[i];
    if (arg.is_static) continue;
    bool donate = false;
    for (int argnum : options_.donate_argnums) donate = donate || argnum == static_cast<int>(i);
    donated.insert(donated.end(), arg.leaves.size(), donate);
  }
  return donated;
}

std::shared_ptr<const JitCore::Entry> JitCore::find(const CallSignature& signature) {
  std::lock_guard lock(mutex_);
  ++stats_.calls;
  // Newest first: a loop alternating two signatures finds the latest quickly.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (same_signature((*it)->signature, signature)) {
      ++stats_.cache_hits;
      return *it;
    }
  }
  return nullptr;
}

std::shared_ptr<const JitCore::Entry> JitCore::compile(CallSignature signature,
                                                       const FlatFunction& fn,
                                                       std::shared_ptr<void> result_template,
                                                       CallSite site) {
  auto start = std::chrono::steady_clock::now();
  std::vector<AbstractValue> types;
  for (const ArgSignature& arg : signature.args) {
    types.insert(types.end(), arg.leaves.begin(), arg.leaves.end());
  }
  if (options_.in_shardings.empty() && !options_.out_shardings.empty()) {
    fail(site, fmt::format("jit '{}': out_shardings without in_shardings", options_.name),
         "give in_shardings too (NamedShardings with every dimension whole replicate an "
         "argument)");
  }
  TracedProgram traced = options_.in_shardings.empty()
                             ? trace_flat(fn, types, site)
                             : trace_partitioned(options_, fn, types, site);
  CompileOptions options;
  options.name = options_.name;
  options.flush_denormals = options_.flush_denormals;
  std::shared_ptr<const Executable> executable =
      Executable::compile(*traced.program, donated_leaves(signature), options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  auto entry = std::make_shared<Entry>();
  entry->signature = std::move(signature);
  entry->executable = std::move(executable);
  entry->result_template = std::move(result_template);

  std::lock_guard lock(mutex_);
  std::string reason =
      entries_.empty() ? "first call" : difference(entries_.back()->signature, entry->signature);
  ++stats_.compiles;
  stats_.compile_seconds += seconds;
  stats_.last_compile_seconds = seconds;
  stats_.compile_reasons.push_back(reason);
  if (log_recompiles()) {
    std::fprintf(stderr, "kiln: jit '%s' compiled (compilation %lld, %.1f ms): %s\n",
                 options_.name.c_str(), static_cast<long long>(stats_.compiles), seconds * 1e3,
                 reason.c_str());
  }
  entries_.push_back(entry);
  return entry;
}

std::vector<Array> JitCore::run(const Entry& entry, std::span<const Array> leaves, CallSite site) {
  TargetDevice placement =
      placement_of(options_.name, entry.signature, leaves, entry.executable->interpreted(), site);
  int64_t used = 0, unusable = 0;
  std::vector<Array> outputs = entry.executable->run(leaves, placement, site, used, unusable);
  if (used != 0 || unusable != 0) {
    std::lock_guard lock(mutex_);
    stats_.donations_used += used;
    stats_.donations_unusable += unusable;
  }
  return outputs;
}

JitStats JitCore::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace detail

TracedProgram Compiled::program() const {
  return TracedProgram{executable_->program_ptr()};
}

std::string Compiled::steps_text() const {
  return executable_->steps_text();
}

const MemoryPlanReport& Compiled::memory_plan() const {
  return executable_->memory_plan().report;
}

double Compiled::compile_seconds() const {
  return executable_->compile_seconds();
}

}  // namespace kiln
