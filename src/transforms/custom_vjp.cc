// The custom_vjp_call primitive and the process-wide table of custom functions
// (see kiln::custom_vjp in include/kiln/transforms.h).
//
// A custom function is registered once, gets an id, and is called through the primitive
// custom_vjp_call[name, id], whose results are the function's outputs followed by its
// residuals (the values its backward rule needs). Abstract evaluation traces the forward
// function on the operand types (cached per signature); the impl rule runs it eagerly; the
// VJP rule calls the user's backward function on the residuals.
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/jvp.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "prims/bind.h"
#include "prims/ids/custom.h"
#include "transforms/batch_rules/batch_util.h"
#include "transforms/trace.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

struct Signature {
  std::vector<AbstractValue> outputs;  // user outputs, then residuals
  size_t num_outputs = 0;
};

struct CustomFunction {
  std::string name;
  detail::CustomForward forward;
  detail::CustomBackward backward;
  detail::ForwardMode forward_mode = detail::ForwardMode::kRefused;
  std::mutex mutex;
  std::map<std::string, Signature> signatures;  // by the operand types' text
};

struct CustomTable {
  std::mutex mutex;
  std::vector<std::unique_ptr<CustomFunction>> functions;
};

CustomTable& table() {
  static CustomTable* instance = new CustomTable;  // never destroyed: ids must stay valid
  return *instance;
}

CustomFunction& function_of(int64_t id) {
  CustomTable& t = table();
  std::lock_guard lock(t.mutex);
  KILN_CHECK(id >= 0 && id < static_cast<int64_t>(t.functions.size()), "unknown custom function {}",
             id);
  return *t.functions[static_cast<size_t>(id)];
}

std::string signature_key(std::span<const AbstractValue> inputs) {
  std::string key;
  for (const AbstractValue& aval : inputs) key += aval.to_string() + ";";
  return key;
}

// Traces the forward function on the operand types to learn the result types.
Signature signature_of(CustomFunction& function, std::span<const AbstractValue> inputs,
                       CallSite site) {
  std::string key = signature_key(inputs);
  {
    std::lock_guard lock(function.mutex);
    auto found = function.signatures.find(key);
    if (found != function.signatures.end()) return found->second;
  }
  Signature signature;
  TraceContext trace;
  std::vector<Array> tracers;
  for (const AbstractValue& aval : inputs) tracers.push_back(trace.new_input(aval));
  detail::CustomResult result;
  {
    InterpreterScope scope(trace);
    result = function.forward(tracers);
  }
  signature.num_outputs = result.outputs.size();
  for (const Array& out : result.outputs) signature.outputs.push_back(out.aval());
  for (const Array& residual : result.residuals) signature.outputs.push_back(residual.aval());
  trace.finish({}, site);
  std::lock_guard lock(function.mutex);
  function.signatures.emplace(key, signature);
  return signature;
}

std::vector<AbstractValue> custom_rule(std::span<const AbstractValue> inputs, const Params& params,
                                       const RuleContext& context) {
  const auto& p = std::get<CustomVjpParams>(params);
  return signature_of(function_of(p.id), inputs, context.site).outputs;
}

std::vector<Array> custom_impl(std::span<const Array> inputs, const Params& params, CallSite site) {
  (void)site;
  const auto& p = std::get<CustomVjpParams>(params);
  detail::CustomResult result = function_of(p.id).forward(inputs);
  std::vector<Array> outputs = std::move(result.outputs);
  outputs.insert(outputs.end(), result.residuals.begin(), result.residuals.end());
  return outputs;
}

// The residuals are outputs of the primitive, so a gradient of a gradient (whose backward
// function read them) sends cotangents to them. The user's backward rule covers only the
// function's outputs; the residuals' share flows through the forward function's own ops,
// differentiated as usual. (JAX reaches the same answer by differentiating `fwd` directly.)
void add_residual_cotangents(CustomFunction& function, const VjpArgs& args, size_t num_outputs,
                             std::vector<Array>& input_cts) {
  std::vector<Array> residual_cts(
      args.cotangents.begin() + static_cast<std::ptrdiff_t>(num_outputs), args.cotangents.end());
  bool any = false;
  for (const Array& ct : residual_cts) any = any || ct.defined();
  if (!any) return;
  detail::FlatFunction residuals_of = [&function](std::span<const Array> inputs) {
    return function.forward(inputs).residuals;
  };
  std::vector<bool> differentiable;
  for (const Array& input : args.inputs) differentiable.push_back(is_floating(input.dtype()));
  detail::FlatVjp residual_vjp =
      detail::vjp_flat(residuals_of, args.inputs, differentiable, args.site);
  std::vector<Array> extra = residual_vjp.pullback(residual_cts);
  for (size_t i = 0; i < input_cts.size(); ++i) {
    if (!differentiable[i] || !extra[i].defined()) continue;
    input_cts[i] = input_cts[i].defined() ? input_cts[i] + extra[i] : extra[i];
  }
}

