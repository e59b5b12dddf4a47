#!/usr/bin/env python3
"""kiln's transformations against JAX's, for tests/transforms/jax_crosscheck_test.cc, which
writes FILE: the path of the program file (tests/transforms/jax_programs.kp), and for each
program and dtype (f32, f64) kiln's inputs, batched inputs, output weights, tangents and
results of eval, jit, vmap (every input mapped, and the first float input not mapped) and
(when differentiable) grad, value_and_grad, a Hessian-vector
product (reverse over reverse, and forward over reverse), per-example gradients and jit of
grad, and jvp (the float outputs' tangents; nograd programs too, as JAX's jvp goes through
while loops and sort). This script reads the same program file,
turns each program into a JAX function (one jax.lax / jnp call per kiln primitive), runs the
same transforms with JAX 0.10.2 on the same inputs (x64 enabled; f32 programs stay f32) and
compares.

The error of an array is max |kiln - jax| / max |jax| over the array (normwise relative;
absolute when JAX's array is all zeros); NaNs and infinities must be where JAX has them,
and integer and bool arrays must be equal. Tolerances,
and why they are not zero (measured worst errors in docs/peers.md):
  - f64: 1e-13 for values and first derivatives, 2e-13 for the Hessian-vector product
    (measured at most 7.5e-15 and 3.4e-15). Both sides evaluate the same formulas in f64;
    the differences are the last bits of the transcendental functions (XLA's exp, tanh,
    erf_inv are approximations a few ulps away from kiln's) and the order of sums,
    amplified a little by chains of operations, loops and the differentiations.
  - f32: 2e-5 for values and first derivatives, 5e-5 for the Hessian-vector product
    (measured at most 2.7e-6 and 3.7e-6): the same sources at f32's precision (6e-8 a
    rounding), accumulated over chains of up to twenty operations and six loop steps.

  jax_transforms_check.py FILE   exit 0 when everything agrees, 1 naming each difference,
                                 2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import json
import pathlib
import sys

import jax_eval
import kiln_program
import peers

TOOL = "jax_transforms_check.py"
TOLERANCES = {
    "f64": {"first": 1e-13, "second": 2e-13},
    "f32": {"first": 2e-5, "second": 5e-5},
}
SECOND_ORDER = {"hvp", "hvp_forward"}


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter(TOOL)
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
    except ImportError as error:
        peers.fail(TOOL, f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require(TOOL, {"jax": jax.__version__})
    jax.config.update("jax_enable_x64", True)
    evaluate, DTYPES = jax_eval.evaluator()

    def array(entry):
        # kiln writes non-finite values as the strings "nan", "inf" and "-inf" (JSON has none).
        values = [float(v) if isinstance(v, str) else v for v in entry["values"]]
        return np.asarray(values, DTYPES[entry["dtype"]]).reshape(entry["shape"])

    def error_of(kiln, want):
        kiln = np.asarray(kiln)
        want = np.asarray(want)
        if kiln.shape != want.shape:
            return float("inf"), f"shape {list(kiln.shape)} against JAX's {list(want.shape)}"
        if not np.issubdtype(want.dtype, np.floating):
            return (0.0 if np.array_equal(kiln, want) else float("inf")), "integers"
        kiln, want = kiln.astype(np.float64), want.astype(np.float64)
        # NaNs and infinities must be where JAX has them; the rest is compared by size.
        if not np.array_equal(np.isnan(kiln), np.isnan(want)):
            return float("inf"), "NaN where JAX has a number, or a number where JAX has NaN"
        finite = np.isfinite(want)
        if not np.array_equal(kiln[~finite], want[~finite], equal_nan=True):
            return float("inf"), "an infinity where JAX has another value"
        if not finite.any():
            return 0.0, ""
        scale = np.max(np.abs(want[finite]))
        difference = np.max(np.abs(kiln[finite] - want[finite]))
        return float(difference / scale if scale > 0 else difference), ""

    record = json.loads(pathlib.Path(argv[1]).read_text())
    programs = {dtype: {s.name: s for s in kiln_program.read_program_file(record["program_file"], dtype)}
                for dtype in TOLERANCES}
    failures, checks, passed = [], 0, 0
    worst = {}  # (dtype, transform) -> (error, program)
    seen = set()
    for case in record["cases"]:
        name, dtype = case["name"], case["dtype"]
        seen.add((name, dtype))
        spec = programs[dtype].get(name)
        if spec is None:
            failures.append(f"{name}: kiln ran a program that {record['program_file']} lacks")
            continue
        program = spec.program
        is_float = [np.issubdtype(DTYPES[t.dtype], np.floating) for _, t in program.inputs]
        inputs = [jnp.asarray(array(e)) for e in case["inputs"]]
        batched = [jnp.asarray(array(e)) for e in case["batched_inputs"]]
        weights = [None if w is None else jnp.asarray(array(w)) for w in case["weights"]]
        tangents = [jnp.asarray(array(t)) for t in case["tangents"]]

        def split(values):
            return ([v for v, f in zip(values, is_float) if f],
                    [v for v, f in zip(values, is_float) if not f])

        def assemble(floats, ints):
            floats, ints = iter(floats), iter(ints)
            return [next(floats) if f else next(ints) for f in is_float]

        def run(floats, ints):
            return evaluate(program, assemble(floats, ints))

        def loss(floats, ints):
            total = jnp.zeros((), np.dtype(DTYPES[dtype]))
            for out, weight in zip(run(floats, ints), weights):
                if weight is not None:
                    total = total + jnp.sum(out * weight)
            return total

        def hvp(floats, ints):
            def directional(f, i):
                return sum(jnp.sum(g * t) for g, t in zip(jax.grad(loss)(f, i), tangents))
            return jax.grad(directional)(floats, ints)

        def per_example(floats, batched_floats, batched_ints):
            # The first `shared` float inputs are not mapped, as on kiln's side.
            shared = case["shared"]
            head, tail = floats[:shared], batched_floats[shared:]
            g = jax.vmap(jax.grad(lambda h, t, i: loss(h + t, i), argnums=(0, 1)),
                         in_axes=(None, 0, 0))(head, tail, batched_ints)
            return list(g[0]) + list(g[1])

        floats, ints = split(inputs)
        bfloats, bints = split(batched)
        expected = ["eval", "jit", "vmap"] + (["vmap_shared"] if case["vmap_shared"] else [])
        if case["forward"]:
            expected += ["jvp"]
        if case["differentiable"]:
            expected += ["grad", "value_and_grad", "hvp", "hvp_forward", "per_example_grad",
                         "jit_grad"]

        # Every reference of a case comes from one jax.jit: XLA compiles once per case
        # (op-by-op dispatch compiled each primitive on its own: eight minutes in all).
        def references(floats, ints, bfloats, bints):
            refs = {"eval": run(floats, ints), "vmap": jax.vmap(run)(bfloats, bints)}
            if case["vmap_shared"]:
                # The first float input not mapped, as on kiln's side.
                refs["vmap_shared"] = jax.vmap(lambda h, t, i: run(h + t, i), in_axes=(None, 0, 0))(
                    floats[:1], bfloats[1:], bints)
            if case["forward"]:
                _, out_tangents = jax.jvp(lambda f: run(f, ints), (floats,), (tangents,))
                refs["jvp"] = [t for t in out_tangents if jnp.issubdtype(t.dtype, jnp.floating)]
            if case["differentiable"]:
                value, gradient = jax.value_and_grad(loss)(floats, ints)
                refs.update({"value_and_grad": (value, gradient), "grad": gradient,
                             "hvp": hvp(floats, ints),
                             "per_example_grad": per_example(floats, bfloats, bints)})
            return refs

        try:
            refs = jax.jit(references)(floats, ints, bfloats, bints)
        except Exception as error:  # JAX refusing the program is a failure to report
            failures.append(f"{name} {dtype}: JAX raised {type(error).__name__}: {error}")
            continue
        refs["jit"], refs["jit_grad"] = refs["eval"], refs.get("grad")
        refs["hvp_forward"] = refs.get("hvp")
        for transform in expected:
            checks += 1
            where = f"{name} {transform} {dtype}"
            got = case["results"].get(transform)
            if got is None or isinstance(got, dict) and "error" in got:
                failures.append(f"{where}: kiln gave no result ({(got or {}).get('error', 'missing')})")
                continue
            want = refs[transform]
            if transform == "value_and_grad":
                pairs = [(got["value"], want[0])] + list(zip(got["grad"], want[1]))
            else:
                pairs = list(zip(got, want))
                if len(got) != len(want):
                    failures.append(f"{where}: kiln gave {len(got)} arrays, JAX {len(want)}")
                    continue
            error, note = 0.0, ""
            for index, (k, w) in enumerate(pairs):
                e, why = error_of(array(k), w)
                if e > error:
                    error, note = e, f"array {index}{' (' + why + ')' if why else ''}"
            order = "second" if transform in SECOND_ORDER else "first"
            tolerance = TOLERANCES[dtype][order]
            key = (dtype, transform)
            if key not in worst or error > worst[key][0]:
                worst[key] = (error, name)
            status = "ok" if error <= tolerance else "FAILED"
            print(f"{status:6} {name:32} {transform:17} {dtype} error {error:.3g} "
                  f"(tolerance {tolerance:g}){' ' + note if note and error else ''}")
            if error <= tolerance:
                passed += 1
            else:
                failures.append(f"{where}: error {error:.3g} > tolerance {tolerance:g} at {note}")
    for dtype, specs in programs.items():
        for spec_name in specs:
            if (spec_name, dtype) not in seen:
                failures.append(f"{spec_name} {dtype}: in {record['program_file']} but kiln ran no case")
    print(f"\nworst error per transform over {len(programs['f32'])} programs:")
    for (dtype, transform), (error, name) in sorted(worst.items()):
        print(f"  {dtype} {transform:17} {error:.3g}  ({name})")
    for failure in failures:
        print("FAILED:", failure)
    print(f"{TOOL}: jax {jax.__version__}")
    print(f"{TOOL}: {checks} checks, {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
