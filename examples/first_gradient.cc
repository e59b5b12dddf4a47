// First gradient: kiln::grad turns a function of an Array into the function computing its
// derivative, as jax.grad does in
//   f = lambda x: jnp.sin(x) * x**2;  df = jax.grad(f);  d2f = jax.grad(jax.grad(f))
// The example compares both with the derivatives worked out by hand and exits non-zero if
// they disagree.
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

using namespace kiln;

int main() {
  // grad needs a function returning a scalar float Array; f64 keeps the comparison tight.
  auto f = [](const Array& x) { return sin(x) * x * x; };
  auto df = grad(f);
  auto d2f = grad(df);

  auto df_by_hand = [](double x) { return std::cos(x) * x * x + 2 * x * std::sin(x); };
  auto d2f_by_hand = [](double x) { return (2 - x * x) * std::sin(x) + 4 * x * std::cos(x); };

  std::printf("f(x) = sin(x) x^2\n\n");
  std::printf("%6s %12s %12s %12s %12s\n", "x", "f(x)", "grad f", "by hand", "grad grad f");
  double worst = 0;
  for (double x0 : {-2.0, -0.5, 0.0, 1.0, 1.5, 3.0}) {
    Array x = scalar(x0, DType::f64);
    double value = f(x).item<double>();
    double first = df(x).item<double>();
    double second = d2f(x).item<double>();
    std::printf("%6.2f %12.6f %12.6f %12.6f %12.6f\n", x0, value, first, df_by_hand(x0), second);
    worst =
        std::max({worst, std::fabs(first - df_by_hand(x0)), std::fabs(second - d2f_by_hand(x0))});
  }

  // Elementwise derivatives of a whole vector at once: the gradient of sum(f(x)), since
  // each output depends only on its own input (jax.grad(lambda x: jnp.sum(f(x)))).
  Array xs = linspace(-3, 3, 7, DType::f64);
  Array dxs = grad([&](const Array& x) { return sum(f(x)); })(xs);
  std::printf("\nx:\n%s\ngrad of sum(f(x)):\n%s\n", xs.to_string().c_str(),
              dxs.to_string().c_str());
  std::vector<double> points = xs.to_vector<double>(), slopes = dxs.to_vector<double>();
  for (size_t i = 0; i < points.size(); ++i) {
    worst = std::max(worst, std::fabs(slopes[i] - df_by_hand(points[i])));
  }

  const double tolerance = 1e-12;
  std::printf("\nlargest difference from the derivatives by hand: %.3g (tolerance %g)\n", worst,
              tolerance);
  if (!(worst <= tolerance)) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