std::vector<Array> custom_vjp_rule(const VjpArgs& args) {
  const auto& p = std::get<CustomVjpParams>(args.params);
  CustomFunction& function = function_of(p.id);
  std::vector<AbstractValue> in_avals;
  for (const Array& input : args.inputs) in_avals.push_back(input.aval());
  size_t num_outputs = signature_of(function, in_avals, args.site).num_outputs;
  std::vector<Array> cotangents;
  for (size_t i = 0; i < num_outputs; ++i)
    cotangents.push_back(vjp_util::cotangent_or_zeros(args, i));
  std::vector<Array> residuals(args.outputs.begin() + static_cast<std::ptrdiff_t>(num_outputs),
                               args.outputs.end());
  std::vector<Array> input_cts = function.backward(residuals, cotangents);
  if (input_cts.size() != args.inputs.size()) {
    fail(args.site,
         fmt::format("custom_vjp '{}': the backward function returned {} cotangent(s) "
                     "for {} argument array(s)",
                     function.name, input_cts.size(), args.inputs.size()),
         "return one cotangent per array argument, shaped like it");
  }
  for (size_t i = 0; i < input_cts.size(); ++i) {
    const Array& ct = input_cts[i];
    if (ct.defined() &&
        (ct.shape() != args.inputs[i].shape() || ct.dtype() != args.inputs[i].dtype())) {
      fail(args.site,
           fmt::format("custom_vjp '{}': the backward function returned a {} cotangent "
                       "for argument array {}, which is {}",
                       function.name, ct.aval().to_string(), i, args.inputs[i].aval().to_string()),
           is_floating(args.inputs[i].dtype())
               ? "a cotangent has the shape and dtype of its argument"
               : "an integer or bool argument takes no cotangent: return an empty Array() "
                 "for it");
    }
  }
  add_residual_cotangents(function, args, num_outputs, input_cts);
  return input_cts;
}

// ----- vmap --------------------------------------------------------------------------------
// As in JAX, a custom function under vmap is a new custom function whose forward is the
// vmapped forward and whose backward is the vmapped backward, so the user's rule still
// supplies the gradient of a batched call. One derived function per (function, which
// operands are batched); batched operands carry the batch on axis 0.

std::string batched_name(const std::string& name) {
  return name + " (vmapped)";
}

std::vector<std::string> numbered(std::string_view what, size_t count) {
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) names.push_back(fmt::format("{} {}", what, i));
  return names;
}

// `value` with its batch on axis 0; empty (zero) values stay empty.
Array batch_on_front(const Array& value, int64_t dim, int64_t size, CallSite site) {
  if (!value.defined()) return value;
  return detail::place_batch_axis(value, dim, 0, size, "a custom_vjp value", site);
}

int64_t register_batched_function(int64_t id, const std::vector<bool>& batched, CallSite site) {
  CustomFunction& original = function_of(id);
  std::vector<std::optional<int64_t>> in_axes;
  for (bool b : batched) in_axes.push_back(b ? std::optional<int64_t>(0) : std::nullopt);
  auto forward = [&original, in_axes, site](std::span<const Array> inputs) {
    auto num_outputs = std::make_shared<size_t>(0);
    detail::FlatFunction all_results = [&original, num_outputs](std::span<const Array> in) {
      detail::CustomResult result = original.forward(in);
      *num_outputs = result.outputs.size();
      std::vector<Array> all = std::move(result.outputs);
      all.insert(all.end(), result.residuals.begin(), result.residuals.end());
      return all;
    };
    detail::BatchedOutputs out =
        detail::vmap_flat(all_results, inputs, in_axes, numbered("operand", inputs.size()), site);
    detail::CustomResult result;
    for (size_t k = 0; k < out.values.size(); ++k) {
      Array value = batch_on_front(out.values[k], out.dims[k], out.size, site);
      (k < *num_outputs ? result.outputs : result.residuals).push_back(std::move(value));
    }
    return result;
  };
  auto backward = [&original, batched, site](std::span<const Array> residuals,
                                             std::span<const Array> cts) {
    size_t num_residuals = residuals.size();
    detail::FlatFunction per_example = [&original, num_residuals](std::span<const Array> in) {
      return original.backward(in.first(num_residuals), in.subspan(num_residuals));
    };
    std::vector<Array> in(residuals.begin(), residuals.end());
    in.insert(in.end(), cts.begin(), cts.end());
    std::vector<std::optional<int64_t>> axes(in.size(), 0);
    detail::BatchedOutputs out =
        detail::vmap_flat(per_example, in, axes, numbered("backward operand", in.size()), site);
    std::vector<Array> input_cts;
    for (size_t i = 0; i < out.values.size(); ++i) {
      Array ct = batch_on_front(out.values[i], out.dims[i], out.size, site);
      // An operand shared by every example collects every example's cotangent.
      if (ct.defined() && i < batched.size() && !batched[i]) ct = sum(ct, {0}, false, site);
      input_cts.push_back(std::move(ct));
    }
    return input_cts;
  };
  return detail::register_custom_function(batched_name(original.name), forward, backward,
                                          original.forward_mode);
}

