// Hessian-vector products two ways, neither forming H. Reverse over reverse: H v is the
// gradient of the directional derivative x -> <grad f(x), v>, as in
//   hvp = lambda x, v: jax.grad(lambda y: jnp.vdot(jax.grad(f)(y), v))(x)
// Forward over reverse: H v is the directional derivative of the gradient along v, as in
//   hvp = lambda x, v: jax.jvp(jax.grad(f), (x,), (v,))[1]
// which JAX recommends (one forward pass over the backward pass). The example uses the Rosenbrock
// function, whose Hessian is known in closed form, and also compares with central finite
// differences of gradients; it exits non-zero on a mismatch.
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

using namespace kiln;

namespace {

constexpr int64_t kSize = 6;

// Rosenbrock: sum_i 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2, i = 0 .. n-2.
Array rosenbrock(const Array& x) {
  Array head = slice(x, {0}, {kSize - 1});
  Array tail = slice(x, {1}, {kSize});
  Array valley = tail - head * head;
  return sum(100.0 * valley * valley + (1.0 - head) * (1.0 - head));
}

// The Hessian of rosenbrock at x by hand: tridiagonal, row-major n x n.
std::vector<double> rosenbrock_hessian(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<double> h(n * n, 0.0);
  for (size_t i = 0; i + 1 < n; ++i) {
    // Term i depends on x[i] and x[i+1] only.
    h[i * n + i] += 1200 * x[i] * x[i] - 400 * x[i + 1] + 2;
    h[i * n + i + 1] += -400 * x[i];
    h[(i + 1) * n + i] += -400 * x[i];
    h[(i + 1) * n + i + 1] += 200;
  }
  return h;
}

}  // namespace

int main() {
  auto hvp = [](const Array& x, const Array& v) {
    return grad([&](const Array& y) { return sum(grad(rosenbrock)(y) * v); })(x);
  };

  Array x = from_host<double>({-1.2, 1.0, 0.5, 0.8, 1.1, 0.3}, {kSize});
  Array v = from_host<double>({1.0, -0.5, 0.25, 2.0, 0.0, -1.0}, {kSize});
  std::vector<double> hv = hvp(x, v).to_vector<double>();
  auto gradient = [](const Array& y) { return grad(rosenbrock)(y); };
  std::vector<double> hv_forward =
      jvp(gradient, std::tuple{x}, std::tuple{v}).second.to_vector<double>();

  std::vector<double> xs = x.to_vector<double>(), vs = v.to_vector<double>();
  std::vector<double> h = rosenbrock_hessian(xs);
  std::vector<double> exact(kSize, 0.0);
  for (size_t i = 0; i < kSize; ++i) {
    for (size_t j = 0; j < kSize; ++j) exact[i] += h[i * kSize + j] * vs[j];
  }

  // (grad f(x + eps v) - grad f(x - eps v)) / (2 eps): error O(eps^2) from the third
  // derivative, plus O(1e-16 / eps) rounding, both far below the tolerance at eps = 1e-5.
  const double eps = 1e-5;
  std::vector<double> plus = grad(rosenbrock)(x + eps * v).to_vector<double>();
  std::vector<double> minus = grad(rosenbrock)(x - eps * v).to_vector<double>();

  std::printf("f = rosenbrock, n = %lld\nx:\n%s\nv:\n%s\n\n", static_cast<long long>(kSize),
              x.to_string().c_str(), v.to_string().c_str());
  std::printf("%3s %16s %16s %16s %16s\n", "i", "grad of grad", "jvp of grad", "analytic H v",
              "finite diff.");
  double worst_exact = 0, worst_fd = 0;
  for (size_t i = 0; i < kSize; ++i) {
    double fd = (plus[i] - minus[i]) / (2 * eps);
    std::printf("%3zu %16.9f %16.9f %16.9f %16.9f\n", i, hv[i], hv_forward[i], exact[i], fd);
    double scale = 1 + std::fabs(exact[i]);
    worst_exact = std::max({worst_exact, std::fabs(hv[i] - exact[i]) / scale,
                            std::fabs(hv_forward[i] - exact[i]) / scale});
    worst_fd = std::max(worst_fd, std::fabs(hv[i] - fd) / scale);
  }

  const double exact_tolerance = 1e-12, fd_tolerance = 1e-6;
  std::printf(
      "\nlargest relative difference: analytic %.3g (tolerance %g), finite differences "
      "%.3g (tolerance %g)\n",
      worst_exact, exact_tolerance, worst_fd, fd_tolerance);
  if (!(worst_exact <= exact_tolerance && worst_fd <= fd_tolerance)) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
