#!/usr/bin/env python3
"""kiln's shard_map and collectives against JAX's, for
tests/sharding/shard_map_matches_jax_test.cc, which writes the record: per case and dtype
(f32, f64), the program kiln traced (its text: a shard_map whose body calls the
collectives), the inputs, three batched examples of them, a weight for the output, and
kiln's results of eval, jit, vmap and grad (of the sum of the output times the weight).
This script reads the program text (kiln_program.py), runs it with JAX on 4 CPU devices
(XLA_FLAGS=--xla_force_host_platform_device_count=4): shard_map becomes jax.shard_map over
a Mesh of the same devices in the same order, and each collective the lax call with the
same meaning (jax_eval.py translates the other primitives). It compares each result.

Error: max |kiln - jax| / max |jax| over the array. Tolerances: f64 1e-13 and f32 2e-6.
The collectives move values exactly and add at most 4 of them; the rest is the last bits
of XLA's sin and tanh against kiln's and the order of additions inside a dot product
(measured worst errors are printed at the end and recorded in docs/peers.md).

JAX has no derivative of pmax ("Differentiation rule for 'pmax' not implemented"): the
gradient of the pmax case is not compared here; shard_map_test.cc checks it against finite
differences.

Usage: python3 tests/tools/jax_shard_map_check.py KILN_RECORD.json
Exit status 0 when every result agrees, 1 naming each that does not, 2 when the peers'
environment is missing or holds other versions than the pins.
"""
import json
import os
import pathlib
import sys

import jax_eval
import kiln_program
import peers

TOOL = "jax_shard_map_check.py"
TOLERANCES = {"f64": 1e-13, "f32": 2e-6}
NO_JAX_GRAD = {"pmax"}