// Forward mode differentiates the forward function where that is the function's meaning
// (kiln's own checkpoints and saved values); a user's custom_vjp refuses, as JAX's does.
std::vector<Array> custom_jvp_rule(const JvpArgs& args) {
  const auto& p = std::get<CustomVjpParams>(args.params);
  CustomFunction& function = function_of(p.id);
  if (function.forward_mode == detail::ForwardMode::kRefused) {
    fail(args.site,
         fmt::format("forward-mode differentiation (jvp, linearize, jacfwd, hessian) of a "
                     "custom_vjp function is not supported: '{}' defines reverse mode only",
                     function.name),
         "as in JAX: use grad, vjp or jacrev for this function, or write it without custom_vjp "
         "so that each primitive's own JVP rule applies");
  }
  detail::FlatFunction forward = [&function](std::span<const Array> in) {
    detail::CustomResult result = function.forward(in);
    std::vector<Array> all = std::move(result.outputs);
    all.insert(all.end(), result.residuals.begin(), result.residuals.end());
    return all;
  };
  detail::FlatLinearized linearized = detail::linearize_flat(forward, args.inputs, args.site);
  return linearized.push_forward(args.tangents);
}

BatchResult custom_batch_rule(const BatchArgs& args) {
  const auto& p = std::get<CustomVjpParams>(args.params);
  std::vector<bool> batched;
  std::vector<Array> inputs;
  std::string key = std::to_string(p.id) + ":";
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    batched.push_back(args.dims[i] != kNotBatched);
    key += batched.back() ? "1" : "0";
    inputs.push_back(batch_util::move_batch_first(args.inputs[i], args.dims[i], args.site));
  }
  int64_t derived;
  {
    static std::mutex mutex;
    static std::map<std::string, int64_t>* derived_ids = new std::map<std::string, int64_t>;
    std::lock_guard lock(mutex);
    auto found = derived_ids->find(key);
    if (found == derived_ids->end()) {
      found = derived_ids->emplace(key, register_batched_function(p.id, batched, args.site)).first;
    }
    derived = found->second;
  }
  std::vector<Array> outputs = bind(prim::custom_vjp_call, inputs,
                                    CustomVjpParams{batched_name(p.name), derived}, args.site);
  return batch_util::all_first(std::move(outputs));
}

}  // namespace

namespace detail {

int64_t register_custom_function(std::string name, CustomForward forward, CustomBackward backward,
                                 ForwardMode forward_mode) {
  KILN_CHECK(!name.empty() && name.find_first_of("\"\n") == std::string::npos,
             "custom_vjp name '{}' must be non-empty, without quotes or line breaks "
             "(it is printed quoted in program text)",
             name);
  CustomTable& t = table();
  auto function = std::make_unique<CustomFunction>();
  function->name = std::move(name);
  function->forward = std::move(forward);
  function->backward = std::move(backward);
  function->forward_mode = forward_mode;
  std::lock_guard lock(t.mutex);
  t.functions.push_back(std::move(function));
  return static_cast<int64_t>(t.functions.size() - 1);
}

std::vector<Array> call_custom_function(int64_t id, std::span<const Array> inputs, CallSite site) {
  const std::string& name = function_of(id).name;
  std::vector<AbstractValue> in_avals;
  for (const Array& input : inputs) in_avals.push_back(input.aval());
  size_t num_outputs = signature_of(function_of(id), in_avals, site).num_outputs;
  std::vector<Array> all = bind(prim::custom_vjp_call, inputs, CustomVjpParams{name, id}, site);
  all.resize(num_outputs);  // drop the residuals
  return all;
}

}  // namespace detail

void register_custom_vjp(PrimTable& table) {
  PrimDef& def = table[prim::custom_vjp_call];
  def.abstract_eval = custom_rule;
  def.impl = custom_impl;
  def.vjp = custom_vjp_rule;
  def.jvp = custom_jvp_rule;
  def.batch = custom_batch_rule;
}

}  // namespace kiln
