#!/usr/bin/env python3
"""Checks kiln's random numbers against the real jax.random.

tests/random/expected_random.txt holds, for a table of keys, shapes and dtypes, the exact
bits kiln::random must give (the random tests compare kiln with it bit for bit). This
script recomputes every record with jax.random (the default threefry2x32 implementation,
jax_threefry_partitionable=True) and compares, so that the chain kiln == fixture == JAX is
closed by the real library, not only by our NumPy re-derivation of it.

Where kiln deliberately differs, the record is checked against a stated bound in units in
the last place (ULP_BOUNDS) instead, and docs/random.md says why:
  - normal and truncated_normal go through erf_inv (truncated_normal through erf too),
    which kiln computes correctly rounded while XLA uses polynomial approximations, and
    truncated_normal's formula magnifies the difference near its bounds;
  - uniform with bounds computes floats * (maxval - minval) + minval, two roundings in
    kiln as the jaxpr says, where XLA:CPU contracts the multiply and the add into one FMA.
Every other record (keys, split, fold_in, bits, uniform on [0, 1), bernoulli, categorical,
permutation) must match bit for bit.

Usage (any Python: the script runs itself again with the peers' Python, .venv/peers, which
scripts/setup creates from requirements/peers.txt):
  python3 tests/tools/jax_random_crosscheck.py tests/random/expected_random.txt
Exit status 0 when every record agrees, 1 naming each record that does not, 2 when the
peers' environment is missing or holds other versions than the pins (the message names the
command that installs them). The CTest test random_matches_jax runs it.
"""
import math
import pathlib
import sys

import peers

# The largest distance allowed, in units in the last place of the sampled dtype, where
# kiln deliberately differs (see the module comment); each is the largest distance measured
# over the fixture with the pinned jax (docs/random.md), so a new difference fails.
# For uniform with bounds the distance is counted in ulps of max(|minval|, |maxval|): the
# two roundings differ by a rounding of the product, which near 0 (after cancellation) is
# many ulps of the tiny result but one of the operands. For normal and truncated_normal it
# is counted in ulps of max(|value|, 1) for the same reason: their values near 0 come from
# that uniform draw through erf_inv. (Counted in the tiny result's own ulps, an f16
# truncated_normal on a CPU whose XLA contracts the f16 uniform into an FMA, one with
# AVX512-FP16, is 108 ulps away; 0.2 ulps of 1.)
ULP_BOUNDS = {"normal": 4, "truncated_normal": 32, "uniform": 1}


