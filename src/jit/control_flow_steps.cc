// Control flow inside an executable: scan, cond and while_loop run their sub-programs as
// compiled executables, synchronously on the device thread, over buffers of this step.
// Carries live in two host buffers that swap roles each iteration, so a body never
// writes over a value it is still reading.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "jit/executable.h"
#include "prims/ids/control_flow.h"

namespace kiln::detail {
namespace {

// Owned copies of a list of values (a carry), laid out one after another.
class CarryBuffers {
 public:
  explicit CarryBuffers(const std::vector<int64_t>& sizes) {
    int64_t total = 0;
    for (int64_t size : sizes) {
      offsets_.push_back(total);
      total += (size + 63) / 64 * 64;
    }
    storage_.resize(static_cast<size_t>(total) + 64);
    sizes_ = sizes;
  }
  std::byte* at(size_t i) {
    auto base = reinterpret_cast<uintptr_t>(storage_.data());
    return reinterpret_cast<std::byte*>((base + 63) / 64 * 64) + offsets_[i];
  }
  void fill_from(std::span<const std::byte* const> values) {
    for (size_t i = 0; i < sizes_.size(); ++i) copy(at(i), values[i], sizes_[i]);
  }
  void copy_to(std::span<std::byte* const> values) {
    for (size_t i = 0; i < sizes_.size(); ++i) copy(values[i], at(i), sizes_[i]);
  }
  size_t size() const { return sizes_.size(); }

