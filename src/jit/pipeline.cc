// The pass pipeline and the IR dumps (see pipeline.h).
#include "jit/pipeline.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "prims/bind.h"
#include "prims/ids/custom.h"
#include "transforms/eval.h"
#include "transforms/passes/passes.h"
#include "transforms/trace.h"

namespace kiln::detail {
namespace {

// Records every primitive into `trace`, except custom calls, which it runs through their
// impl rule (the forward function's ops, which come back here and are recorded).
class InliningInterpreter final : public Interpreter {
 public:
  explicit InliningInterpreter(TraceContext& trace) : trace_(trace) {}
  std::vector<Array> apply(const PrimDef& prim, std::span<const Array> inputs, const Params& params,
                           std::vector<AbstractValue> out_avals, CallSite site) override {
    if (prim.id == prim::custom_vjp_call) return prim.impl(inputs, params, site);
    return trace_.apply(prim, inputs, params, std::move(out_avals), site);
  }

 private:
  TraceContext& trace_;
};

bool has_custom_calls(const Program& program) {
  for (const Equation& equation : program.equations) {
    if (equation.prim == prim::custom_vjp_call) return true;
  }
  return false;
}

}  // namespace

IrDumper::IrDumper(const std::string& name) {
  const char* directory = std::getenv("KILN_DUMP_IR");
  if (directory == nullptr || *directory == '\0') return;
  directory_ = directory;
  static std::atomic<int> compilations{0};
  prefix_ = fmt::format("{}.{}", name, compilations.fetch_add(1));
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error) {
    fail(kUnknownSite,
         fmt::format("KILN_DUMP_IR={}: cannot create the directory: {}", directory_,
                     error.message()),
         "set KILN_DUMP_IR to a directory kiln can create and write, or unset it");
  }
}

void IrDumper::write(const std::string& stage, const std::string& text) {
  if (!enabled()) return;
  std::filesystem::path path =
      std::filesystem::path(directory_) / fmt::format("{}.{:02}.{}.txt", prefix_, next_++, stage);
  std::ofstream out(path);
  out << text;
  if (!out) {
    fail(kUnknownSite, fmt::format("KILN_DUMP_IR: cannot write {}", path.string()),
         "check that the directory is writable and the disk is not full");
  }
}

std::string IrDumper::path_of(const std::string& stage) const {
  if (!enabled()) return "";
  return (std::filesystem::path(directory_) / fmt::format("{}.{}.txt", prefix_, stage)).string();
}

Program inline_custom_calls(const Program& program) {
  if (!has_custom_calls(program)) return program;
  TraceContext trace;
  std::vector<Array> inputs;
  for (VarId input : program.inputs) inputs.push_back(trace.new_input(program.aval(input)));
  std::vector<Array> outputs;
  {
    InliningInterpreter inliner(trace);
    InterpreterScope scope(inliner);
    outputs = eval_program(program, inputs, kUnknownSite);
  }
  return trace.finish(outputs, kUnknownSite);
}

Program optimize(const Program& input, IrDumper& dumper, bool fuse) {
  dumper.write("traced", print_program(input, {.show_scopes = true}));
  Program program = input;
  auto stage = [&](const char* name, auto&& pass) {
    program = pass(program);
    if (dumper.enabled()) {
      verify(program);
      dumper.write(name, print_program(program, {.show_scopes = true}));
    }
  };
  stage("inline_custom_calls", inline_custom_calls);
  // Folding first, so that simplification sees the constants it creates (x * (1 + 0)).
  stage("fold_constants", [](const Program& p) { return fold_constants(p); });
  stage("simplify_algebra", simplify_algebra);
  stage("eliminate_common_subexpressions", eliminate_common_subexpressions);
  stage("merge_scans", merge_scans);
  stage("eliminate_dead_code", eliminate_dead_code);
  if (fuse) stage("clone_broadcasts", clone_broadcasts);
  return program;
}

}  // namespace kiln::detail
