// kiln's transformations against JAX's (the pinned peers, docs/peers.md). Each program of
// tests/transforms/jax_programs.kp runs in f32 and in f64 through eval, jit, vmap, and,
// when it has float inputs and outputs, grad, value_and_grad, a Hessian-vector product,
// per-example gradients (vmap of grad, the first float input shared when there are two or
// more) and jit of grad. The differentiated quantity is L = sum_k sum(out_k * c_k) over the
// float outputs, with fixed weights c_k (a plain sum would make softmax's gradient zero).
// This test writes the inputs, weights and kiln's results to one JSON file;
// tests/tools/jax_transforms_check.py reads the same program file, translates each program
// to JAX, runs the same transforms and compares within the tolerances it states.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/parser.h"
#include "ir/program.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "support/peer_check.h"
#include "support/scratch_dir.h"
#include "support/source_tree.h"
#include "transforms/eval.h"
#include "transforms/jax_program_file.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
using Arrays = std::vector<Array>;

constexpr int64_t kBatch = 3;
constexpr size_t kMinPrograms = 30;

const std::string kProgramFile =
    (kiln::testing::source_dir() / "tests/transforms/jax_programs.kp").string();

// Smooth values in about [-1, 1], distinct along the flat index (no ties for max or sort);
// `salt` tells inputs, weights and tangents apart.
Array smooth(const AbstractValue& type, double salt) {
  std::vector<double> values(static_cast<size_t>(type.shape.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) {
    double x = static_cast<double>(i);
    values[i] = 0.8 * std::sin(0.37 * x + 1.1 * salt + 0.3) + 0.15 * std::cos(1.7 * x + 0.6 * salt);
  }
  return astype(from_host<double>(values, type.shape), type.dtype);
}

// Integers in [0, bound); consecutive entries differ, so up to `bound` consecutive entries
// (a row of indices) are distinct when bound is prime to 7.
Array integers(const AbstractValue& type, int64_t bound, int64_t salt) {
  std::vector<int64_t> values(static_cast<size_t>(type.shape.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = (7 * static_cast<int64_t>(i) + 3 * salt + 2) % bound;
  }
  return astype(from_host<int64_t>(values, type.shape), type.dtype);
}

// Non-finite values are written as "nan", "inf" and "-inf" (JSON has no such numbers).
json to_json(const Array& array) {
  json values = json::array();
  if (is_floating(array.dtype())) {
    for (double value : astype(array, DType::f64).to_vector<double>()) {
      if (std::isfinite(value)) {
        values.push_back(value);
      } else {
        values.push_back(std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf");
      }
    }
  } else {
    values = astype(array, DType::i64).to_vector<int64_t>();
  }
  return {{"dtype", dtype_name(array.dtype())},
          {"shape", std::vector<int64_t>(array.shape().dims().begin(), array.shape().dims().end())},
          {"values", std::move(values)}};
}

json to_json(const Arrays& arrays) {
  json list = json::array();
  for (const Array& array : arrays) list.push_back(to_json(array));
  return list;
}

// One program in one dtype: its inputs split into float (differentiated) and integer ones.
class Case {
 public:
  Case(const CrossProgram& spec, const std::string& dtype)
      : spec_(spec), program_(parse_program(with_float_dtype(spec.text, dtype))) {
    for (size_t k = 0; k < program_.inputs.size(); ++k) {
      AbstractValue type = program_.aval(program_.inputs[k]);
      bool floating = is_floating(type.dtype);
      if (!floating && spec.ints <= 0) {
        throw std::invalid_argument(
            fmt::format("{}:{}: input {} of {} is {}, so the program "
                        "needs ints=N",
                        kProgramFile, spec.line, k, spec.name, dtype_name(type.dtype)));
      }
      is_float_.push_back(floating);
      std::vector<int64_t> dims{kBatch};
      dims.insert(dims.end(), type.shape.dims().begin(), type.shape.dims().end());
      AbstractValue batched(Shape(std::span<const int64_t>(dims)), type.dtype);
      double salt = static_cast<double>(k);
      (floating ? floats_ : ints_)
          .push_back(floating ? smooth(type, salt) : integers(type, spec.ints, k));
      (floating ? batched_floats_ : batched_ints_)
          .push_back(floating ? smooth(batched, salt + 7) : integers(batched, spec.ints, k + 5));
      if (floating) tangents_.push_back(smooth(type, salt + 13));
    }
    bool float_output = false;
    for (VarId output : program_.outputs) {
      AbstractValue type = program_.aval(output);
      bool floating = is_floating(type.dtype);
      float_output = float_output || floating;
      weights_.push_back(floating ? smooth(type, 20.0 + static_cast<double>(weights_.size()))
                                  : Array());
    }
    differentiable_ = !spec.nograd && !floats_.empty() && float_output;
    // Forward mode also goes through the nograd programs (while loops, sort): JAX's jvp
    // differentiates them.
    forward_ = !floats_.empty() && float_output;
  }

  json record() const {
    json record = {{"name", spec_.name},
                   {"differentiable", differentiable_},
                   {"forward", forward_},
                   {"inputs", to_json(assemble(floats_, ints_))},
                   {"batched_inputs", to_json(assemble(batched_floats_, batched_ints_))},
                   {"tangents", to_json(tangents_)},
                   {"shared", shared_count()},
                   {"vmap_shared", vmap_shared()}};
    json weights = json::array();
    for (const Array& weight : weights_)
      weights.push_back(weight.defined() ? to_json(weight) : json());
    record["weights"] = weights;
    json& results = record["results"];
    attempt(results, "eval", [&] { return to_json(run(floats_, ints_)); });
    attempt(results, "jit", [&] { return to_json(jit(runner())(floats_, ints_)); });
    attempt(results, "vmap", [&] {
      return to_json(vmap(runner(), {0, 0})(batched_floats_, batched_ints_));
    });
    // The same with the first float input not mapped, which reaches the batching rules'
    // cases of a batched operand beside an unbatched one (an unbatched gather operand with
    // batched indices, ...).
    if (vmap_shared()) {
      attempt(results, "vmap_shared", [&] {
        auto split = [this](const Arrays& head, const Arrays& tail, const Arrays& ints) {
          Arrays floats = head;
          floats.insert(floats.end(), tail.begin(), tail.end());
          return run(floats, ints);
        };
        Arrays head{floats_.front()};
        Arrays tail(batched_floats_.begin() + 1, batched_floats_.end());
        return to_json(vmap(split, {kNotMapped, 0, 0})(head, tail, batched_ints_));
      });
    }
    if (forward_) {
      // The tangents of the float outputs along tangents_.
      attempt(results, "jvp", [&] {
        auto run_floats = [this](const Arrays& floats) { return run(floats, ints_); };
        Arrays out = jvp(run_floats, std::tuple{floats_}, std::tuple{tangents_}).second;
        return to_json(float_outputs(out));
      });
    }
    if (!differentiable_) return record;
    auto loss = [this](const Arrays& floats, const Arrays& ints) {
      return this->loss(floats, ints);
    };
    attempt(results, "grad", [&] { return to_json(grad(loss)(floats_, ints_)); });
    attempt(results, "value_and_grad", [&] {
      auto [value, gradient] = value_and_grad(loss)(floats_, ints_);
      return json{{"value", to_json(value)}, {"grad", to_json(gradient)}};
    });
    attempt(results, "hvp", [&] {
      auto directional = [&](const Arrays& floats, const Arrays& ints) {
        Arrays gradient = grad(loss)(floats, ints);
        Array total = scalar(0.0, floats.front().dtype());
        for (size_t i = 0; i < gradient.size(); ++i)
          total = total + sum(gradient[i] * tangents_[i]);
        return total;
      };
      return to_json(grad(directional)(floats_, ints_));
    });
    // The same Hessian-vector product by forward over reverse, as jax.hessian computes.
    attempt(results, "hvp_forward", [&] {
      auto gradient = [&](const Arrays& floats) { return grad(loss)(floats, ints_); };
      return to_json(jvp(gradient, std::tuple{floats_}, std::tuple{tangents_}).second);
    });
    attempt(results, "per_example_grad", [&] {
      size_t shared = shared_count();
      auto split = [loss](const Arrays& head, const Arrays& tail, const Arrays& ints) {
        Arrays floats = head;
        floats.insert(floats.end(), tail.begin(), tail.end());
        return loss(floats, ints);
      };
      Arrays head(floats_.begin(), floats_.begin() + static_cast<std::ptrdiff_t>(shared));
      Arrays tail(batched_floats_.begin() + static_cast<std::ptrdiff_t>(shared),
                  batched_floats_.end());
      auto [head_grads, tail_grads] =
          vmap(grad<0, 1>(split), {kNotMapped, 0, 0})(head, tail, batched_ints_);
      Arrays all = head_grads;
      all.insert(all.end(), tail_grads.begin(), tail_grads.end());
      return to_json(all);
    });
    attempt(results, "jit_grad", [&] { return to_json(jit(grad(loss))(floats_, ints_)); });
    return record;
  }

 private:
  // Per-example gradients keep the first float input unmapped (like a model's parameters)
  // when there is another to map.
  size_t shared_count() const { return floats_.size() >= 2 ? 1 : 0; }
  // vmap needs a mapped input besides the shared one.
  bool vmap_shared() const { return !floats_.empty() && floats_.size() + ints_.size() >= 2; }

  Arrays float_outputs(const Arrays& outputs) const {
    Arrays floats;
    for (const Array& output : outputs) {
      if (is_floating(output.dtype())) floats.push_back(output);
    }
    return floats;
  }

  Arrays assemble(const Arrays& floats, const Arrays& ints) const {
    Arrays inputs;
    size_t next_float = 0;
    size_t next_int = 0;
    for (bool floating : is_float_)
      inputs.push_back(floating ? floats[next_float++] : ints[next_int++]);
    return inputs;
  }

  Arrays run(const Arrays& floats, const Arrays& ints) const {
    return eval_program(program_, assemble(floats, ints), {});
  }

  std::function<Arrays(const Arrays&, const Arrays&)> runner() const {
    return [this](const Arrays& floats, const Arrays& ints) { return run(floats, ints); };
  }

  Array loss(const Arrays& floats, const Arrays& ints) const {
    Arrays outputs = run(floats, ints);
    Array total = scalar(0.0, floats.front().dtype());
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (weights_[k].defined()) total = total + sum(outputs[k] * weights_[k]);
    }
    return total;
  }

  // A transform that raises is a failure here and an entry the script reports.
  void attempt(json& results, const std::string& transform, const std::function<json()>& fn) const {
    try {
      results[transform] = fn();
    } catch (const std::exception& error) {
      ADD_FAILURE() << spec_.name << " " << transform << ": kiln raised: " << error.what();
      results[transform] = {{"error", error.what()}};
    }
  }

  CrossProgram spec_;
  Program program_;
  std::vector<bool> is_float_;
  Arrays floats_, ints_, batched_floats_, batched_ints_, tangents_, weights_;
  bool differentiable_ = false;
  bool forward_ = false;
};

// The error read_cross_programs raises for a file holding `text`.
std::string program_file_error(const std::string& text) {
  ScratchDir dir;
  std::ofstream(dir / "bad.kp") << text;
  try {
    read_cross_programs((dir / "bad.kp").string());
  } catch (const std::invalid_argument& error) {
    std::string message = error.what();
    return message.substr(message.find("bad.kp"));
  }
  return "no error";
}

TEST(JaxCrosscheck, BadProgramFilesAreErrorsNamingTheLine) {
  EXPECT_EQ(program_file_error("# header\n{ lambda ; a:f32[]. let in (a) }\n"),
            "bad.kp:2: expected 'program NAME' before program text");
  EXPECT_EQ(program_file_error("program p ints=3 nograd fast\n"),
            "bad.kp:1: unknown flag 'fast' (expected ints=N or nograd)");
  EXPECT_EQ(program_file_error("program p ints=x3\n"),
            "bad.kp:1: ints=x3 is not ints=N with N a positive integer");
  EXPECT_EQ(program_file_error("program p\n{ lambda ; . let in () }\nprogram p\n"),
            "bad.kp:3: program p is defined twice (first at line 1)");
  EXPECT_THAT(program_file_error(""), ::testing::StrEq("no error"));
}

TEST(JaxCrosscheck, TransformationsOfEveryProgramMatchJax) {
  std::vector<CrossProgram> programs = read_cross_programs(kProgramFile);
  ASSERT_GE(programs.size(), kMinPrograms) << kProgramFile;
  json record = {{"program_file", kProgramFile}, {"batch", kBatch}};
  for (const std::string dtype : {"f32", "f64"}) {
    for (const CrossProgram& spec : programs) {
      SCOPED_TRACE(fmt::format("{} ({}, {}:{})", spec.name, dtype, kProgramFile, spec.line));
      try {
        json entry = Case(spec, dtype).record();
        entry["dtype"] = dtype;
        record["cases"].push_back(entry);
      } catch (const std::exception& error) {
        ADD_FAILURE() << spec.name << ": " << error.what();
      }
    }
  }
  PeerReport peer = run_peer_check("jax_transforms_check.py", record);
  EXPECT_EQ(peer.status, 0) << peer.text;
  EXPECT_THAT(peer.text, ::testing::HasSubstr(" 0 failed")) << peer.text;
  std::cout << peer.text;
}

}  // namespace
}  // namespace kiln::testing
