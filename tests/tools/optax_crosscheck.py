#!/usr/bin/env python3
"""kiln's optimizers and schedules against the real Optax, for
tests/optim/optax_crosscheck_test.cc, which writes FILE: the specs of the optimizers and
schedules, the initial parameters ({a: f32[3], b: f32[2,2]}, flattened), a stream of
gradients, and kiln's results (the parameters after every step of the stream; each
schedule's values at steps 0..N). This script builds the same optimizers and schedules with
Optax from the specs, runs them on the same inputs in f32 (JAX without x64, op by op), and
compares.

Tolerances (relative to max(1, |value|)), and why they are not zero:
  - schedules: 2e-7, about two f32 roundings. kiln's schedules return f32 values while
    Optax's constant schedule returns the Python float itself (0.01 against its f32
    rounding: 2.2e-10), and the two evaluate some formulas in another order (measured:
    at most 1.9e-9, in warmup_cosine).
  - optimizers: 5e-6 after 200 steps. Each step rounds like Optax's except for the order
    of a few f32 operations (Adam's bias corrections), and those last-bit differences
    accumulate over the steps (measured: SGD, momentum and Nesterov 0, RMSProp and clipped
    SGD 6e-8, Adam and AdamW 1.2e-6).

  optax_crosscheck.py FILE     exit 0 when everything agrees, 1 naming each difference,
                               2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import json
import pathlib
import sys

import peers

SCHEDULE_TOLERANCE = 2e-7
OPTIMIZER_TOLERANCE = 5e-6


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter("optax_crosscheck.py")
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
        import optax
    except ImportError as error:
        peers.fail("optax_crosscheck.py", f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require("optax_crosscheck.py", {"optax": optax.__version__, "jax": jax.__version__})
    def schedule_of(spec):
        kind = spec["kind"]
        if kind == "constant":
            return optax.constant_schedule(spec["value"])
        if kind == "linear":
            return optax.linear_schedule(spec["init"], spec["end"], spec["steps"])
        if kind == "cosine_decay":
            return optax.cosine_decay_schedule(spec["init"], spec["decay_steps"], spec["alpha"])
        if kind == "warmup_cosine":
            return optax.warmup_cosine_decay_schedule(0.0, spec["peak"], spec["warmup_steps"],
                                                      spec["decay_steps"], spec["end"])
        if kind == "piecewise_constant":
            # kiln takes the values themselves, Optax the factors between them.
            values = spec["values"]
            scales = {b: values[i + 1] / values[i] for i, b in enumerate(spec["boundaries"])}
            return optax.piecewise_constant_schedule(values[0], scales)
        if kind == "exponential":
            return optax.exponential_decay(spec["init"], spec["transition_steps"], spec["rate"],
                                           staircase=spec["staircase"])
        raise ValueError(f"unknown schedule {kind}")

    def optimizer_of(spec):
        kind = spec["kind"]
        lr = schedule_of(spec["lr"])
        adam = {"b1": spec.get("b1", 0.9), "b2": spec.get("b2", 0.999), "eps": spec.get("eps", 1e-8)}
        if kind == "sgd":
            return optax.sgd(lr)
        if kind == "momentum":
            return optax.sgd(lr, momentum=spec["beta"], nesterov=spec["nesterov"])
        if kind == "adam":
            return optax.adam(lr, **adam)
        if kind == "adamw":
            return optax.adamw(lr, weight_decay=spec["weight_decay"], **adam)
        if kind == "rmsprop":
            # kiln divides by sqrt(v) + eps, as torch.optim.RMSprop: Optax's eps_in_sqrt=False.
            return optax.rmsprop(lr, decay=spec["decay"], eps=spec["eps"], eps_in_sqrt=False)
        if kind == "clipped_sgd":
            return optax.chain(optax.clip_by_global_norm(spec["max_norm"]), optax.sgd(lr))
        raise ValueError(f"unknown optimizer {kind}")

    def tree(flat):
        flat = np.asarray(flat, dtype=np.float32)
        return {"a": jnp.asarray(flat[:3]), "b": jnp.asarray(flat[3:7].reshape(2, 2))}

    def flatten(params):
        return np.concatenate([np.asarray(params["a"]).ravel(), np.asarray(params["b"]).ravel()])

    def relative_error(got, want):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))

    record = json.loads(pathlib.Path(argv[1]).read_text())
    failures, passed = [], 0
    for entry in record["schedules"]:
        schedule = schedule_of(entry["spec"])
        values = [float(schedule(jnp.asarray(step, jnp.int32))) for step in range(len(entry["values"]))]
        error = relative_error(entry["values"], values)
        name = json.dumps(entry["spec"], sort_keys=True)
        print(f"schedule {name}: largest relative difference {error:.3g}")
        if error > SCHEDULE_TOLERANCE:
            failures.append(f"schedule {name}: {error:.3g} > {SCHEDULE_TOLERANCE}")
        else:
            passed += 1
    grads = [tree(g) for g in record["grads"]]
    for entry in record["optimizers"]:
        optimizer = optimizer_of(entry["spec"])
        params = tree(record["params"])
        state = optimizer.init(params)
        for g in grads:
            updates, state = optimizer.update(g, state, params)
            params = optax.apply_updates(params, updates)
        error = relative_error(entry["params"], flatten(params))
        name = json.dumps(entry["spec"], sort_keys=True)
        print(f"optimizer {name}: {len(grads)} steps, largest relative difference {error:.3g}")
        if error > OPTIMIZER_TOLERANCE:
            failures.append(f"optimizer {name}: {error:.3g} > {OPTIMIZER_TOLERANCE}")
        else:
            passed += 1
    for failure in failures:
        print("FAILED:", failure)
    print(f"optax_crosscheck: optax {optax.__version__}, jax {jax.__version__}")
    print(f"optax_crosscheck: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
