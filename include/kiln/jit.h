// kiln::jit: compiles a function once per argument signature and reuses the compiled
// executable while the signature stays the same.
//
//   auto step = kiln::jit(kiln::value_and_grad(loss));
//   auto [l, g] = step(w, x);           // traces, optimises, plans memory, runs
//   auto [l2, g2] = step(w2, x2);       // same shapes and dtypes: runs the cached executable
//
// A signature is the pytree structure and the type (dtype, shape) of every Array leaf,
// plus the value of every static argument (any argument that is not an Array or pytree;
// its type must be hashable). When a call's signature has not been seen, jit compiles
// again and records why: which argument changed, from what to what. Set
// KILN_LOG_RECOMPILES=1 to have every compilation printed, or read JitStats.
//
// Inside another transformation (grad, vmap, make_program, an enclosing jit) the function
// is traced through as if jit were not there, so jit composes with everything.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "kiln/cost.h"
#include "kiln/transforms.h"

namespace kiln {

struct JitOptions {
  // Arguments that are static (their value is part of the signature). Arguments that are
  // not Arrays or pytrees are static whether listed or not; listing one checks that it is
  // (an Array listed here is an error: Arrays are not hashable values).
  std::vector<int> static_argnums;
  // Arguments whose buffers the call may reuse for its results. A donated Array is
  // deleted by the call (using it afterwards is an error), unless another reference to its
  // buffer keeps it alive, in which case the call allocates instead and counts it in
  // JitStats::donations_unusable.
  std::vector<int> donate_argnums;
  // Shown in logs and in KILN_DUMP_IR file names.
  std::string name = "jit";
  // Run the compiled program with subnormal floats flushed to zero (inputs read as 0,
  // results written as 0) instead of IEEE gradual underflow: faster wherever values
  // underflow (x86 spends ~100 cycles on each operation that meets a subnormal), and as
  // deterministic. Eager ops and the reference kernels always run IEEE.
  bool flush_denormals = false;

  // Chainable setters, for code built with -Wextra (which warns about designated
  // initializers that skip fields): jit(f, JitOptions().named("step").donating({0})).
  JitOptions static_args(std::vector<int> argnums) const {
    JitOptions copy = *this;
    copy.static_argnums = std::move(argnums);
    return copy;
  }
  JitOptions donating(std::vector<int> argnums) const {
    JitOptions copy = *this;
    copy.donate_argnums = std::move(argnums);
    return copy;
  }
  JitOptions named(std::string text) const {
    JitOptions copy = *this;
    copy.name = std::move(text);
    return copy;
  }
  JitOptions flushing_denormals(bool flush = true) const {
    JitOptions copy = *this;
    copy.flush_denormals = flush;
    return copy;
  }
};

struct JitStats {
  int64_t calls = 0;
  int64_t compiles = 0;             // the first compilation and every recompilation
  int64_t cache_hits = 0;           // calls that reused an executable
  double compile_seconds = 0;       // tracing + passes + planning, all compilations
  double last_compile_seconds = 0;  // the most recent compilation
  int64_t donations_used = 0;
  int64_t donations_unusable = 0;
  // One line per compilation: "first call" or which argument changed, from what to what.
  std::vector<std::string> compile_reasons;
};

// What the memory planner decided for one executable. Bytes are for the whole run.
struct MemoryPlanReport {
  int64_t argument_bytes = 0;        // the inputs, owned by the caller
  int64_t constant_bytes = 0;        // closed-over arrays and folded constants
  int64_t output_bytes = 0;          // results, allocated per call (less what donation reuses)
  int64_t temp_bytes = 0;            // one arena for every intermediate, reused by liveness
  int64_t temp_bytes_unplanned = 0;  // the intermediates' total size without reuse
  int64_t peak_bytes = 0;            // arguments + constants + outputs + temps
  int64_t num_buffers = 0;           // intermediate values that live in the arena
  int64_t in_place = 0;              // results written over an operand that died there
  int64_t donated_outputs = 0;       // results planned into a donated argument's buffer
  std::string to_string() const;
};

namespace detail {
class Executable;
}  // namespace detail

// One compiled executable: its optimised program and its memory plan.
class Compiled {
 public:
  explicit Compiled(std::shared_ptr<const detail::Executable> executable)
      : executable_(std::move(executable)) {}
  // The program after every pass, before fusion (as cost_analysis sees it).
  TracedProgram program() const;
  // The steps the executable runs, fused groups shown nested.
  std::string steps_text() const;
  const MemoryPlanReport& memory_plan() const;
  double compile_seconds() const;

