// Algebraic simplification (passes.h): local rewrites, each exact bit for bit. One forward
// sweep; each equation sees its operands already simplified, so chains collapse
// (neg(neg(neg(neg(x)))) is x). A rewrite either replaces a result by a value of the
// identical type (dtype, shape and weak type) or emits a cheaper equation of that type;
// equations it leaves unused stay for eliminate_dead_code. Why each rewrite is exact is
// said next to it; what is NOT rewritten is as deliberate (x+0 and x*0 for floats).
#include <cmath>
#include <map>
#include <vector>

#include "kiln/ops.h"
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/custom.h"
#include "prims/ids/index.h"
#include "prims/ids/select.h"
#include "prims/ids/shape.h"
#include "prims/ids/unary.h"
#include "transforms/passes/passes.h"
#include "transforms/passes/program_rewrite.h"

namespace kiln {
namespace {

// Constants larger than this are not read back to look for ones and zeros.
constexpr int64_t kMaxInspectedElements = int64_t{1} << 20;

// What every element of a constant is, as far as the rewrites care. Floats are compared
// by value and sign, so +0 and -0 differ; bools count true as one.
struct ConstantFacts {
  bool all_one = false;
  bool all_zero = false;           // integer 0, false, or +0.0 (not -0.0)
  bool all_negative_zero = false;  // -0.0 (floats only)
  bool all_bits_set = false;       // integers: every bit set (-1, or the unsigned maximum)
};

ConstantFacts inspect(const Array& value) {
  ConstantFacts facts;
  if (!is_concrete(value) || value.size() > kMaxInspectedElements) return facts;
  HostArray host;
  try {
    host = value.to_host();
  } catch (const Error&) {
    return facts;  // a value that failed to compute is treated as unknown
  }
  bool floating = is_floating(value.dtype());
  facts = {true, true, floating, is_integer(value.dtype())};
  for (int64_t i = 0; i < value.size(); ++i) {
    double element = host.element<double>(i);
    facts.all_one = facts.all_one && element == 1.0;
    facts.all_zero = facts.all_zero && element == 0.0 && !std::signbit(element);
    facts.all_negative_zero = facts.all_negative_zero && element == 0.0 && std::signbit(element);
  }
  for (std::byte byte : host.bytes)
    facts.all_bits_set = facts.all_bits_set && byte == std::byte{0xff};
  return facts;
}

bool is_identity(const Dims& permutation) {
  for (size_t i = 0; i < permutation.size(); ++i) {
    if (permutation[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool all_zero(const Dims& dims) {
  for (int64_t d : dims) {
    if (d != 0) return false;
  }
  return true;
}

class Simplifier {
 public:
  explicit Simplifier(const Program& program) : rewrite_(program) {}

  Program run() {
    const Program& source = rewrite_.source();
    for (size_t i = 0; i < source.constants.size(); ++i) rewrite_.keep_constant(i);
    note_new_equations();
    for (const Equation& equation : source.equations) {
      VarId replacement = equation.outputs.size() == 1 ? simplify(equation) : -1;
      if (replacement < 0 && equation.outputs.size() == 1) replacement = computed_once(equation);
      if (replacement >= 0 && rewrite_.aval(replacement) == source.aval(equation.outputs[0])) {
        rewrite_.map(equation.outputs[0], replacement);
      } else {
        rewrite_.copy_equation(equation);
      }
      note_new_equations();
    }
    return rewrite_.finish();
  }

 private:
  // A new variable that `equation`'s one result may be replaced by, or -1. The caller
  // replaces it only when the types are identical.
  VarId simplify(const Equation& equation) {
    std::vector<VarId> in;
    for (VarId var : equation.inputs) in.push_back(rewrite_[var]);
    const AbstractValue& result = rewrite_.source().aval(equation.outputs[0]);
    bool integer = is_integer(result.dtype);
    bool logical = integer || result.dtype == DType::bool_;
    switch (equation.prim) {
      // x*1 = x and x/1 = x exactly for every dtype (IEEE: NaN, Inf and -0 pass through).
      case prim::mul:
        if (facts(in[1]).all_one) return in[0];
        if (facts(in[0]).all_one) return in[1];
        // Integers only: x*0 = 0 (for floats NaN*0 and Inf*0 are NaN, and -1*0 is -0).
        if (integer && facts(in[1]).all_zero && !may_carry_error(in[0])) {
          return zeros(result, in[1], equation);
        }
        if (integer && facts(in[0]).all_zero && !may_carry_error(in[1])) {
          return zeros(result, in[0], equation);
        }
        return -1;
      case prim::div:
        return facts(in[1]).all_one ? in[0] : -1;
      // x - (+0) = x for every float x, -0 included (-0 - +0 = -0); x - (-0) is not.
      case prim::sub:
        return facts(in[1]).all_zero ? in[0] : -1;
      // x + (-0) = x for every float x (+0 + -0 = +0); x + (+0) is not (-0 + +0 = +0).
      // Integers: x + 0 = x.
      case prim::add:
        if (facts(in[1]).all_negative_zero || (integer && facts(in[1]).all_zero)) return in[0];
        if (facts(in[0]).all_negative_zero || (integer && facts(in[0]).all_zero)) return in[1];
        return -1;
      // Bitwise and logical identities: x|0, x^0, x&~0 (integers), x|false, x^false,
      // x&true (bools).
      case prim::or_:
      case prim::xor_:
        if (!logical) return -1;
        if (facts(in[1]).all_zero) return in[0];
        if (facts(in[0]).all_zero) return in[1];
        return -1;
      case prim::and_:
        if (!logical) return -1;
        if (all_ones_for_and(in[1], integer)) return in[0];
        if (all_ones_for_and(in[0], integer)) return in[1];
        return -1;
      // Shifting by 0 is the identity for every shift.
      case prim::shift_left:
      case prim::shift_right_logical:
      case prim::shift_right_arithmetic:
        return facts(in[1]).all_zero ? in[0] : -1;
      // -(-x) = x: negation flips the sign bit of floats and wraps for integers.
      case prim::neg:
        if (const Equation* inner = producer(in[0]); inner && inner->prim == prim::neg) {
          return inner->inputs[0];
        }
        return -1;
      // Conversions to the same type copy the bits (the type check in run() rejects a
      // conversion that only drops the weak type).
      case prim::convert_element_type:
      case prim::bitcast_convert_type:
        return in[0];
      case prim::reshape:
        return simplify_reshape(equation, in[0]);
      case prim::transpose:
        return simplify_transpose(equation, in[0]);
      // A broadcast to the operand's own shape, a full slice, a pad by nothing, a
      // concatenation of one array and a dynamic slice as large as the array (its start is
      // clamped to 0) are copies.
      case prim::broadcast_in_dim:
      case prim::concatenate:
        return in.size() == 1 ? in[0] : -1;
      case prim::slice:
        return is_full_slice(std::get<SliceParams>(equation.params), in[0]) ? in[0] : -1;
      case prim::pad: {
        const auto& p = std::get<PadParams>(equation.params);
        bool nothing = all_zero(p.low) && all_zero(p.high) && all_zero(p.interior);
        return nothing && !may_carry_error(in[1]) ? in[0] : -1;
      }
      case prim::dynamic_slice:
        return !may_carry_error(in[1]) ? in[0] : -1;
      // select(c, x, x) = x; select(true, x, y) = x; select(false, x, y) = y.
      case prim::select:
        if (in[1] == in[2] && !may_carry_error(in[0])) return in[1];
        if (facts(in[0]).all_one && !may_carry_error(in[2])) return in[1];
        if (facts(in[0]).all_zero && !may_carry_error(in[1])) return in[2];
        return -1;
      default:
        // Not rewritten: stop_gradient and checkpoint_name (identities when run, but
        // markers that matter to a program differentiated later), reductions over no axes
        // (a float sum over nothing adds to +0, turning -0 into +0), pow(x, 1) (kernels
        // need not give x exactly) and optimization_barrier, which is copied as it is; no
        // rule looks at what a barrier's results come from.
        return -1;
    }
  }

  // An elementwise equation whose operands are each a rank-0 value or a broadcast of one has
  // one value in every element: it is computed once, on the rank-0 values, and broadcast.
  // Only for operations whose result is the exactly rounded one (or exact), so where it is
  // computed cannot change a bit. Why it matters: such a data-independent array (the VJP of
  // a clamp builds one from constants) is one value that common-subexpression elimination
  // shares between every layer and every micro-batch of a step; the fusion planner then puts
  // all their loops that read it into one group (step_plan.cc), which runs every
  // micro-batch's forward pass before any backward pass, so gradient accumulation kept every
  // micro-batch's activations at once. A broadcast is cloned into each reader instead
  // (clone_broadcasts).
  VarId computed_once(const Equation& equation) {
    if (!exactly_rounded(equation.prim)) return -1;
    const AbstractValue& result = rewrite_.source().aval(equation.outputs[0]);
    if (result.shape.rank() == 0) return -1;
    std::vector<VarId> scalars;
    bool broadcast = false;
    for (VarId var : equation.inputs) {
      VarId value = rewrite_[var];
      if (rewrite_.aval(value).shape.rank() == 0) {
        scalars.push_back(value);
        continue;
      }
      const Equation* inner = producer(value);
      if (inner == nullptr || inner->prim != prim::broadcast_in_dim ||
          rewrite_.aval(inner->inputs[0]).shape.rank() != 0) {
        return -1;
      }
      scalars.push_back(inner->inputs[0]);
      broadcast = true;
    }
    if (!broadcast) return -1;
    VarId scalar = rewrite_.add_equation(equation.prim, scalars, equation.params, equation.site,
                                         equation.scope)[0];
    return rewrite_.add_equation(prim::broadcast_in_dim, {scalar},
                                 BroadcastInDimParams{result.shape, {}}, equation.site,
                                 equation.scope)[0];
  }

  // IEEE arithmetic and comparisons, selection, bitwise logic and conversions: a result
  // that does not depend on how or where a kernel computes it.
  static bool exactly_rounded(PrimId prim) {
    switch (prim) {
      case prim::add:
      case prim::sub:
      case prim::mul:
      case prim::div:
      case prim::max:
      case prim::min:
      case prim::neg:
      case prim::abs:
      case prim::eq:
      case prim::ne:
      case prim::lt:
      case prim::le:
      case prim::gt:
      case prim::ge:
      case prim::select:
      case prim::and_:
      case prim::or_:
      case prim::xor_:
      case prim::not_:
      case prim::convert_element_type:
        return true;
      default:
        return false;
    }
  }

  // reshape to the operand's own shape is a copy; reshape(reshape(x)) is one reshape of x
  // (row-major order is kept by both).
  VarId simplify_reshape(const Equation& equation, VarId x) {
    const Equation* inner = producer(x);
    if (rewrite_.aval(x).shape == std::get<ReshapeParams>(equation.params).new_sizes) return x;
    if (inner == nullptr || inner->prim != prim::reshape) return -1;
    VarId original = inner->inputs[0];
    if (rewrite_.aval(original).shape == std::get<ReshapeParams>(equation.params).new_sizes) {
      return original;
    }
    return rewrite_.add_equation(prim::reshape, {original}, equation.params, equation.site,
                                 equation.scope)[0];
  }

  // transpose by the identity is a copy; transpose(transpose(x, p), q) moves x's axis
  // p[q[i]] to axis i, one transpose (or none).
  VarId simplify_transpose(const Equation& equation, VarId x) {
    const Dims& outer = std::get<TransposeParams>(equation.params).permutation;
    if (is_identity(outer)) return x;
    const Equation* inner = producer(x);
    if (inner == nullptr || inner->prim != prim::transpose) return -1;
    const Dims& first = std::get<TransposeParams>(inner->params).permutation;
    Dims combined;
    for (int64_t axis : outer) combined.push_back(first[static_cast<size_t>(axis)]);
    VarId original = inner->inputs[0];
    if (is_identity(combined)) return original;
    return rewrite_.add_equation(prim::transpose, {original}, TransposeParams{combined},
                                 equation.site, equation.scope)[0];
  }

  bool is_full_slice(const SliceParams& p, VarId x) const {
    const Shape& shape = rewrite_.aval(x).shape;
    for (int64_t axis = 0; axis < shape.rank(); ++axis) {
      size_t i = static_cast<size_t>(axis);
      if (p.start_indices[i] != 0 || p.limit_indices[i] != shape[axis]) return false;
      if (!p.strides.empty() && p.strides[i] != 1) return false;
    }
    return true;
  }

  bool all_ones_for_and(VarId var, bool integer) {
    const ConstantFacts& f = facts(var);
    return integer ? f.all_bits_set : f.all_one;
  }

  // Zeros of type `result`: the zero constant itself when it has that type, else a rank-0
  // zero (that constant if it is one of the right type) broadcast to the result's shape,
  // so no large constant is made.
  VarId zeros(const AbstractValue& result, VarId zero, const Equation& equation) {
    if (rewrite_.aval(zero) == result) return zero;
    AbstractValue scalar_type{Shape{}, result.dtype, result.weak_type};
    VarId scalar = zero;
    if (!(rewrite_.aval(zero) == scalar_type)) {
      std::vector<std::byte> bytes(static_cast<size_t>(dtype_size(result.dtype)), std::byte{0});
      scalar =
          rewrite_.add_constant(from_host_bytes(bytes.data(), scalar_type, nullptr, equation.site));
    }
    if (result.shape.rank() == 0) return scalar;
    return rewrite_.add_equation(prim::broadcast_in_dim, {scalar},
                                 BroadcastInDimParams{result.shape, {}}, equation.site,
                                 equation.scope)[0];
  }

  const Equation* producer(VarId var) const {
    int64_t index = rewrite_.producer(var);
    return index < 0 ? nullptr : &rewrite_.draft().equations[static_cast<size_t>(index)];
  }

  const ConstantFacts& facts(VarId var) {
    auto found = facts_.find(var);
    if (found != facts_.end()) return found->second;
    return facts_.emplace(var, inspect(rewrite_.constant_value(var))).first->second;
  }

  // Whether computing `var` may raise an error at run time (an integer division by zero,
  // an index out of range in mode error, or anything inside a primitive defined by ops).
  // Eagerly such an error reaches every value computed from the failed one, so a rewrite
  // may drop an operand (x*0 = 0 drops x) only when it cannot carry one. Inputs and
  // constants are values the caller has, not errors this program raises.
  bool may_carry_error(VarId var) const { return carries_error_[static_cast<size_t>(var)]; }

  void note_new_equations() {
    const Program& draft = rewrite_.draft();
    carries_error_.resize(draft.num_vars(), false);
    for (; noted_ < draft.equations.size(); ++noted_) {
      const Equation& equation = draft.equations[noted_];
      bool carries = may_raise(equation);
      for (VarId var : equation.inputs) carries = carries || may_carry_error(var);
      for (VarId var : equation.outputs) carries_error_[static_cast<size_t>(var)] = carries;
    }
  }

  bool may_raise(const Equation& equation) const {
    const Program& draft = rewrite_.draft();
    switch (equation.prim) {
      case prim::div:
      case prim::rem:
        return !is_floating(draft.aval(equation.inputs[0]).dtype);
      case prim::gather:
        return std::get<GatherParams>(equation.params).mode == IndexMode::kError;
      case prim::scatter:
      case prim::scatter_add:
        return std::get<ScatterParams>(equation.params).mode == IndexMode::kError;
      case prim::optimization_barrier:
      case prim::checkpoint_name:
        return false;  // identities: their impl returns the operands
      default:
        return prim_def(equation.prim).impl != nullptr;
    }
  }

  ProgramRewrite rewrite_;
  std::map<VarId, ConstantFacts> facts_;  // looked up only
  std::vector<bool> carries_error_;       // per new variable
  size_t noted_ = 0;
};

}  // namespace

Program simplify_algebra(const Program& program) {
  return Simplifier(program).run();
}

}  // namespace kiln
