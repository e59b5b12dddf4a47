#!/usr/bin/env python3
"""kiln's layers against flax.linen, for tests/nn/flax_layers_test.cc, which writes FILE: for
each layer its spec, whether it ran in training, the input, parameters and state, and
kiln's output, new state and gradients of sum(y * c) with respect to the input and the
parameters. This script builds the same layer with Flax, applies it to the same variables
in f64 (jax_enable_x64) and compares within 1e-12 relative to max(1, |value|).

FILE may also hold "dropout" cases (Dropout in f32 with a key: the output and the gradient
must equal Flax's nn.Dropout(rate)(x, deterministic=False, rng=key) bit for bit; JAX's
default 32-bit mode, where Flax's keep probability is an f32 as kiln's is) and an
"embedding" case (nn.Embed: the lookup and the table's gradient with repeated indices).

Where the definitions differ, the check follows kiln's documented choice and says so:
  - BatchNorm's running variance: kiln moves it toward the unbiased batch variance (as
    PyTorch), Flax toward the biased one; the new running mean and the output are compared,
    the new running variance against Flax's times n / (n - 1).
  - AvgPool with padding: kiln divides by the cells inside the array, which is Flax's
    count_include_pad=False.

  flax_layers_check.py FILE   exit 0 when everything agrees, 1 naming each difference,
                              2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import json
import math
import pathlib
import sys

import peers

TOLERANCE = 1e-12


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter("flax_layers_check.py")
    try:
        import flax
        import flax.linen as nn
        import jax
        import jax.numpy as jnp
        import numpy as np
    except ImportError as error:
        peers.fail("flax_layers_check.py", f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require("flax_layers_check.py", {"flax": flax.__version__})
    jax.config.update("jax_enable_x64", True)

    def array(entry):
        return jnp.asarray(entry["values"], jnp.float64).reshape(entry["shape"])

    def tree(entries):
        return {name: array(entry) for name, entry in entries.items()}

    def layer_of(spec, train):
        kind = spec["kind"]
        if kind == "dense":
            return nn.Dense(spec["features"], param_dtype=jnp.float64)
        if kind == "conv":
            return nn.Conv(spec["features"], tuple(spec["kernel"]), tuple(spec["strides"]),
                           padding=spec["padding"], param_dtype=jnp.float64)
        if kind == "max_pool":
            return lambda x: nn.max_pool(x, tuple(spec["window"]), tuple(spec["strides"]),
                                         spec["padding"])
        if kind == "avg_pool":
            return lambda x: nn.avg_pool(x, tuple(spec["window"]), tuple(spec["strides"]),
                                         spec["padding"], count_include_pad=False)
        if kind == "layer_norm":
            return nn.LayerNorm(epsilon=spec["epsilon"], param_dtype=jnp.float64)
        if kind == "rms_norm":
            return nn.RMSNorm(epsilon=spec["epsilon"], param_dtype=jnp.float64)
        if kind == "batch_norm":
            return nn.BatchNorm(use_running_average=not train, momentum=spec["momentum"],
                                epsilon=spec["epsilon"], param_dtype=jnp.float64)
        raise ValueError(f"unknown layer {kind}")

    def relative_error(got, want):
        got = np.asarray(got, np.float64).ravel()
        want = np.asarray(want, np.float64).ravel()
        if got.shape != want.shape:
            return math.inf
        if got.size == 0:
            return 0.0
        return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))

    record = json.loads(pathlib.Path(argv[1]).read_text())
    failures, passed = [], 0
    for case in record["cases"]:
        spec, train = case["spec"], case["train"]
        layer = layer_of(spec, train)
        x = array(case["x"])
        params = tree(case["params"])
        state = tree(case["state"])
        c = jnp.asarray(case["c"], jnp.float64).reshape(case["y"]["shape"])
        name = f"{spec['kind']}{' (train)' if train else ''}"

        def forward(p, inputs):
            if callable(layer) and not isinstance(layer, nn.Module):
                return layer(inputs), {}
            variables = {"params": p}
            if state:
                variables["batch_stats"] = state
                y, updates = layer.apply(variables, inputs, mutable=["batch_stats"])
                return y, updates["batch_stats"]
            return layer.apply(variables, inputs), {}

        y, new_state = forward(params, x)
        errors = {"y": relative_error(case["y"]["values"], y)}
        loss = lambda p, inputs: jnp.sum(forward(p, inputs)[0] * c)
        d_params, d_x = jax.grad(loss, argnums=(0, 1))(params, x)
        errors["d_x"] = relative_error(case["d_x"], d_x)
        for path in case.get("d_params", {}):
            errors[f"d_{path}"] = relative_error(case["d_params"][path]["values"], d_params[path])
        if train and spec["kind"] == "batch_norm":
            n = math.prod(case["x"]["shape"][:-1])
            errors["new_mean"] = relative_error(case["new_state"]["mean"]["values"],
                                                new_state["mean"])
            # Flax moves toward the biased variance, kiln toward the unbiased one.
            momentum = spec["momentum"]
            biased_batch = (np.asarray(new_state["var"]) - momentum * np.asarray(state["var"])) / (
                1 - momentum)
            unbiased = momentum * np.asarray(state["var"]) + (1 - momentum) * biased_batch * n / (
                n - 1)
            errors["new_var (unbiased)"] = relative_error(case["new_state"]["var"]["values"],
                                                          unbiased)
        worst = max(errors.values())
        print(f"{name}: " + ", ".join(f"{k} {v:.3g}" for k, v in errors.items()))
        if worst > TOLERANCE:
            failures.append(f"{name}: largest relative difference {worst:.3g} > {TOLERANCE}")
        else:
            passed += 1
    for case in record.get("dropout", []):
        name = f"dropout rate {case['rate']} seed {case['seed']}"
        with jax.enable_x64(False):
            x = jnp.asarray(case["x"]["values"], jnp.float32).reshape(case["x"]["shape"])
            c = jnp.asarray(case["c"], jnp.float32).reshape(x.shape)
            key = jax.random.PRNGKey(case["seed"])
            layer = nn.Dropout(case["rate"], deterministic=False)
            apply = lambda inputs: layer.apply({}, inputs, rng=key)
            y = np.asarray(apply(x)).ravel()
            d_x = np.asarray(jax.grad(lambda inputs: jnp.sum(apply(inputs) * c))(x)).ravel()
        mismatched = {k: int(np.sum(np.asarray(case[k], np.float32) != v))
                      for k, v in (("y", y), ("d_x", d_x))}
        kept = int(np.sum(y != 0))
        print(f"{name}: {kept}/{y.size} kept; elements differing: y {mismatched['y']}, "
              f"d_x {mismatched['d_x']}")
        if any(mismatched.values()):
            failures.append(f"{name}: not bit-identical to Flax ({mismatched})")
        else:
            passed += 1
    if "embedding" in record:
        case = record["embedding"]
        ids = jnp.asarray(case["indices"], jnp.int32).reshape(case["indices_shape"])
        params = tree(case["params"])
        table = params["embedding"]
        layer = nn.Embed(table.shape[0], table.shape[1], param_dtype=jnp.float64)
        c = jnp.asarray(case["c"], jnp.float64).reshape(case["y"]["shape"])
        forward = lambda p: layer.apply({"params": p}, ids)
        d_params = jax.grad(lambda p: jnp.sum(forward(p) * c))(params)
        errors = {"y": relative_error(case["y"]["values"], forward(params)),
                  "d_embedding": relative_error(case["d_params"]["embedding"]["values"],
                                                d_params["embedding"])}
        print("embedding: " + ", ".join(f"{k} {v:.3g}" for k, v in errors.items()))
        worst = max(errors.values())
        if worst > TOLERANCE:
            failures.append(f"embedding: largest relative difference {worst:.3g} > {TOLERANCE}")
        else:
            passed += 1
    for failure in failures:
        print("FAILED:", failure)
    print(f"flax_layers_check: flax {flax.__version__}, jax {jax.__version__}")
    print(f"flax_layers_check: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