 private:
  std::shared_ptr<const detail::Executable> executable_;
};

namespace detail {

// A static argument's value, type-erased: its text (for recompilation reasons), its hash
// and an equality test against a value of the same type.
struct StaticValue {
  std::string type_name;
  std::string text;
  size_t hash = 0;
  std::shared_ptr<const void> value;
  bool (*equals)(const void* a, const void* b) = nullptr;
};

struct ArgSignature {
  bool is_static = false;
  std::string type_name;  // the C++ type, so different pytree types never share an entry
  std::string structure;  // pytree structure
  std::vector<AbstractValue> leaves;
  StaticValue static_value;
};

struct CallSignature {
  std::vector<ArgSignature> args;
};

template <typename T>
concept HashableStatic = requires(const T& value) {
  { std::hash<T>{}(value) } -> std::convertible_to<size_t>;
  { value == value } -> std::convertible_to<bool>;
};

template <typename T>
std::string static_text(const T& value) {
  if constexpr (requires(std::ostream & out) { out << value; }) {
    std::ostringstream out;
    out << value;
    return out.str();
  } else {
    std::ostringstream out;
    out << "<" << typeid(T).name() << " with hash " << std::hash<T>{}(value) << ">";
    return out.str();
  }
}

template <typename T>
ArgSignature signature_of_arg(const T& value) {
  ArgSignature arg;
  arg.type_name = typeid(T).name();
  if constexpr (kIsPytree<T>) {
    arg.structure = PytreeAdapter<T>::structure(value);
    for (const Array& leaf : flatten(value)) arg.leaves.push_back(leaf.aval());
  } else {
    static_assert(HashableStatic<T>,
                  "kiln::jit: an argument that is not an Array or pytree is static, so its value "
                  "is part of the cache key and must be hashable: give its type a std::hash "
                  "specialisation and operator==, or pass it as an Array");
    arg.is_static = true;
    arg.static_value.type_name = arg.type_name;
    arg.static_value.text = static_text(value);
    arg.static_value.hash = std::hash<T>{}(value);
    arg.static_value.value = std::make_shared<const T>(value);
    arg.static_value.equals = [](const void* a, const void* b) {
      return static_cast<bool>(*static_cast<const T*>(a) == *static_cast<const T*>(b));
    };
  }
  return arg;
}

// The untyped part of jit: the cache of executables, compilation, running, statistics.
class JitCore {
 public:
  explicit JitCore(JitOptions options);

  struct Entry {
    CallSignature signature;
    std::shared_ptr<const Executable> executable;
    std::shared_ptr<void> result_template;  // the traced result, for its pytree structure
  };

  // True when binds on this thread are being traced (jit then inlines the function).
  static bool tracing();

  // Checks static_argnums/donate_argnums against the call's arguments.
  void check_argnums(const CallSignature& signature, CallSite site) const;
  // Which flat leaves the call donates.
  std::vector<bool> donated_leaves(const CallSignature& signature) const;
  // The cached entry for `signature`, or null. Counts the call.
  std::shared_ptr<const Entry> find(const CallSignature& signature);
  // Traces `fn` on the signature's leaf types, compiles, caches and returns the entry;
  // records (and with KILN_LOG_RECOMPILES prints) why.
  std::shared_ptr<const Entry> compile(CallSignature signature, const FlatFunction& fn,
                                       std::shared_ptr<void> result_template, CallSite site);
  std::vector<Array> run(const Entry& entry, std::span<const Array> leaves, CallSite site);
  JitStats stats() const;
  const JitOptions& options() const { return options_; }

 private:
  JitOptions options_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const Entry>> entries_;  // in compilation order
  JitStats stats_;
};

}  // namespace detail

// Errors of a call (static or donated arguments named wrongly, arguments on two devices,
// tracing failures) name the line that created the Jitted: a variadic call operator
// cannot take a defaulted CallSite of its own.
template <typename F>
class Jitted {
 public:
  Jitted(F f, JitOptions options, CallSite site = {})
      : f_(std::move(f)),
        core_(std::make_shared<detail::JitCore>(std::move(options))),
        site_(site) {}

  template <typename... Args>
  auto operator()(const Args&... args) const {
    using Call = detail::FlatCall<F, Args...>;
    using Result = typename Call::Result;
    if (detail::JitCore::tracing()) return Result(std::invoke(f_, args...));
    std::shared_ptr<const detail::JitCore::Entry> entry = lookup_or_compile(args...);
    std::vector<Array> leaves = detail::flatten_args(args...);
    std::vector<Array> outputs = core_->run(*entry, leaves, site_);
    const auto& like = *static_cast<const std::optional<Result>*>(entry->result_template.get());
    const Array* next = outputs.data();
    return detail::unflatten_like(like.value(), next);
  }

  // The executable for these arguments' signature (compiling it if needed), to inspect its
  // program and memory plan without running it.
  template <typename... Args>
  Compiled compile(const Args&... args) const {
    return Compiled(lookup_or_compile(args...)->executable);
  }

  // FLOPs and bytes of the optimised program for these arguments' signature.
  template <typename... Args>
  CostReport cost_analysis(const Args&... args) const {
    return kiln::cost_analysis(compile(args...).program());
  }

  JitStats stats() const { return core_->stats(); }

 private:
  template <typename... Args>
  std::shared_ptr<const detail::JitCore::Entry> lookup_or_compile(const Args&... args) const {
    using Call = detail::FlatCall<F, Args...>;
    using Result = typename Call::Result;
    detail::CallSignature signature{{detail::signature_of_arg(args)...}};
    core_->check_argnums(signature, site_);
    if (auto entry = core_->find(signature)) return entry;
    Call call(f_, args...);
    auto result_template = std::make_shared<std::optional<Result>>();
    detail::FlatFunction traced = [fn = call.function(), &call,
                                   result_template](std::span<const Array> leaves) {
      std::vector<Array> out = fn(leaves);
      // FlatCall kept the structured result; keep its structure for later calls.
      const Array* next = out.data();
      result_template->emplace(call.rebuild_result(std::span<const Array>(next, out.size())));
      return out;
    };
    return core_->compile(std::move(signature), traced, result_template, site_);
  }

  F f_;
  std::shared_ptr<detail::JitCore> core_;
  CallSite site_;
};

template <typename F>
Jitted<F> jit(F f, JitOptions options = {}, CallSite site = {}) {
  return Jitted<F>(std::move(f), std::move(options), site);
}

}  // namespace kiln
