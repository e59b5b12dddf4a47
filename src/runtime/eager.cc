// The eager interpreter: runs each primitive on its operands' device, asynchronously.
// The caller gets result arrays at once; the kernel runs later on the device's queue
// thread, and an error it raises is stored in the results' completion and rethrown, with
// the primitive and the caller's site, at the next synchronization.
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/check.h"
#include "prims/bind.h"
#include "runtime/device_array.h"

namespace kiln {
namespace {

bool reference_kernels_forced() {
  static const bool forced = [] {
    const char* value = std::getenv("KILN_KERNELS");
    return value != nullptr && std::strcmp(value, "ref") == 0;
  }();
  return forced;
}

// The device an op runs on: that of its committed operands (which must agree), else that
// of its first operand, else the default device.
CpuDevice& target_device(const PrimDef& prim, std::span<const Array> inputs, CallSite site,
                         bool& committed) {
  TargetDevice placement = target_of(inputs, site, prim.name);
  if (placement.conflict) {
    const Array& a = inputs[placement.conflict->first];
    const Array& b = inputs[placement.conflict->second];
    const auto& on = [&](const Array& x) { return concrete(x, site, prim.name).device(); };
    fail(site,
         fmt::format("{}: operands are committed to different devices: {} on {}, {} on {}",
                     prim.name, a.aval().to_string(), on(a)->to_string(), b.aval().to_string(),
                     on(b)->to_string()),
         fmt::format("move one operand first, e.g. kiln::device_put(x, kiln::device({}))",
                     on(a)->id()));
  }
  committed = placement.committed;
  return *placement.device;
}

bool has_sharded_operand(std::span<const Array> inputs) {
  for (const Array& input : inputs) {
    if (dynamic_cast<const DeviceArray*>(input.impl()) == nullptr && as_sharded(input) != nullptr)
      return true;
  }
  return false;
}

class EagerInterpreter final : public Interpreter {
 public:
  // immediate: run each kernel on the calling thread (immediate_interpreter()).
  explicit EagerInterpreter(bool immediate) : immediate_(immediate) {}

  std::vector<Array> apply(const PrimDef& prim, std::span<const Array> inputs, const Params& params,
                           std::vector<AbstractValue> out_avals, CallSite site) override {
    if (prim.impl != nullptr) return prim.impl(inputs, params, site);
    if (has_sharded_operand(inputs)) {
      return apply_gathered(prim, inputs, params, std::move(out_avals), site);
    }
    bool committed = false;
    CpuDevice& device = target_device(prim, inputs, site, committed);

    if (prim.has_flag(kAliasesOperand)) {
      const DeviceArray& source = concrete(inputs[0], site, prim.name);
      if (source.device() == &device) {
        return {Array(std::make_shared<DeviceArray>(std::move(out_avals[0]), &device,
                                                    source.buffer(), source.ready(), committed))};
      }
    }

    struct Operand {
      std::shared_ptr<Buffer> buffer;
      std::shared_ptr<Completion> ready;
      AbstractValue aval;
    };
    std::vector<Operand> operands;
    operands.reserve(inputs.size());
    for (const Array& input : inputs) {
      const DeviceArray* array = &concrete(input, site, prim.name);
      Array moved;
      if (array->device() != &device) {  // an uncommitted operand follows the others
        moved = copy_to_device(*array, input, device, false);
        array = &static_cast<const DeviceArray&>(*moved.impl());
      }
      operands.push_back({array->buffer(), array->ready(), array->aval()});
    }

    auto completion = std::make_shared<Completion>();
    std::vector<std::shared_ptr<Buffer>> results;
    std::vector<Array> outputs;
    for (const AbstractValue& aval : out_avals) {
      results.push_back(device.allocator().allocate(static_cast<size_t>(aval.size_bytes())));
      outputs.emplace_back(
          std::make_shared<DeviceArray>(aval, &device, results.back(), completion, committed));
    }

    // Operand types are gathered only for a fast kernel that chooses its calls: the common
    // case (no predicate) costs nothing more per op.
    std::vector<AbstractValue> in_types;
    if (prim.cpu_supports != nullptr) {
      for (const Operand& operand : operands) in_types.push_back(operand.aval);
    }
    KernelFn kernel = chosen_kernel(prim, in_types, out_avals, params);
    KILN_CHECK(kernel != nullptr, "{} has no kernel", prim.name);
    // The task depends on its operands through their completions only, so it may run here,
    // ahead of the device's queue.
    auto run = [this, &device](std::function<void()> task) {
      if (immediate_) {
        task();
      } else {
        device.enqueue(std::move(task));
      }
    };
    run([&prim, kernel, params, operands = std::move(operands), results = std::move(results),
         out_avals = std::move(out_avals), completion, &device, site]() mutable {
      // Buffers are let go before the completion is signalled, so that a waiter sees only
      // the arrays' own references to them (jit's donation relies on that).
      auto finish = [&](std::shared_ptr<const Error> error) {
        operands.clear();
        results.clear();
        if (error) {
          completion->set_failed(std::move(error));
        } else {
          completion->set_done();
        }
      };
      std::vector<KernelInput> kernel_inputs;
      kernel_inputs.reserve(operands.size());
      for (const Operand& operand : operands) {
        operand.ready->wait();
        if (operand.ready->error()) return finish(operand.ready->error());
        kernel_inputs.push_back({operand.buffer->data(), &operand.aval});
      }
      std::vector<KernelOutput> kernel_outputs;
      kernel_outputs.reserve(results.size());
      for (size_t i = 0; i < results.size(); ++i) {
        kernel_outputs.push_back({results[i]->data(), &out_avals[i]});
      }
      try {
        kernel(KernelCall{kernel_inputs, kernel_outputs, params, device.pool()});
        finish(nullptr);
      } catch (const Error& error) {
        finish(std::make_shared<Error>(
            fmt::format("{} failed while running: {}", prim.name, error.message()), error.hint(),
            site));
      } catch (const std::exception& error) {
        finish(std::make_shared<Error>(
            fmt::format("{} failed while running: {}", prim.name, error.what()), "", site));
      }
    });
    return outputs;
  }

 private:
  bool immediate_;

  // An op on a sharded array runs on one device, on the gathered array: right, not fast.
  // Ops on every device at once are what shard_map (and, later, jit's sharding
  // propagation) are for (docs/sharding.md).
  std::vector<Array> apply_gathered(const PrimDef& prim, std::span<const Array> inputs,
                                    const Params& params, std::vector<AbstractValue> out_avals,
                                    CallSite site) {
    std::vector<Array> gathered;
    gathered.reserve(inputs.size());
    for (const Array& input : inputs) {
      const ShardedArray* sharded = as_sharded(input);
      gathered.push_back(sharded != nullptr ? gathered_for_eager(*sharded, site) : input);
    }
    // A rule that passes its operand's type through would otherwise call the result sharded.
    for (AbstractValue& aval : out_avals) aval.sharding = ShardingSpec();
    return apply(prim, gathered, params, std::move(out_avals), site);
  }
};

}  // namespace

KernelFn chosen_kernel(const PrimDef& prim, std::span<const AbstractValue> inputs,
                       std::span<const AbstractValue> outputs, const Params& params) {
  return kernel_for(prim, inputs, outputs, params, reference_kernels_forced());
}

Interpreter& eager_interpreter() {
  static EagerInterpreter* interpreter = new EagerInterpreter(false);
  return *interpreter;
}

Interpreter& immediate_interpreter() {
  static EagerInterpreter* interpreter = new EagerInterpreter(true);
  return *interpreter;
}

}  // namespace kiln
