// A tiny two-layer MLP, traced: the forward loss and its gradient printed as programs
// (like jax.make_jaxpr(loss) and jax.make_jaxpr(jax.grad(loss))), with one named scope per
// layer so that every equation says where it came from. Parameters are a Tree initialised
// from random keys. The gradient is then checked against finite differences in f64 with
// kiln::check_grads; the example exits non-zero if the check fails.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <iostream>

using namespace kiln;

namespace {

// A kernel of variance 1 / fan_in (LeCun; flax.linen.Dense truncates the normal) and a
// zero bias.
Tree dense_init(const Array& key, int64_t in, int64_t out) {
  Array kernel = random::normal(key, {in, out}) * (1.0 / std::sqrt(static_cast<double>(in)));
  return Tree::dict({{"kernel", kernel}, {"bias", zeros({out})}});
}

Array dense(const Tree& layer, const Array& x) {
  return matmul(x, layer["kernel"].leaf()) + layer["bias"].leaf();
}

Array mlp(const Tree& params, const Array& x) {
  auto scope = named_scope("mlp");
  Array hidden;
  {
    auto layer = named_scope("dense1");
    hidden = tanh(dense(params["dense1"], x));
  }
  auto layer = named_scope("dense2");
  return dense(params["dense2"], hidden);
}

Array loss(const Tree& params, const Array& x, const Array& y) {
  Array error = mlp(params, x) - y;
  return mean(error * error);
}

}  // namespace

int main() {
  Array keys = random::split(random::key(0), 4);
  Tree params = Tree::dict({{"dense1", dense_init(random::key_at(keys, 0), 3, 4)},
                            {"dense2", dense_init(random::key_at(keys, 1), 4, 2)}});
  Array x = random::normal(random::key_at(keys, 2), {8, 3});
  Array y = random::normal(random::key_at(keys, 3), {8, 2});
  std::cout << "params: " << params << "\n\n";

  std::cout << "make_program(loss, params, x, y):\n" << make_program(loss, params, x, y) << "\n\n";
  std::cout << "make_program(grad(loss), params, x, y):\n"
            << make_program(grad(loss), params, x, y) << "\n\n";

  auto [value, grads] = value_and_grad(loss)(params, x, y);
  std::printf("loss %.6f\n", value.item<float>());
  for (const auto& [path, g] : grads.leaves_with_paths()) {
    std::printf("  d loss / d %-14s %s\n", path.c_str(), g.aval().to_string().c_str());
  }

  // Finite differences need f64 to be accurate, so the check runs on f64 copies of
  // everything; order 2 also checks the gradient of the gradient.
  auto to_f64 = [](const Array& a) { return astype(a, DType::f64); };
  try {
    check_grads(loss, std::tuple{tree_map(to_f64, params), to_f64(x), to_f64(y)}, {.order = 2});
  } catch (const Error& error) {
    std::printf("\nFAILED: %s\n", error.what());
    return 1;
  }
  std::printf("\ncheck_grads (f64, order 2): OK\n");
  return 0;
}
