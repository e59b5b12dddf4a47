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

#include <memory>
#include <span>
#include <vector>

#include "kiln/cost.h"
#include "kiln/detail/jit_core.h"
#include "kiln/jit_types.h"
#include "kiln/transforms.h"

namespace kiln {

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
