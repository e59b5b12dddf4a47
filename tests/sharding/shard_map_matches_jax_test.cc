// shard_map and the collectives against JAX's shard_map on 4 CPU devices (the pinned peers,
// docs/peers.md). Each case of spmd_cases.h (and a data-parallel loss) is traced into
// kiln's program text, which tests/tools/jax_shard_map_check.py turns into a JAX function
// (jax.shard_map over lax's collectives): the program is written once, in C++, and both
// sides run its text. kiln's results of eval, jit, vmap and grad go with it, in f32 and f64.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/tracing.h"
#include "kiln/vmap.h"
#include "sharding/spmd_cases.h"
#include "support/peer_check.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
using Inputs = std::vector<Array>;
using Function = std::function<Array(const Inputs&)>;

json to_json(const Array& array) {
  json values = json::array();
  for (double value : values_of(array)) {
    if (std::isfinite(value)) {
      values.push_back(value);
    } else {
      values.push_back(std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf");
    }
  }
  return {{"dtype", dtype_name(array.dtype())},
          {"shape", std::vector<int64_t>(array.shape().dims().begin(), array.shape().dims().end())},
          {"values", values}};
}

json to_json(const Inputs& arrays) {
  json list = json::array();
  for (const Array& array : arrays) list.push_back(to_json(array));
  return list;
}

// n examples of `inputs` stacked on a new axis 0, each shifted by its index.
Inputs batched(const Inputs& inputs, int64_t n) {
  Inputs out;
  for (const Array& input : inputs) {
    Inputs examples;
    for (int64_t e = 0; e < n; ++e) examples.push_back(input + static_cast<double>(e) * 0.125);
    out.push_back(stack(examples, 0));
  }
  return out;
}

json record_of(const std::string& name, const Function& f, const Inputs& inputs) {
  Array weight = numbered(f(inputs).shape(), inputs[0].dtype()) * 0.1 + 0.5;
  auto loss = [&](const Inputs& in) { return (f(in) * weight).sum(); };
  Inputs xs = batched(inputs, 3);
  json record = {{"name", name},
                 {"dtype", dtype_name(inputs[0].dtype())},
                 {"program", make_program(f, inputs).to_string()},
                 {"inputs", to_json(inputs)},
                 {"batched_inputs", to_json(xs)},
                 {"weight", to_json(weight)}};
  record["results"] = {{"eval", to_json(f(inputs))},
                       {"jit", to_json(jit(f)(inputs))},
                       {"vmap", to_json(vmap(f)(xs))},
                       {"grad", to_json(grad(loss)(inputs))}};
  return record;
}

TEST(ShardMapMatchesJax, CollectivesAndADataParallelLoss) {
  json record = {{"cases", json::array()}};
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const CollectiveCase& c : collective_cases()) {
      Function f = [&c](const Inputs& in) {
        return run1(unary(c.body), c.mesh, c.in, c.out, in[0]);
      };
      record["cases"].push_back(record_of(c.name, f, {numbered(c.x_shape, dtype) * 0.3 - 1.1}));
    }
    Function dp = [](const Inputs& in) { return sharded_loss(in[0], in[1]); };
    record["cases"].push_back(
        record_of("data_parallel_loss", dp,
                  {numbered(Shape{3, 2}, dtype) * 0.1, numbered(Shape{8, 3}, dtype) * 0.05 - 0.4}));
  }
  PeerReport report = run_peer_check("jax_shard_map_check.py", record);
  EXPECT_EQ(report.status, 0) << report.text;
  std::cout << report.text;
}

}  // namespace
}  // namespace kiln::testing
