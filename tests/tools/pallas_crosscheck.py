#!/usr/bin/env python3
"""kiln's Pallas-style kernels (kiln/pallas.h) against JAX's pallas_call in interpret mode,
for tests/pallas/pallas_jax_crosscheck_test.cc, which writes FILE: for each case the
kernel's name and settings (block sizes), its inputs and kiln's result. This script writes
the same kernel with jax.experimental.pallas on the same grid and BlockSpecs, runs it with
interpret=True and compares.

Where the semantics differ, the JAX kernels say so: kiln's masked load fills the elements
past an array's edge with zeros, while JAX's interpret mode leaves them unspecified, so
the JAX kernels mask a ragged reduction axis themselves (the column sums' rows, the
matmul's K, flash attention's keys); elsewhere what lies past the edge only reaches
results past the edge, which neither side stores. kiln's matmul and flash attention keep
their accumulators in scratch; the JAX kernels keep them in extra output blocks, which
persist while consecutive grid points revisit them, as they do in kiln.

Tolerances (relative to max(1, |value|)): 0 for add_block_number (one rounding on both
sides), 2e-6 for the column sums and softmax, 1e-5 for the matmul, layer norm and flash
attention (the block products and row reductions may add in another order).

  pallas_crosscheck.py FILE     exit 0 when everything agrees, 1 naming each difference,
                                2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import json
import sys

import peers

TOLERANCE = {"add_block_number": 0.0, "column_sums": 2e-6, "softmax": 2e-6, "matmul": 1e-5,
             "layer_norm": 1e-5, "flash_attention": 1e-5}


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter("pallas_crosscheck.py")
    try:
        import jax
        import numpy as np
        from jax.experimental import pallas as pl
    except ImportError as error:
        peers.fail("pallas_crosscheck.py",
                   f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require("pallas_crosscheck.py", {"jax": jax.__version__})
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp

    f32 = jnp.float32

    def cdiv(a, b):
        return (a + b - 1) // b

    def iota(shape, axis):
        return jax.lax.broadcasted_iota(jnp.int32, shape, axis)

    def run(kernel, out_shapes, grid, in_specs, out_specs, *inputs):
        shapes = [jax.ShapeDtypeStruct(shape, f32) for shape in out_shapes]
        return pl.pallas_call(kernel, out_shape=shapes, grid=grid, in_specs=in_specs,
                              out_specs=out_specs, interpret=True)(*inputs)

    def add_block_number(s, x):
        rows, cols = x.shape

        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2 + pl.program_id(0).astype(f32)

        spec = pl.BlockSpec((s["rows"], cols), lambda i: (i, 0))
        return run(kernel, [x.shape], (cdiv(rows, s["rows"]),), [spec], [spec], x)[0]

    def column_sums(s, x):
        (r, c), rows, cols = x.shape, s["rows"], s["cols"]

        def kernel(x_ref, o_ref):
            @pl.when(pl.program_id(1) == 0)
            def _():
                o_ref[...] = jnp.zeros(o_ref.shape, f32)

            row = pl.program_id(1) * rows + iota((rows, cols), 0)
            block = jnp.where(row < r, x_ref[...], 0)
            o_ref[...] += jnp.sum(block, axis=0, keepdims=True)

        return run(kernel, [(1, c)], (cdiv(c, cols), cdiv(r, rows)),
                   [pl.BlockSpec((rows, cols), lambda j, i: (i, j))],
                   [pl.BlockSpec((1, cols), lambda j, i: (0, j))], x)[0]

    def matmul(s, a, b):
        (m, k), n = a.shape, b.shape[1]
        bm, bn, bk = s["bm"], s["bn"], s["bk"]

        def kernel(a_ref, b_ref, o_ref):
            @pl.when(pl.program_id(2) == 0)
            def _():
                o_ref[...] = jnp.zeros(o_ref.shape, f32)

            start = pl.program_id(2) * bk
            x = jnp.where(start + iota((bm, bk), 1) < k, a_ref[...], 0)
            y = jnp.where(start + iota((bk, bn), 0) < k, b_ref[...], 0)
            o_ref[...] += jnp.dot(x, y, preferred_element_type=f32)

        return run(kernel, [(m, n)], (cdiv(m, bm), cdiv(n, bn), cdiv(k, bk)),
                   [pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                    pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
                   [pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j))], a, b)[0]

    def softmax(s, x):
        rows, n = s["rows"], x.shape[1]

        def kernel(x_ref, o_ref):
            z = x_ref[...]
            e = jnp.exp(z - jnp.max(z, axis=1, keepdims=True))
            o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)

        spec = pl.BlockSpec((rows, n), lambda i: (i, 0))
        return run(kernel, [x.shape], (cdiv(x.shape[0], rows),), [spec], [spec], x)[0]

    def layer_norm(s, x, scale, bias):
        rows, n = s["rows"], x.shape[1]

        def kernel(x_ref, scale_ref, bias_ref, o_ref):
            z = x_ref[...]
            centred = z - jnp.mean(z, axis=1, keepdims=True)
            variance = jnp.mean(centred * centred, axis=1, keepdims=True)
            o_ref[...] = centred * jax.lax.rsqrt(variance + s["eps"]) * scale_ref[...] + \
                bias_ref[...]

        spec = pl.BlockSpec((rows, n), lambda i: (i, 0))
        whole = pl.BlockSpec((n,), lambda i: (0,))
        return run(kernel, [x.shape], (cdiv(x.shape[0], rows),), [spec, whole, whole], [spec],
                   x, scale, bias)[0]

    def flash_attention(s, q, k, v):
        heads, t, d = q.shape
        bq, bk, causal = s["bq"], s["bk"], s["causal"]
        scale = 1 / np.sqrt(d)

        def kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
            i, j = pl.program_id(1), pl.program_id(2)

            @pl.when(j == 0)
            def _():
                m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, f32)
                l_ref[...] = jnp.zeros(l_ref.shape, f32)
                acc_ref[...] = jnp.zeros(acc_ref.shape, f32)

            rows = i * bq + iota((bq, bk), 0)
            keys = j * bk + iota((bq, bk), 1)
            keep = keys < t
            if causal:
                keep = keep & (keys <= rows)
            scores = jnp.where(keep, jnp.dot(q_ref[...], k_ref[...].T) * scale, -jnp.inf)
            m_before = m_ref[...]
            m_after = jnp.maximum(m_before, jnp.max(scores, axis=1))
            # A row whose keys so far are all masked keeps -inf: nothing to rescale.
            shift = jnp.where(m_after == -jnp.inf, 0, m_after)
            p = jnp.exp(scores - shift[:, None])
            rescale = jnp.exp(m_before - shift)
            values = jnp.where(j * bk + iota((bk, d), 0) < t, v_ref[...], 0)
            l_ref[...] = rescale * l_ref[...] + jnp.sum(p, axis=1)
            acc_ref[...] = rescale[:, None] * acc_ref[...] + jnp.dot(p, values)
            m_ref[...] = m_after

            @pl.when(j == pl.num_programs(2) - 1)
            def _():
                o_ref[...] = acc_ref[...] / l_ref[...][:, None]

        rows_of = pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0))
        keys_of = pl.BlockSpec((None, bk, d), lambda b, i, j: (b, j, 0))
        per_row = pl.BlockSpec((None, bq), lambda b, i, j: (b, i))
        return run(kernel, [q.shape, (heads, t), (heads, t), q.shape],
                   (heads, cdiv(t, bq), cdiv(t, bk)), [rows_of, keys_of, keys_of],
                   [rows_of, per_row, per_row, rows_of], q, k, v)[0]

    kernels = {"add_block_number": add_block_number, "column_sums": column_sums,
               "matmul": matmul, "softmax": softmax, "layer_norm": layer_norm,
               "flash_attention": flash_attention}

    def decode(entry):
        return np.array(entry["values"], dtype=np.float64).astype(np.float32).reshape(
            entry["shape"])

    with open(argv[1]) as f:
        record = json.load(f)
    failed = []
    for case in record["cases"]:
        name, settings = case["kernel"], case["settings"]
        inputs = [jnp.asarray(decode(entry)) for entry in case["inputs"]]
        kiln_value = decode(case["output"]).astype(np.float64)
        jax_value = np.asarray(kernels[name](settings, *inputs)).astype(np.float64)
        what = f"{name} {settings}"
        if kiln_value.shape != jax_value.shape:
            failed.append(f"{what}: shape {kiln_value.shape}, jax {jax_value.shape}")
            continue
        error = np.abs(kiln_value - jax_value) / np.maximum(1, np.abs(jax_value))
        worst = float(error.max()) if error.size else 0.0
        print(f"{what}: largest difference {worst:.3g} (tolerance {TOLERANCE[name]:g})")
        if not worst <= TOLERANCE[name]:
            at = np.unravel_index(int(np.argmax(error)), error.shape)
            failed.append(f"{what}: at {tuple(int(i) for i in at)} kiln {kiln_value[at]!r}, "
                          f"jax {jax_value[at]!r}")
    for line in failed:
        print("FAILED", line)
    print(f"pallas_crosscheck: {len(record['cases'])} cases against jax {jax.__version__} "
          f"pallas_call(interpret=True): {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