 private:
  static void copy(std::byte* to, const std::byte* from, int64_t bytes) {
    if (bytes > 0) std::memcpy(to, from, static_cast<size_t>(bytes));
  }
  std::vector<std::byte> storage_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> sizes_;
};

std::vector<int64_t> byte_sizes(const Program& program, std::span<const VarId> vars) {
  std::vector<int64_t> sizes;
  for (VarId var : vars) sizes.push_back(program.aval(var).size_bytes());
  return sizes;
}

void run_scan(const ScanParams& p, const Executable& body,
              std::span<const std::byte* const> operands, std::span<std::byte* const> results,
              ComputePool& pool) {
  const Program& program = body.program();
  const auto consts = static_cast<size_t>(p.num_consts);
  const auto carries = static_cast<size_t>(p.num_carry);
  const size_t xs = operands.size() - consts - carries;
  const size_t ys = results.size() - carries;
  // Bytes of one step's slice of each x and y (the body's x inputs and y outputs).
  std::vector<int64_t> x_bytes, y_bytes;
  for (size_t i = 0; i < xs; ++i)
    x_bytes.push_back(program.aval(program.inputs[consts + carries + i]).size_bytes());
  for (size_t i = 0; i < ys; ++i)
    y_bytes.push_back(program.aval(program.outputs[carries + i]).size_bytes());
  std::vector<int64_t> carry_bytes =
      byte_sizes(program, std::span<const VarId>(program.inputs).subspan(consts, carries));
  CarryBuffers current(carry_bytes), next(carry_bytes);
  current.fill_from(operands.subspan(consts, carries));
  std::vector<const std::byte*> inputs(operands.begin(), operands.end());
  std::vector<std::byte*> outputs(carries + ys);
  CarryBuffers* in = &current;
  CarryBuffers* out = &next;
  for (int64_t t = 0; t < p.length; ++t) {
    const int64_t step = p.reverse ? p.length - 1 - t : t;
    for (size_t i = 0; i < carries; ++i) {
      inputs[consts + i] = in->at(i);
      outputs[i] = out->at(i);
    }
    for (size_t i = 0; i < xs; ++i)
      inputs[consts + carries + i] = operands[consts + carries + i] + step * x_bytes[i];
    for (size_t i = 0; i < ys; ++i) outputs[carries + i] = results[carries + i] + step * y_bytes[i];
    body.execute_into(inputs, outputs, pool);
    std::swap(in, out);
  }
  in->copy_to(results.subspan(0, carries));
}

void run_cond(const Executable* const* branches, size_t count,
              std::span<const std::byte* const> operands, std::span<std::byte* const> results,
              ComputePool& pool) {
  int32_t index = 0;
  std::memcpy(&index, operands[0], sizeof(index));
  index = std::clamp<int32_t>(index, 0, static_cast<int32_t>(count) - 1);
  branches[index]->execute_into(operands.subspan(1), results, pool);
}

void run_while(const WhileParams& p, const Executable& cond, const Executable& body,
               std::span<const std::byte* const> operands, std::span<std::byte* const> results,
               ComputePool& pool) {
  const auto cond_consts = static_cast<size_t>(p.cond_num_consts);
  const auto body_consts = static_cast<size_t>(p.body_num_consts);
  const size_t carries = operands.size() - cond_consts - body_consts;
  const Program& program = body.program();
  std::vector<int64_t> carry_bytes =
      byte_sizes(program, std::span<const VarId>(program.inputs).subspan(body_consts, carries));
  CarryBuffers current(carry_bytes), next(carry_bytes);
  current.fill_from(operands.subspan(cond_consts + body_consts, carries));
  std::vector<const std::byte*> cond_inputs(
      operands.begin(), operands.begin() + static_cast<std::ptrdiff_t>(cond_consts));
  cond_inputs.resize(cond_consts + carries);
  std::vector<const std::byte*> body_inputs(
      operands.begin() + static_cast<std::ptrdiff_t>(cond_consts),
      operands.begin() + static_cast<std::ptrdiff_t>(cond_consts + body_consts));
  body_inputs.resize(body_consts + carries);
  std::vector<std::byte*> body_outputs(carries);
  bool go = false;
  std::byte* go_out[1] = {reinterpret_cast<std::byte*>(&go)};
  CarryBuffers* in = &current;
  CarryBuffers* out = &next;
  while (true) {
    for (size_t i = 0; i < carries; ++i) cond_inputs[cond_consts + i] = in->at(i);
    cond.execute_into(cond_inputs, go_out, pool);
    if (!go) break;
    for (size_t i = 0; i < carries; ++i) {
      body_inputs[body_consts + i] = in->at(i);
      body_outputs[i] = out->at(i);
    }
    body.execute_into(body_inputs, body_outputs, pool);
    std::swap(in, out);
  }
  in->copy_to(results);
}

}  // namespace

void Executable::run_control_flow(const Equation& equation, const SubExecutables& subs,
                                  std::span<const std::byte* const> operands,
                                  std::span<std::byte* const> results, ComputePool& pool) {
  switch (equation.prim) {
    case prim::scan:
      return run_scan(std::get<ScanParams>(equation.params), *subs[0], operands, results, pool);
    case prim::cond: {
      std::vector<const Executable*> branches;
      for (const auto& sub : subs) branches.push_back(sub.get());
      return run_cond(branches.data(), branches.size(), operands, results, pool);
    }
    case prim::while_loop:
      return run_while(std::get<WhileParams>(equation.params), *subs[0], *subs[1], operands,
                       results, pool);
    default:
      KILN_CHECK(false, "jit: {} is not a control-flow primitive", prim_name(equation.prim));
  }
}

std::vector<std::shared_ptr<const Program>> control_flow_sub_programs(const Equation& equation) {
  switch (equation.prim) {
    case prim::scan:
      return {std::get<ScanParams>(equation.params).body.program};
    case prim::cond: {
      std::vector<std::shared_ptr<const Program>> branches;
      for (const ProgramRef& branch : std::get<CondParams>(equation.params).branches) {
        branches.push_back(branch.program);
      }
      return branches;
    }
    case prim::while_loop: {
      const auto& p = std::get<WhileParams>(equation.params);
      return {p.cond.program, p.body.program};
    }
    default:
      return {};
  }
}

}  // namespace kiln::detail
