// What the shard_map tests share: small arrays, the meshes of 4 logical devices, and each
// collective in a small body with the specs that make its result well defined (the same
// cases are checked against finite differences, vmap and JAX's shard_map).
#pragma once

#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/ops.h"
#include "kiln/sharding.h"

namespace kiln::testing {

// 0, 1, 2, ... in `shape`, as f32 (or f64).
inline Array numbered(const Shape& shape, DType dtype = DType::f32) {
  std::vector<double> values(static_cast<size_t>(shape.num_elements()));
  std::iota(values.begin(), values.end(), 0.0);
  return from_host<double>(values, shape).astype(dtype);
}

inline std::vector<double> values_of(const Array& x) {
  return x.astype(DType::f64).to_vector<double>();
}

inline Mesh line() {
  return Mesh({{"data", 4}});
}
inline Mesh grid() {
  return Mesh({{"data", 2}, {"model", 2}});
}

// One argument, one result.
inline SpmdFunction unary(std::function<Array(const Array&)> f) {
  return
      [f = std::move(f)](const std::vector<Array>& args) { return std::vector<Array>{f(args[0])}; };
}

inline Array run1(SpmdFunction f, const Mesh& mesh, PartitionSpec in, PartitionSpec out,
                  const Array& x) {
  return shard_map(std::move(f), mesh, {std::move(in)}, {std::move(out)})({x})[0];
}

// Each collective in a small body, with the specs that make its result well defined and
// the shape of its argument (on line(): 4 devices over "data").
struct CollectiveCase {
  std::string name;
  Mesh mesh;
  std::function<Array(const Array&)> body;
  PartitionSpec in, out;
  Shape x_shape;
};

inline std::vector<CollectiveCase> collective_cases() {
  return {
      {"psum",
       line(),
       [](const Array& b) { return psum(b * b, "data"); },
       {{"data"}},
       {},
       Shape{8}},
      {"pmean",
       line(),
       [](const Array& b) { return pmean(sin(b), "data"); },
       {{"data"}},
       {},
       Shape{8}},
      {"pmax",
       line(),
       [](const Array& b) { return pmax(b * b, "data"); },
       {{"data"}},
       {},
       Shape{8}},
      {"all_gather",
       line(),
       [](const Array& b) { return all_gather(b, "data") * all_gather(b, "data"); },
       {{"data"}},
       {},
       Shape{8}},
      {"all_gather_tiled",
       line(),
       [](const Array& b) { return sin(all_gather(b, "data", 0, true)); },
       {{"data"}},
       {},
       Shape{8}},
      {"psum_scatter",
       line(),
       [](const Array& b) { return psum_scatter(sin(b), "data", 0, true); },
       {},
       {{"data"}},
       Shape{8}},
      {"psum_scatter_untiled",
       line(),
       [](const Array& b) { return psum_scatter(b * b, "data"); },
       {},
       {{"data"}},
       Shape{4, 2}},
      {"all_to_all",
       line(),
       [](const Array& b) { return all_to_all(b * b, "data", 1, 0); },
       {{"data"}, {}},
       {{}, {"data"}},
       Shape{8, 4}},
      {"ppermute",
       line(),
       [](const Array& b) {
         return ppermute(b * b, "data", {{0, 1}, {1, 3}, {3, 0}});
       },
       {{"data"}},
       {{"data"}},
       Shape{8}},
      // On the 2 x 2 grid: reductions over one axis and over both, an index over both, and
      // a permutation over both axes named in the reverse of the mesh's order (JAX numbers
      // its devices in the mesh's order).
      {"ppermute_axes_reversed",
       grid(),
       [](const Array& b) {
         return ppermute(b * b, AxisNames{"model", "data"}, {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
       },
       {{"data", "model"}},
       {{"data", "model"}},
       Shape{8}},
      {"psum_model",
       grid(),
       [](const Array& b) { return psum(sin(b), "model"); },
       {{"data"}, {"model"}},
       {{"data"}, {}},
       Shape{4, 2}},
      {"pmean_both",
       grid(),
       [](const Array& b) {
         return pmean(b * b, AxisNames{"data", "model"});
       },
       {{"data"}, {"model"}},
       {},
       Shape{4, 2}},
      {"all_gather_model",
       grid(),
       [](const Array& b) { return sin(all_gather(b, "model", 1, true)); },
       {{"data"}, {"model"}},
       {{"data"}, {}},
       Shape{4, 2}},
      {"axis_index_both",
       grid(),
       [](const Array& b) {
         return b * axis_index(AxisNames{"data", "model"}).astype(b.dtype());
       },
       {{"data", "model"}},
       {{"data", "model"}},
       Shape{8}},
  };
}

// A data-parallel loss: each device's rows through a shared weight, the squared error
// averaged over all devices.
inline Array sharded_loss(const Array& w, const Array& x) {
  SpmdFunction body = [](const std::vector<Array>& args) {
    Array local = (tanh(matmul(args[1], args[0])) * tanh(matmul(args[1], args[0]))).mean();
    return std::vector<Array>{pmean(local, "data")};
  };
  return shard_map(body, line(), {{}, {{"data"}, {}}}, {{}})({w, x})[0];
}

}  // namespace kiln::testing
