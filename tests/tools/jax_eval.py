"""kiln's program text run by JAX: each primitive of a program read by kiln_program.py
becomes the jax.lax / jnp call with the same meaning, for the peer checks that compare
kiln with JAX on the same programs (jax_transforms_check.py, jax_shard_map_check.py).

    evaluate, DTYPES = evaluator(extra)   evaluate(program, args) -> [jax arrays]

`extra` maps more primitive names to functions (eq, operands, evaluate) -> [results]: the
shard_map check adds shard_map and the collectives. Import JAX (and enable x64) first.
"""


def evaluator(extra=None):
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np
    from jax import lax

    import kiln_program

    extra = extra or {}

    DTYPES = {"bool": np.bool_, "u8": np.uint8, "i32": np.int32, "i64": np.int64,
              "u32": np.uint32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
              "f32": np.float32, "f64": np.float64}
    # kiln's error mode raises on an index out of range; the programs keep those in range,
    # where clamping changes nothing. kiln's fill reads 0 (JAX's take would read NaN).
    TAKE_MODE = {"error": "clip", "clip": "clip", "fill": "fill"}
    UPDATE_MODE = {"error": "clip", "clip": "clip", "fill": "drop"}
    HIGHEST = lax.Precision.HIGHEST

    UNARY = {
        "neg": lax.neg, "abs": lax.abs, "sign": lax.sign, "exp": lax.exp, "expm1": lax.expm1,
        "log": lax.log, "log1p": lax.log1p, "sqrt": lax.sqrt, "rsqrt": lax.rsqrt,
        "tanh": lax.tanh, "logistic": lax.logistic, "sin": lax.sin, "cos": lax.cos,
        "floor": lax.floor, "ceil": lax.ceil, "is_finite": lax.is_finite,
        "not": lax.bitwise_not, "erf": lax.erf, "erf_inv": lax.erf_inv,
        # kiln rounds half to even, like numpy.round (docs/arrays.md).
        "round": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
        "stop_gradient": lax.stop_gradient, "checkpoint_name": lambda x: x,
    }
    ELEMENTWISE = {
        "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
        "pow": lax.pow, "max": lax.max, "min": lax.min, "and": lax.bitwise_and,
        "or": lax.bitwise_or, "xor": lax.bitwise_xor, "eq": lax.eq, "ne": lax.ne,
        "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge, "shift_left": lax.shift_left,
        "shift_right_logical": lax.shift_right_logical,
        "shift_right_arithmetic": lax.shift_right_arithmetic, "select": lax.select,
    }

    def gather(x, indices, axis, batch_dims, mode):
        if batch_dims:
            return jax.vmap(lambda a, i: gather(a, i, axis - 1, batch_dims - 1, mode))(x, indices)
        return jnp.take(x, indices, axis=axis, mode=TAKE_MODE[mode], fill_value=0)

    def scatter(x, indices, updates, axis, batch_dims, mode, add):
        if batch_dims:
            return jax.vmap(lambda a, i, u: scatter(a, i, u, axis - 1, batch_dims - 1, mode, add))(
                x, indices, updates)
        at = x.at[(slice(None),) * axis + (indices,)]
        return (at.add if add else at.set)(updates, mode=UPDATE_MODE[mode])

    def window(x, init, op, p):
        return lax.reduce_window(x, np.array(init, x.dtype), op, p["window_dimensions"],
                                 p["window_strides"], list(zip(p["padding_low"], p["padding_high"])))

    def apply(eq, ins):
        p, prim = eq.params, eq.prim
        out_type = eq.outputs[0][1]
        if prim in extra:
            return extra[prim](eq, ins, evaluate)
        if prim in UNARY:
            return [UNARY[prim](ins[0])]
        if prim in ELEMENTWISE:
            # kiln broadcasts size-1 axes and rank-0 operands; lax wants equal shapes.
            return [ELEMENTWISE[prim](*[jnp.broadcast_to(x, out_type.shape) for x in ins])]
        if prim == "convert_element_type":
            return [lax.convert_element_type(ins[0], DTYPES[p["new_dtype"]])]
        if prim == "broadcast_in_dim":
            return [lax.broadcast_in_dim(ins[0], p["shape"], p["broadcast_dimensions"])]
        if prim == "reshape":
            return [lax.reshape(ins[0], p["new_sizes"])]
        if prim == "transpose":
            return [lax.transpose(ins[0], p["permutation"])]
        if prim == "slice":
            return [lax.slice(ins[0], p["start_indices"], p["limit_indices"], p["strides"] or None)]
        if prim == "dynamic_slice":
            starts = [ins[1][i] for i in range(ins[0].ndim)]
            return [lax.dynamic_slice(ins[0], starts, p["slice_sizes"])]
        if prim == "dynamic_update_slice":
            starts = [ins[2][i] for i in range(ins[0].ndim)]
            return [lax.dynamic_update_slice(ins[0], ins[1], starts)]
        if prim == "concatenate":
            return [lax.concatenate(ins, p["dimension"])]
        if prim == "pad":
            return [lax.pad(ins[0], ins[1], list(zip(p["low"], p["high"], p["interior"])))]
        if prim == "iota":
            return [lax.broadcasted_iota(DTYPES[p["dtype"]], p["shape"], p["dimension"])]
        if prim == "gather":
            return [gather(ins[0], ins[1], p["axis"], p["batch_dims"], p["mode"])]
        if prim in ("scatter", "scatter_add"):
            return [scatter(*ins, p["axis"], p["batch_dims"], p["mode"], prim == "scatter_add")]
        if prim in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod"):
            reduce = {"reduce_sum": jnp.sum, "reduce_max": jnp.max, "reduce_min": jnp.min,
                      "reduce_prod": jnp.prod}[prim]
            return [reduce(ins[0], axis=p["axes"])]
        if prim in ("argmax", "argmin"):
            arg = jnp.argmax if prim == "argmax" else jnp.argmin
            return [arg(ins[0], axis=p["axis"]).astype(DTYPES[p["index_dtype"]])]
        if prim == "cumsum":
            return [lax.cumsum(ins[0], p["axis"], p["reverse"])]
        if prim == "dot_general":
            preferred = p["preferred_element_type"]
            return [lax.dot_general(
                ins[0], ins[1], ((p["lhs_contracting"], p["rhs_contracting"]),
                                 (p["lhs_batch"], p["rhs_batch"])), precision=HIGHEST,
                preferred_element_type=None if preferred == "none" else DTYPES[preferred])]
        if prim == "conv_general_dilated":
            return [lax.conv_general_dilated(
                ins[0], ins[1], p["window_strides"], list(zip(p["padding_low"], p["padding_high"])),
                p["lhs_dilation"], p["rhs_dilation"], ("NHWC", "HWIO", "NHWC"),
                p["feature_group_count"], precision=HIGHEST)]
        if prim == "reduce_window_max":
            return [window(ins[0], -np.inf, lax.max, p)]
        if prim == "reduce_window_sum":
            return [window(ins[0], 0, lax.add, p)]
        if prim == "sort":
            return list(lax.sort(tuple(ins), dimension=p["dimension"], is_stable=True,
                                 num_keys=p["num_keys"]))
        if prim == "optimization_barrier":
            return list(lax.optimization_barrier(tuple(ins)))
        if prim == "scan":
            consts = ins[:p["num_consts"]]
            carry = ins[p["num_consts"]:p["num_consts"] + p["num_carry"]]
            xs = ins[p["num_consts"] + p["num_carry"]:]

            def step(c, x):
                outs = evaluate(p["body"], consts + list(c) + list(x))
                return tuple(outs[:p["num_carry"]]), tuple(outs[p["num_carry"]:])

            final, ys = lax.scan(step, tuple(carry), tuple(xs), length=p["length"],
                                 reverse=p["reverse"], unroll=p["unroll"])
            return list(final) + list(ys)
        if prim == "cond":
            branches = [lambda *a, b=b: tuple(evaluate(b, list(a))) for b in p["branches"]]
            return list(lax.switch(lax.convert_element_type(ins[0], np.int32), branches, *ins[1:]))
        if prim == "while_loop":
            cond_consts = ins[:p["cond_num_consts"]]
            body_end = p["cond_num_consts"] + p["body_num_consts"]
            body_consts = ins[p["cond_num_consts"]:body_end]
            final = lax.while_loop(lambda c: evaluate(p["cond"], cond_consts + list(c))[0],
                                   lambda c: tuple(evaluate(p["body"], body_consts + list(c))),
                                   tuple(ins[body_end:]))
            return list(final)
        raise NotImplementedError(f"no JAX translation of kiln's {prim}")

    def read(env, atom):
        if isinstance(atom, kiln_program.Literal):
            return jnp.asarray(np.array(atom.value, DTYPES[atom.type.dtype]))
        return env[atom]

    def evaluate(program, args):
        env = {name: value for (name, _), value in zip(program.inputs, args)}
        for eq in program.equations:
            outs = apply(eq, [read(env, atom) for atom in eq.operands])
            for (name, declared), value in zip(eq.outputs, outs):
                # A translation that gives another type is this script's bug, not kiln's.
                if tuple(value.shape) != declared.shape or value.dtype != DTYPES[declared.dtype]:
                    raise TypeError(f"{eq.prim} gave {value.dtype}{list(value.shape)}, the "
                                    f"program declares {declared.dtype}{list(declared.shape)}")
                env[name] = value
        return [read(env, atom) for atom in program.outputs]

    return evaluate, DTYPES
