#!/usr/bin/env python3
"""kiln's jax.numpy functions (kiln/array_functions.h) against the real jax.numpy, for
tests/ops/jnp_crosscheck_test.cc, which writes FILE: for each case the function's name and
keyword arguments, its inputs, kiln's results, and, where the result is a float, kiln's
gradient of sum(result * weights) with respect to the first input and the float results'
tangents along weights_like(first input) (forward mode). This script calls the
same jax.numpy function on the same inputs (with x64 on, so f64 stays f64), takes the same
gradient with jax.grad and the same tangents with jax.jvp, each under jax.jit (one
compilation a case rather than one per operation and shape: 9 s instead of 25 s for the
whole record), and compares.

Besides jax.numpy's names: "einsum" (kwargs["subscripts"] first), "nn.*" (jax.nn),
"lax.*" (jax.lax; kwargs["dimension_numbers"] of lax.gather and lax.scatter* is a dict of
the fields), and
"flax.*" (a flax.linen module applied with the inputs after the first as its parameters).
kwargs["array_kwargs"] passes inputs as keyword arguments (where=, mask=, bias=).

Tolerances (relative to max(1, |value|)): f32 2e-6, f64 1e-13, or a case's
kwargs["f64_tolerance"] (dot_product_attention: JAX computes its softmax in f32 even for
f64 inputs). The functions compose the
same operations as jax.numpy's, but reductions may add in another order (var, logsumexp,
the norms): measured at most a few f32 or f64 roundings. NaN must meet NaN, and infinities
the same infinity; bool results must be equal.

  jnp_crosscheck.py FILE     exit 0 when everything agrees, 1 naming each difference,
                             2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import json
import math
import sys

import peers

TOLERANCE = {"f32": 2e-6, "f64": 1e-13}


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter("jnp_crosscheck.py")
    try:
        import jax
        import numpy as np
    except ImportError as error:
        peers.fail("jnp_crosscheck.py", f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require("jnp_crosscheck.py", {"jax": jax.__version__})
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp

    DTYPES = {"f32": np.float32, "f64": np.float64, "bool": np.bool_, "i32": np.int32}

    def decode(entry):
        values = [float(v) if isinstance(v, str) else v for v in entry["values"]]
        dtype = DTYPES[entry["dtype"]]
        return np.array(values, dtype=np.float64).astype(dtype).reshape(entry["shape"])

    def function_of(name, kwargs):
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in kwargs.items()
                  if k not in ("array_kwargs", "f64_tolerance")}
        if isinstance(kwargs.get("dimension_numbers"), dict):
            # lax.gather / lax.scatter*: the dimension numbers' fields as lists.
            numbers = {k: tuple(v) for k, v in kwargs["dimension_numbers"].items()}
            kind = (jax.lax.GatherDimensionNumbers if name == "lax.gather"
                    else jax.lax.ScatterDimensionNumbers)
            kwargs["dimension_numbers"] = kind(**numbers)
        if "ord" in kwargs and isinstance(kwargs["ord"], str):
            kwargs["ord"] = float(kwargs["ord"])
        if name == "einsum":
            subscripts = kwargs.pop("subscripts")
            target = lambda *operands, **rest: jnp.einsum(subscripts, *operands, **rest)
        elif name.startswith("flax."):
            # A flax.linen module: the first input is x, the others its parameters in the
            # order of the module's own (LayerNorm: scale, bias; RMSNorm: scale).
            import flax.linen
            module = getattr(flax.linen, name.split(".", 1)[1])(epsilon=1e-6, **kwargs)
            names = {"LayerNorm": ["scale", "bias"], "RMSNorm": ["scale"]}[type(module).__name__]
            kwargs = {}
            target = lambda x, *params: module.apply({"params": dict(zip(names, params))}, x)
        else:
            # logsumexp and "nn.*" are jax.nn's, "lax.*" jax.lax's; the rest jax.numpy's.
            target = jax if name.startswith(("nn.", "lax.")) else jnp
            if name == "logsumexp":
                target = jax.nn.logsumexp
            else:
                for part in name.split("."):
                    target = getattr(target, part)

        def call(*inputs):
            positional = [x for i, x in enumerate(inputs) if i not in array_kwargs.values()]
            named = {k: inputs[i] for k, i in array_kwargs.items()}
            out = target(*positional, **kwargs, **named)
            return list(out) if isinstance(out, (list, tuple)) else [out]
        return call

    def weights_like(out):
        if out.ndim == 0:
            return jnp.asarray(0.7, out.dtype)
        row = jax.lax.broadcasted_iota(jnp.float64, out.shape, 0)
        weights = jnp.cos(row * 0.3)
        if out.ndim > 1:
            weights = weights + jax.lax.broadcasted_iota(jnp.float64, out.shape, 1)
        return weights.astype(out.dtype)

    def differences(what, kiln_value, jax_value, tolerance):
        kiln_value = np.asarray(kiln_value)
        jax_value = np.asarray(jax_value)
        if kiln_value.shape != jax_value.shape:
            return [f"{what}: shape {kiln_value.shape}, jax {jax_value.shape}"]
        if kiln_value.dtype == np.bool_ or jax_value.dtype == np.bool_:
            if kiln_value.dtype != jax_value.dtype or not np.array_equal(kiln_value, jax_value):
                return [f"{what}: {kiln_value.tolist()}, jax {jax_value.tolist()} "
                        f"({jax_value.dtype})"]
            return []
        problems = []
        for index, (a, b) in enumerate(zip(kiln_value.ravel().tolist(),
                                           jax_value.ravel().tolist())):
            if math.isnan(a) or math.isnan(b):
                same = math.isnan(a) and math.isnan(b)
            elif math.isinf(a) or math.isinf(b):
                same = a == b
            else:
                same = abs(a - b) <= tolerance * max(1.0, abs(b))
            if not same:
                problems.append(f"{what}[{index}]: {a!r}, jax {b!r}")
        return problems[:3]

    record = json.loads(open(argv[1]).read())
    failed = []
    for case in record["cases"]:
        case["kwargs"] = case["kwargs"] or {}  # C++'s json {} is null
        inputs = [decode(x) for x in case["inputs"]]
        dtype = case["inputs"][0]["dtype"]
        tolerance = TOLERANCE[dtype]
        if dtype == "f64" and "f64_tolerance" in case["kwargs"]:
            tolerance = case["kwargs"]["f64_tolerance"]
        array_kwargs = case["kwargs"].get("array_kwargs", {})
        label = f"{case['name']}({', '.join(f'{k}={v}' for k, v in case['kwargs'].items())}) {dtype}"
        fn = function_of(case["name"], case["kwargs"])
        try:
            # One compiled program a case (and one for its gradient) rather than one per
            # operation and shape: a third of the time op by op.
            outputs = jax.jit(fn)(*inputs)
        except Exception as error:  # an argument kiln takes and jax.numpy does not
            failed.append(f"{label}: jax.numpy raised {type(error).__name__}: {error}")
            continue
        problems = []
        if len(outputs) != len(case["outputs"]):
            problems.append(f"{len(case['outputs'])} results, jax {len(outputs)}")
        for i, (mine, theirs) in enumerate(zip(case["outputs"], outputs)):
            expected_dtype = DTYPES[mine["dtype"]]
            if np.asarray(theirs).dtype != expected_dtype:
                problems.append(f"result {i}: dtype {mine['dtype']}, jax {np.asarray(theirs).dtype}")
            problems += differences(f"result {i}", decode(mine), theirs, tolerance)
        if "gradient" in case:
            def objective(first):
                results = fn(first, *inputs[1:])
                return sum(jnp.sum(out * weights_like(out)) for out in results
                           if jnp.issubdtype(out.dtype, jnp.inexact))
            problems += differences("gradient", decode(case["gradient"]),
                                    jax.jit(jax.grad(objective))(inputs[0]), tolerance)
        if "tangents" in case:
            def pushed(first, direction):
                def floats(x):
                    return [out for out in fn(x, *inputs[1:])
                            if jnp.issubdtype(out.dtype, jnp.inexact)]
                return jax.jvp(floats, (first,), (direction,))[1]
            theirs = jax.jit(pushed)(inputs[0], weights_like(jnp.asarray(inputs[0])))
            for i, (mine, their) in enumerate(zip(case["tangents"], theirs)):
                problems += differences(f"tangent {i}", decode(mine), their, tolerance)
        if problems:
            failed.append(f"{label}: " + "; ".join(problems))
    for line in failed:
        print("FAILED", line)
    with_tangents = sum(1 for case in record["cases"] if "tangents" in case)
    print(f"jnp_crosscheck: {len(record['cases'])} cases (values and gradients, f32 and f64; "
          f"tangents by forward mode in {with_tangents}), {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
