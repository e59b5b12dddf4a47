// The pallas_call primitive: the process's table of kernel calls and the primitive's rules.
//
// pallas::call made inside jit, grad, vmap or make_program registers the call (body, grid,
// specs, options) and binds pallas_call[name, id]. Abstract evaluation reads the result
// types from the table; the impl rule runs the kernel in interpret mode (so a jitted program
// holding one runs equation by equation); the batching rule registers the same kernel over
// one more, leading, parallel grid axis hidden from the body; the cost rule is the kernel's
// own estimate, or its operands' and results' bytes. There is no derivative rule: a kernel's
// author gives its backward kernel through custom_vjp.
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "pallas/compiled_kernel.h"
#include "pallas/kernel_call.h"
#include "prims/bind.h"
#include "prims/ids/custom.h"
#include "prims/registry.h"
#include "transforms/batch_rules/batch_util.h"

namespace kiln::pallas::detail {
namespace {

struct KernelTable {
  std::mutex mutex;
  std::vector<std::unique_ptr<const RegisteredKernel>> kernels;
};

KernelTable& table() {
  static KernelTable* instance = new KernelTable;  // never destroyed: ids must stay valid
  return *instance;
}

}  // namespace

int64_t register_kernel(RegisteredKernel kernel, CallSite site) {
  KernelTable& t = table();
  // A copy (vmap's batched kernel) has other points: its variants are its own.
  kernel.compiled = std::make_shared<PlanSlot>();
  if (!interpreted(kernel.options)) kernel.compiled->plan = compiled_plan(kernel, site);
  std::lock_guard lock(t.mutex);
  t.kernels.push_back(std::make_unique<const RegisteredKernel>(std::move(kernel)));
  return static_cast<int64_t>(t.kernels.size() - 1);
}

const RegisteredKernel& registered_kernel(int64_t id, CallSite site) {
  KernelTable& t = table();
  std::lock_guard lock(t.mutex);
  if (id < 0 || id >= static_cast<int64_t>(t.kernels.size())) {
    fail(site,
         fmt::format("pallas_call id={} names no kernel call of this process ({} registered)", id,
                     t.kernels.size()),
         "a program holding a kernel call parses back only in the process that traced it");
  }
  return *t.kernels[static_cast<size_t>(id)];
}

namespace {

const RegisteredKernel& kernel_of(const Params& params, CallSite site) {
  return registered_kernel(std::get<KernelCallParams>(params).id, site);
}

std::vector<AbstractValue> pallas_call_rule(std::span<const AbstractValue> inputs,
                                            const Params& params, const RuleContext& context) {
  const RegisteredKernel& kernel = kernel_of(params, context.site);
  const std::string& name = std::get<KernelCallParams>(params).name;
  if (inputs.size() != kernel.in_types.size()) {
    context.fail(fmt::format("kernel '{}' takes {} inputs, got {}", name, kernel.in_types.size(),
                             inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].shape != kernel.in_types[i].shape ||
        inputs[i].dtype != kernel.in_types[i].dtype) {
      context.fail(fmt::format("kernel '{}': input {} is {}; the call was made for {}", name, i,
                               inputs[i].to_string(), kernel.in_types[i].to_string()));
    }
  }
  return kernel.out_types;
}

std::vector<Array> pallas_call_impl(std::span<const Array> inputs, const Params& params,
                                    CallSite site) {
  return run_call(kernel_of(params, site), inputs, site);
}

// `spec` for a kernel with one more leading grid axis: its index map reads the point
// without that axis. `batched`: the array gained a leading batch dimension, indexed by the
// new axis and squeezed from the block.
BlockSpec lifted_spec(const BlockSpec& spec, bool batched) {
  std::function<Index(const Index&)> inner = spec.index_map;
  auto inner_block = [inner](const Index& point) {
    Index rest(point.begin() + 1, point.end());
    return inner ? inner(rest) : rest;
  };
  if (!batched) return BlockSpec(spec.block_shape, inner_block);
  Dims block = spec.block_shape;
  block.insert_at(0, kSqueezed);
  return BlockSpec(std::move(block), [inner_block](const Index& point) {
    Index index = inner_block(point);
    index.insert(index.begin(), point[0]);
    return index;
  });
}

AbstractValue with_batch(const AbstractValue& type, int64_t size) {
  Dims dims = type.shape.dims();
  dims.insert_at(0, size);
  return AbstractValue(Shape(dims), type.dtype);
}

BatchResult pallas_call_batch_rule(const BatchArgs& args) {
  const RegisteredKernel& kernel = kernel_of(args.params, args.site);
  const std::string& name = std::get<KernelCallParams>(args.params).name;
  if (args.size == 0) {  // no example, so no grid point: empty results
    std::vector<Array> empty;
    for (const AbstractValue& type : kernel.out_types) {
      empty.push_back(zeros(with_batch(type, 0).shape, type.dtype));
    }
    return batch_util::all_first(std::move(empty));
  }
  RegisteredKernel batched = kernel;
  batched.grid.insert(batched.grid.begin(), args.size);
  batched.options.semantics.insert(batched.options.semantics.begin(), GridAxis::kParallel);
  batched.hidden_axes = kernel.hidden_axes + 1;
  std::vector<Array> inputs;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const bool is_batched = args.dims[i] != kNotBatched;
    inputs.push_back(batch_util::move_batch_first(args.inputs[i], args.dims[i], args.site));
    batched.in_specs[i] = lifted_spec(kernel.in_specs[i], is_batched);
    if (is_batched) batched.in_types[i] = with_batch(kernel.in_types[i], args.size);
  }
  for (size_t j = 0; j < kernel.out_types.size(); ++j) {
    batched.out_specs[j] = lifted_spec(kernel.out_specs[j], true);
    batched.out_types[j] = with_batch(kernel.out_types[j], args.size);
  }
  check_kernel(batched, args.site);
  int64_t id = register_kernel(std::move(batched), args.site);
  return batch_util::all_first(
      bind(prim::pallas_call, inputs, KernelCallParams{name, id}, args.site));
}

// The kernel jit runs for a call registered in compiled mode: its variants on the step's
// buffers (a program holding it is then compiled like any other, not run equation by
// equation).
void pallas_call_kernel(const KernelCall& call) {
  const RegisteredKernel& kernel = kernel_of(call.params, kUnknownSite);
  std::vector<const std::byte*> inputs;
  for (const KernelInput& input : call.inputs)
    inputs.push_back(static_cast<const std::byte*>(input.data));
  std::vector<std::byte*> outputs;
  for (const KernelOutput& output : call.outputs)
    outputs.push_back(static_cast<std::byte*>(output.data));
  run_compiled_into(kernel, inputs, outputs, call.pool, kUnknownSite);
}

bool pallas_call_compiles(const Params& params) {
  const RegisteredKernel& kernel = kernel_of(params, kUnknownSite);
  return kernel.compiled && kernel.compiled->plan != nullptr;
}

Cost pallas_call_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                      const Params& params) {
  const RegisteredKernel& kernel = kernel_of(params, kUnknownSite);
  Cost cost;
  for (const AbstractValue& input : inputs)
    cost.bytes_read += static_cast<double>(input.size_bytes());
  for (const AbstractValue& output : outputs) {
    cost.bytes_written += static_cast<double>(output.size_bytes());
  }
  if (kernel.options.cost_estimate) {
    // The estimate is one call's; a batched call is one per example.
    double examples = 1;
    for (size_t a = 0; a < kernel.hidden_axes; ++a) examples *= static_cast<double>(kernel.grid[a]);
    cost.flops = kernel.options.cost_estimate->flops * examples;
    cost.transcendentals = kernel.options.cost_estimate->transcendentals * examples;
    if (kernel.options.cost_estimate->bytes() > 0) {
      cost.bytes_read = kernel.options.cost_estimate->bytes_read * examples;
      cost.bytes_written = kernel.options.cost_estimate->bytes_written * examples;
    }
  }
  return cost;
}

}  // namespace
}  // namespace kiln::pallas::detail

namespace kiln {

void register_pallas_call(PrimTable& table) {
  PrimDef& def = table[prim::pallas_call];
  def.abstract_eval = pallas::detail::pallas_call_rule;
  def.impl = pallas::detail::pallas_call_impl;
  def.ref_kernel = pallas::detail::pallas_call_kernel;
  def.jit_runs_kernel = pallas::detail::pallas_call_compiles;
  def.batch = pallas::detail::pallas_call_batch_rule;
  def.cost = pallas::detail::pallas_call_cost;
}

}  // namespace kiln
