#!/usr/bin/env python3
"""kiln's losses against optax.losses, for tests/nn/optax_losses_test.cc, which writes FILE:
for each case the loss, its parameters, the first argument (logits or predictions, f64)
and its shape, the second (integer labels, targets in [0, 1], or wanted values), and kiln's
loss value and gradient with respect to the first argument. This script computes the mean
of the same Optax loss and its gradient with jax.grad, in f64 (jax_enable_x64), and
compares within 1e-12 relative to max(1, |value|): both sides compute in f64 from
log_softmax / log_sigmoid forms, and differ only in the order of a few roundings.

  optax_losses_check.py FILE   exit 0 when everything agrees, 1 naming each difference,
                               2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import json
import pathlib
import sys

import peers

TOLERANCE = 1e-12


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter("optax_losses_check.py")
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
        import optax
    except ImportError as error:
        peers.fail("optax_losses_check.py", f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require("optax_losses_check.py", {"optax": optax.__version__})
    jax.config.update("jax_enable_x64", True)

    def loss_of(case):
        name, params = case["loss"], case["params"]
        second = jnp.asarray(case["second"], jnp.float64)
        if name == "softmax_cross_entropy":
            labels = second.astype(jnp.int32)
            smoothing = params.get("label_smoothing", 0.0)
            if smoothing == 0.0:
                return lambda x: jnp.mean(
                    optax.losses.softmax_cross_entropy_with_integer_labels(x, labels))
            def smoothed(x):
                targets = optax.smooth_labels(jax.nn.one_hot(labels, x.shape[-1]), smoothing)
                return jnp.mean(optax.losses.softmax_cross_entropy(x, targets))
            return smoothed
        shaped = second.reshape(case["shape"])
        if name == "sigmoid_binary_cross_entropy":
            return lambda x: jnp.mean(optax.losses.sigmoid_binary_cross_entropy(x, shaped))
        if name == "squared_error":
            return lambda x: jnp.mean(optax.losses.squared_error(x, shaped))
        if name == "huber":
            return lambda x: jnp.mean(optax.losses.huber_loss(x, shaped, delta=params["delta"]))
        raise ValueError(f"unknown loss {name}")

    def relative_error(got, want):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))

    record = json.loads(pathlib.Path(argv[1]).read_text())
    failures, passed = [], 0
    for case in record["cases"]:
        first = jnp.asarray(case["first"], jnp.float64).reshape(case["shape"])
        value, gradient = jax.value_and_grad(loss_of(case))(first)
        value_error = relative_error(case["value"], value)
        grad_error = relative_error(case["grad"], np.asarray(gradient).ravel())
        name = f"{case['loss']} {json.dumps(case['params'], sort_keys=True)}"
        print(f"{name}: value {float(value):.17g}, relative difference {value_error:.3g} "
              f"(gradient {grad_error:.3g})")
        if max(value_error, grad_error) > TOLERANCE:
            failures.append(f"{name}: value {value_error:.3g}, gradient {grad_error:.3g} > "
                            f"{TOLERANCE}")
        else:
            passed += 1
    for failure in failures:
        print("FAILED:", failure)
    print(f"optax_losses_check: optax {optax.__version__}, jax {jax.__version__}")
    print(f"optax_losses_check: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
