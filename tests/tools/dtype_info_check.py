#!/usr/bin/env python3
"""kiln's finfo and iinfo against jnp.finfo and jnp.iinfo, for tests/core/dtype_info_test.cc,
which writes FILE: every field of kiln::finfo for f16, bf16, f32 and f64, and of
kiln::iinfo for u8, u32, i32 and i64. Each must equal JAX's exactly (each is a value of
the dtype, so both sides hold the same double).

  dtype_info_check.py FILE   exit 0 when everything agrees, 1 naming each difference,
                             2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import json
import pathlib
import sys

import peers

TOOL = "dtype_info_check.py"
DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
          "u8": "uint8", "u32": "uint32", "i32": "int32", "i64": "int64"}


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter(TOOL)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as error:
        peers.fail(TOOL, f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require(TOOL, {"jax": jax.__version__})
    record = json.loads(pathlib.Path(argv[1]).read_text())
    failures = []
    checked = 0
    for kind, info_of in (("finfo", jnp.finfo), ("iinfo", jnp.iinfo)):
        for name, fields in record[kind].items():
            info = info_of(getattr(jnp, DTYPES[name]))
            for field, kiln_value in fields.items():
                jax_value = getattr(info, field)
                checked += 1
                same = (int(jax_value) == kiln_value if kind == "iinfo"
                        else float(jax_value) == float(kiln_value))
                if not same:
                    failures.append(f"{kind}({name}).{field}: kiln {kiln_value!r}, jax {jax_value!r}")
    for failure in failures:
        print(f"{TOOL}: {failure}")
    print(f"{TOOL}: {checked} fields compared, {len(failures)} differ")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
