#!/usr/bin/env python3
"""How far jax.random.normal and truncated_normal are from the exact values, in ulps.

kiln's normal is sqrt(2) * erf_inv(u) with erf_inv correctly rounded (except in near-ties);
tests/tools/jax_random_reference.py computes the same draws exactly in decimal, and the
random fixture test holds kiln to within 1 ulp of it. This script draws N values from one
key with that reference and with the real jax.random (the pinned peers), and prints the
largest distance in ulps of max(|value|, 1) (the unit tests/tools/jax_random_crosscheck.py
counts in), for |z| <= 3 and for the tails; then, for normal, the same with JAX's own
uniform draws through the exact erf_inv, which separates XLA's erf_inv from the one-ulp
difference of the uniform draw that erf_inv magnifies near +-1. It measures; it asserts
nothing (docs/random.md quotes its output).

  .venv/peers/bin/python bench/random_ulps.py [N]      (default 100000; about 2.5 minutes per 100000 values and dtype)
"""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "tools"))
import jax_random_reference as reference  # noqa: E402


def ulps(a, b, dtype):
    """|a - b| in units of the last place of max(|b|, 1) in `dtype`."""
    scale = np.maximum(np.abs(b), 1.0)
    unit = np.spacing(scale.astype(dtype)).astype(np.float64)
    return np.abs(a.astype(np.float64) - b.astype(np.float64)) / unit


def report(name, exact, theirs, dtype):
    distance = ulps(theirs, exact, dtype)
    body = np.abs(exact) <= 3
    tails = ~body
    print(f"{name:32s} n={exact.size:7d}  |z|<=3: max {distance[body].max():5.1f} ulps  "
          f"tails ({tails.sum()} values): max "
          f"{distance[tails].max() if tails.any() else 0:5.1f} ulps  "
          f"(mean {distance.mean():.3f})")


def main(argv):
    n = int(argv[1]) if len(argv) > 1 else 100000
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_threefry_partitionable", True)
    import jax.numpy as jnp
    key = reference.seed_key(0)
    jkey = jax.random.PRNGKey(0)
    for kind, dtype in [("f32", np.float32), ("f64", np.float64)]:
        exact = reference.normal(key, (n,), reference.Kind(kind))
        theirs = np.asarray(jax.random.normal(jkey, (n,), jnp.dtype(dtype)))
        report(f"normal {kind}", exact, theirs, dtype)
        # Which part differs: the uniform draw u (XLA contracts its scaling into an FMA, one
        # rounding where kiln has two) or erf_inv itself. JAX's own u, through the exact
        # erf_inv, against JAX's normal isolates XLA's erf_inv.
        k = reference.Kind(kind)
        lo = k.next_after(-1.0, 0.0)
        their_u = np.asarray(jax.jit(lambda key: jax.random.uniform(
            key, (n,), jnp.dtype(dtype), lo, 1.0))(jkey))
        our_u = reference.uniform_between(reference.unit_floats(key, (n,), k), k, lo, k.const(1.0))
        print(f"{'':32s} u draws differing: {(their_u != our_u).sum()} of {n}")
        exact_of_theirs = k.mul(k.const(np.sqrt(2)), reference.apply_exact(
            k, reference.dec_erf_inv, their_u.astype(dtype)))
        report(f"  XLA erf_inv alone {kind}", exact_of_theirs, theirs, dtype)
    kind = reference.Kind("f32")
    exact = reference.truncated_normal(key, 1.0, float("inf"), (n,), kind)
    theirs = np.asarray(jax.random.truncated_normal(jkey, 1.0, float("inf"), (n,), jnp.float32))
    report("truncated_normal f32 (1, inf)", exact, theirs, np.float32)


if __name__ == "__main__":
    main(sys.argv)
