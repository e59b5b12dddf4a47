// The primitive table: static facts from prims/ids/all.def, rules from the registration
// calls.
#include "prims/registry.h"

#include <mutex>

#include <fmt/format.h>

#include "base/check.h"
#include "prims/ids/all.h"

namespace kiln {
namespace {

template <typename T, typename Variant, size_t I = 0>
constexpr size_t variant_index() {
  if constexpr (std::is_same_v<std::variant_alternative_t<I, Variant>, T>) {
    return I;
  } else {
    return variant_index<T, Variant, I + 1>();
  }
}

}  // namespace

PrimTable::PrimTable() {
  defs_ = {
#define KILN_PRIM(id_, name_, arity_, params_, flags_)      \
  PrimDef{.id = prim::id_,                                  \
          .name = name_,                                    \
          .arity = arity_,                                  \
          .family = family_of(prim::id_),                   \
          .params_index = variant_index<params_, Params>(), \
          .flags = (flags_)},
#include "prims/ids/all.def"
#undef KILN_PRIM
  };
  std::array<size_t, kNumFamilies> rows{};
  for (const PrimDef& def : defs_) ++rows[static_cast<size_t>(def.family)];
  for (size_t f = 0; f < rows.size(); ++f) family_start_[f + 1] = family_start_[f] + rows[f];
  // all.def lists the families in the order of Family, each family's rows in the order
  // that numbers them.
  for (size_t i = 0; i < defs_.size(); ++i) {
    KILN_CHECK(index_of(defs_[i].id) == i, "prims/ids/all.def: {} is out of family order",
               defs_[i].name);
  }
}

bool PrimTable::contains(PrimId id) const {
  const auto family = static_cast<size_t>(family_of(id));
  return family < static_cast<size_t>(kNumFamilies) &&
         family_start_[family] + row_of(id) < family_start_[family + 1];
}

void RuleContext::fail(const std::string& message, const std::string& hint) const {
  kiln::fail(site, fmt::format("{}: {}", prim.name, message), hint);
}

std::string not_differentiable_hint(const PrimDef& prim) {
  if (prim.id == prim::pallas_call) {
    return "a kernel has no derivative of its own: wrap the call in custom_vjp with its "
           "backward kernel (as flash attention's is, docs/kernels.md)";
  }
  return "apply stop_gradient to its input if no derivative should flow through it";
}

const PrimTable& register_all() {
  static PrimTable table;
  static std::once_flag once;
  std::call_once(once, [] {
    register_elementwise_rules(table);
    register_shape_rules(table);
    register_index_rules(table);
    register_reduce_rules(table);
    register_contract_rules(table);
    register_window_rules(table);
    register_random_rules(table);
    register_sort_rules(table);
    register_ref_kernels(table);
    register_cpu_kernels(table);
    register_vjp_rules(table);
    register_custom_vjp(table);
    register_control_flow_rules(table);
    register_control_flow_transforms(table);
    register_batch_rules(table);
    register_remat_prims(table);
    register_spmd_rules(table);
    register_spmd_transforms(table);
    register_compiled_spmd(table);
    register_jvp_rules(table);
    register_cost_rules(table);
    register_traced_cost_rules(table);
    register_pallas_call(table);
    register_sharding_rules(table);
  });
  return table;
}

std::string_view prim_name(PrimId id) {
  return register_all()[id].name;
}

std::span<const PrimDef> all_prims() {
  return register_all().all();
}

KernelFn kernel_for(const PrimDef& prim, std::span<const AbstractValue> inputs,
                    std::span<const AbstractValue> outputs, const Params& params,
                    bool reference_only) {
  bool fast = prim.cpu_kernel != nullptr && !reference_only &&
              (prim.cpu_supports == nullptr || prim.cpu_supports(inputs, outputs, params));
  return fast ? prim.cpu_kernel : prim.ref_kernel;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const RuleContext& context,
                       std::string_view what) {
  if (axis < -rank || axis >= rank) {
    context.fail(fmt::format("{} {} is out of range for an array of rank {}", what, axis, rank),
                 rank == 0 ? "a rank-0 (scalar) array has no axes"
                           : fmt::format("valid values are {}..{}", -rank, rank - 1));
  }
  return axis < 0 ? axis + rank : axis;
}

}  // namespace kiln