def parse_specs(text):
    """kiln's spec list "{data,_} {}" as (names per dimension, None when not split)."""
    specs = []
    for spec in text.split():
        inner = spec[1:-1]
        dims, depth, current = [], 0, ""
        for char in inner:
            if char == "," and depth == 0:
                dims.append(current)
                current = ""
                continue
            depth += {"(": 1, ")": -1}.get(char, 0)
            current += char
        if inner:
            dims.append(current)
        entries = []
        for entry in dims:
            if entry == "_":
                entries.append(None)
            elif entry.startswith("("):
                entries.append(tuple(entry[1:-1].split(",")))
            else:
                entries.append(entry)
        specs.append(entries)
    return specs


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    # Before JAX starts: the host platform split into 4 devices, as KILN_CPU_DEVICES=4.
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=4").strip()
    peers.enter(TOOL)
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax import lax
        from jax.sharding import Mesh, PartitionSpec
    except ImportError as error:
        peers.fail(TOOL, f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require(TOOL, {"jax": jax.__version__})
    jax.config.update("jax_enable_x64", True)

    def axes(p):
        names = tuple(p["axes"].split(","))
        return names[0] if len(names) == 1 else names

    def shard_map(eq, ins, evaluate):
        p = eq.params
        mesh_axes = [axis.split("=") for axis in p["mesh"].split(",")]
        shape = tuple(int(size) for _, size in mesh_axes)
        devices = np.array([jax.devices()[i] for i in p["devices"]]).reshape(shape)
        mesh = Mesh(devices, tuple(name for name, _ in mesh_axes))
        in_specs = tuple(PartitionSpec(*s) for s in parse_specs(p["in_specs"]))
        out_specs = tuple(PartitionSpec(*s) for s in parse_specs(p["out_specs"]))
        body = p["body"]
        mapped = jax.shard_map(lambda *blocks: tuple(evaluate(body, list(blocks))), mesh=mesh,
                               in_specs=in_specs, out_specs=out_specs)
        return list(mapped(*ins))

    def permutation(p):
        flat = p["permutation"]
        return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    collectives = {
        "shard_map": shard_map,
        "psum": lambda eq, ins, _: [lax.psum(ins[0], axes(eq.params))],
        "pmean": lambda eq, ins, _: [lax.pmean(ins[0], axes(eq.params))],
        "pmax": lambda eq, ins, _: [lax.pmax(ins[0], axes(eq.params))],
        # kiln's all_gather result is the same on every device of the group, as JAX's with
        # to="invarying" (JAX's default, "varying", could not leave shard_map unsplit).
        "all_gather": lambda eq, ins, _: [lax.all_gather(
            ins[0], axes(eq.params), axis=eq.params["dimension"], tiled=eq.params["tiled"],
            to="invarying")],
        "psum_scatter": lambda eq, ins, _: [lax.psum_scatter(
            ins[0], axes(eq.params), scatter_dimension=eq.params["dimension"],
            tiled=eq.params["tiled"])],
        "all_to_all": lambda eq, ins, _: [lax.all_to_all(
            ins[0], axes(eq.params), eq.params["split_dimension"], eq.params["dimension"],
            tiled=True)],
        "ppermute": lambda eq, ins, _: [lax.ppermute(ins[0], axes(eq.params),
                                                     permutation(eq.params))],
        "axis_index": lambda eq, ins, _: [lax.axis_index(axes(eq.params)).astype(np.int32)],
    }
    evaluate, DTYPES = jax_eval.evaluator(collectives)

    def array(entry):
        values = [float(v) if isinstance(v, str) else v for v in entry["values"]]
        return np.asarray(values, DTYPES[entry["dtype"]]).reshape(entry["shape"])

    def error_of(kiln, want):
        kiln = np.asarray(kiln, np.float64)
        want = np.asarray(want, np.float64)
        if kiln.shape != want.shape:
            return float("inf")
        scale = np.max(np.abs(want)) if want.size else 0.0
        difference = np.max(np.abs(kiln - want)) if want.size else 0.0
        return float(difference / scale if scale > 0 else difference)

    record = json.loads(pathlib.Path(argv[1]).read_text())
    failures, checks, worst = [], 0, {}
    for case in record["cases"]:
        name, dtype = case["name"], case["dtype"]
        try:
            program = kiln_program.Parser(case["program"]).program()
        except kiln_program.ParseError as error:
            failures.append(f"{name} {dtype}: the program text does not read: {error}")
            continue
        inputs = [jnp.asarray(array(e)) for e in case["inputs"]]
        batched = [jnp.asarray(array(e)) for e in case["batched_inputs"]]
        weight = jnp.asarray(array(case["weight"]))

        def run(*args):
            return evaluate(program, list(args))[0]

        def loss(args):
            return jnp.sum(run(*args) * weight)

        try:
            refs = {"eval": [run(*inputs)], "jit": [jax.jit(run)(*inputs)],
                    "vmap": [jax.vmap(run)(*batched)]}
            if name not in NO_JAX_GRAD:
                refs["grad"] = jax.grad(loss)(inputs)
        except Exception as error:  # JAX refusing the program is a failure to report
            failures.append(f"{name} {dtype}: JAX raised {type(error).__name__}: {error}")
            continue
        for transform, want in refs.items():
            checks += 1
            got = case["results"][transform]
            got = got if isinstance(got, list) else [got]
            if len(got) != len(want):
                failures.append(f"{name} {transform} {dtype}: kiln gave {len(got)} arrays, "
                                f"JAX {len(want)}")
                continue
            error = max(error_of(array(k), w) for k, w in zip(got, want))
            tolerance = TOLERANCES[dtype]
            key = (dtype, transform)
            if key not in worst or error > worst[key][0]:
                worst[key] = (error, name)
            status = "ok" if error <= tolerance else "FAILED"
            print(f"{status:6} {name:22} {transform:5} {dtype} error {error:.3g} "
                  f"(tolerance {tolerance:g})")
            if error > tolerance:
                failures.append(f"{name} {transform} {dtype}: error {error:.3g} > {tolerance:g}")
    print("\nworst error per transform:")
    for (dtype, transform), (error, name) in sorted(worst.items()):
        print(f"  {dtype} {transform:5} {error:.3g}  ({name})")
    for failure in failures:
        print("FAILED:", failure)
    print(f"{TOOL}: jax {jax.__version__}")
    print(f"{TOOL}: {checks} checks, {len(failures)} failed")
    return 1 if failures or checks == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