def import_jax():
    peers.enter("jax_random_crosscheck")
    try:
        import jax
        import jaxlib
    except ImportError as error:
        peers.fail("jax_random_crosscheck", f"{error.name} is missing from {sys.prefix}; run "
                   "scripts/setup to reinstall the pinned peers (requirements/peers.txt)")
    peers.require("jax_random_crosscheck", {"jax": jax.__version__, "jaxlib": jaxlib.__version__})
    jax.config.update("jax_enable_x64", True)  # f64 draws and 64-bit seeds
    jax.config.update("jax_threefry_partitionable", True)
    return jax


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    jax = import_jax()
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    dtypes = {"u8": np.uint8, "u32": np.uint32, "i32": np.int32, "bool": np.bool_,
              "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
              "f64": np.float64}
    bit_types = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}

    def key_of(path):
        parts = path.split("/")
        seed = int(parts[0].split("=")[1])
        # JAX reads a seed as an int64; kiln's seeds are uint64, so one past 2^63 is given
        # as the int64 of the same 64 bits (JAX then splits those bits into the key's two
        # words exactly as kiln does).
        if seed >= 1 << 63:
            seed -= 1 << 64
        key = jax.random.PRNGKey(seed)
        for part in parts[1:]:
            if part[0] == "s":
                n, i = part[1:].split(":")
                key = jax.random.split(key, int(n))[int(i)]
            else:
                key = jax.random.fold_in(key, int(part[1:]))
        return key

    def hex_array(text, dtype):
        bits = np.array([int(h, 16) for h in text.split(";")], dtype=bit_types[dtype])
        return bits.view(dtypes[dtype])

    def parse_params(text):
        if text == "-":
            return {}
        params = {}
        for item in text.split(","):
            name, _, value = item.partition("=")
            params[name] = value
        return params

    def number(text):
        return float(text)  # "inf" and "-inf" included

    def sample(op, key, dtype, shape, p):
        dt = dtypes[dtype]
        if op == "key":
            return np.asarray(key)
        if op == "split":
            return np.asarray(jax.random.split(key, int(p["n"])))
        if op == "bits":
            if dtype == "u8":
                return np.asarray(jax.random.bits(key, shape, jnp.uint32)) & 0xFF
            return np.asarray(jax.random.bits(key, shape, dt))
        if op == "uniform":
            return np.asarray(jax.random.uniform(key, shape, dt, number(p.get("minval", 0)),
                                                 number(p.get("maxval", 1))))
        if op == "normal":
            return np.asarray(jax.random.normal(key, shape, dt))
        if op == "truncated_normal":
            return np.asarray(jax.random.truncated_normal(key, number(p["lower"]),
                                                          number(p["upper"]), shape, dt))
        if op == "bernoulli":
            # A Python float would be an f64 under jax_enable_x64 (needed here for the f64
            # draws), and bernoulli compares with a uniform draw of p's dtype: kiln, like JAX
            # without x64, takes a number as f32.
            return np.asarray(jax.random.bernoulli(key, np.float32(p["p"]), shape))
        if op == "bernoulli_p":
            probabilities = jnp.asarray(hex_array(p["p"], p["dtype"]))
            return np.asarray(jax.random.bernoulli(key, probabilities, shape))
        if op == "categorical":
            logits = jnp.asarray(hex_array(p["logits"], p["dtype"]).reshape(shape))
            return np.asarray(jax.random.categorical(key, logits, int(p["axis"])))
        if op == "permutation":
            # Under x64 the permuted arange is int64; kiln's (and JAX's without x64) is int32.
            return np.asarray(jax.random.permutation(key, int(p["n"]))).astype(np.int32)
        if op == "randint":
            return np.asarray(jax.random.randint(key, shape, int(p["minval"]), int(p["maxval"]),
                                                 dt))
        if op == "permutation_of":
            x = jnp.arange(math.prod(shape), dtype=jnp.int32).reshape(shape)
            return np.asarray(jax.random.permutation(key, x, int(p["axis"]), independent=False))
        raise ValueError(f"unknown op {op}")

    def fnv1a(data):
        h = 0xCBF29CE484222325
        for byte in data:
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return h

    failures, exact, bounded, worst = [], 0, 0, {}
    for number_, line in enumerate(pathlib.Path(argv[1]).read_text().splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        head, _, body = line.partition(" = ")
        op, path, dtype, shape_text, params_text = head.split(" ")
        shape = tuple(int(d) for d in shape_text.strip("[]").split(",") if d)
        got = sample(op, key_of(path), dtype, shape, parse_params(params_text))
        where = f"line {number_} ({op} {path} {dtype} {shape_text})"
        if body.startswith("fnv1a="):
            if dtype == "bool":
                got = got.astype(np.uint8)
            digest = fnv1a(np.ascontiguousarray(got).tobytes())
            if f"fnv1a={digest:016x}" != body:
                failures.append(f"{where}: JAX's digest is {digest:016x}, the fixture's {body}")
            else:
                exact += 1
            continue
        if dtype in bit_types:
            want_bits = np.array([int(h, 16) for h in body.split()], dtype=bit_types[dtype])
            got_bits = np.ascontiguousarray(got.astype(dtypes[dtype])).view(bit_types[dtype]).ravel()
            if np.array_equal(got_bits, want_bits):
                exact += 1
                continue
            bounded_op = op in ("normal", "truncated_normal") or (
                op == "uniform" and ("minval" in params_text or "maxval" in params_text))
            if bounded_op:
                # Distance in ulps: floats of one sign order like their bit patterns.
                signed = {np.uint16: np.int16, np.uint32: np.int32, np.uint64: np.int64}
                s = signed[bit_types[dtype]]
                a, b = got_bits.view(s).astype(np.int64), want_bits.view(s).astype(np.int64)
                same_sign = (a >= 0) == (b >= 0)
                ulps = int(np.max(np.where(same_sign, np.abs(a - b), np.iinfo(np.int64).max)))
                if op in ("normal", "truncated_normal"):
                    # Counted in ulps of max(|value|, 1), the distribution's scale: a value
                    # near 0 comes from a uniform draw near the middle of its range, whose
                    # rounding (one ulp at that range's scale, FMA or not, as for uniform
                    # below) is many ulps of the tiny result.
                    want_values = want_bits.view(dtypes[dtype]).astype(np.float64)
                    got_values = got_bits.view(dtypes[dtype]).astype(np.float64)
                    scale = np.maximum(np.abs(want_values), 1.0)
                    unit = np.exp2(np.floor(np.log2(scale))) * float(np.finfo(dtypes[dtype]).eps)
                    ulps = int(np.ceil(np.max(np.abs(got_values - want_values) / unit)))
                if op == "uniform":
                    params = parse_params(params_text)
                    scale = max(abs(number(params.get("minval", 0))),
                                abs(number(params.get("maxval", 1))))
                    unit = float(np.spacing(dtypes[dtype](scale)))
                    got_values = got_bits.view(dtypes[dtype]).astype(np.float64)
                    want_values = want_bits.view(dtypes[dtype]).astype(np.float64)
                    ulps = int(np.ceil(np.max(np.abs(got_values - want_values)) / unit))
                worst[(op, dtype)] = max(worst.get((op, dtype), 0), ulps)
                if ulps <= ULP_BOUNDS[op]:
                    bounded += 1
                    continue
                failures.append(f"{where}: {ulps} ulps from JAX, more than the {ULP_BOUNDS[op]} "
                                "that the stated differences explain")
                continue
            failures.append(f"{where}: JAX gives {' '.join(f'{v:x}' for v in got_bits)}, the "
                            f"fixture {body}")
            continue
        want = np.array([int(v) for v in body.split()], dtype=np.int64)
        if np.array_equal(np.asarray(got).astype(np.int64).ravel(), want):
            exact += 1
        else:
            failures.append(f"{where}: JAX gives {np.asarray(got).ravel().tolist()}, the fixture "
                            f"{want.tolist()}")
    for failure in failures:
        print(failure)
    worst_text = ", ".join(f"{o} {d} {u}" for (o, d), u in sorted(worst.items())) or "none"
    print(f"jax_random_crosscheck: jax {jax.__version__}: {exact} records bit for bit, {bounded} "
          f"within their stated bound (largest distances in ulps: {worst_text})")
    print(f"jax_random_crosscheck: {exact + bounded} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
