#!/usr/bin/env python3
"""Checks kiln's named shardings against jax.sharding on 4 CPU devices.

The record (written by tests/sharding/sharding_matches_jax_test.cc) lists cases of a mesh
(axis names and sizes), a partition spec and a shape, with kiln's shard shape and, per
position of the mesh (row-major, the last axis fastest), the block that device holds. This
script builds the same jax.sharding.Mesh over jax.devices() in the same order and the same
NamedSharding, and compares shard_shape and devices_indices_map with kiln's, block by
block.

Usage: python3 tests/tools/jax_sharding_check.py KILN_RECORD.json
Exit status 0 when every case agrees, 1 naming each that does not, 2 when the peers'
environment is missing or holds other versions than the pins.
"""
import json
import os
import sys

import peers


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    # Before JAX starts: the host platform split into 4 devices, as KILN_CPU_DEVICES=4.
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=4").strip()
    peers.enter("jax_sharding_check")
    import jax
    import jaxlib
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    peers.require("jax_sharding_check", {"jax": jax.__version__, "jaxlib": jaxlib.__version__})

    record = json.load(open(argv[1]))
    failures = []
    for case in record["cases"]:
        names = tuple(axis["name"] for axis in case["mesh"])
        sizes = tuple(axis["size"] for axis in case["mesh"])
        count = int(np.prod(sizes))
        devices = np.array(jax.devices()[:count]).reshape(sizes)
        mesh = Mesh(devices, names)
        spec = PartitionSpec(*[None if not axes else axes[0] if len(axes) == 1 else tuple(axes)
                               for axes in case["spec"]])
        sharding = NamedSharding(mesh, spec)
        shape = tuple(case["shape"])
        where = f"mesh {dict(zip(names, sizes))} spec {spec} shape {shape}"
        if list(sharding.shard_shape(shape)) != case["shard_shape"]:
            failures.append(f"{where}: JAX's shard shape {sharding.shard_shape(shape)}, kiln's "
                            f"{case['shard_shape']}")
        indices = sharding.devices_indices_map(shape)
        for position, device in enumerate(devices.flat):
            jax_block = [[s.start or 0, shape[d] if s.stop is None else s.stop]
                         for d, s in enumerate(indices[device])]
            kiln_block = [[start, limit] for start, limit in
                          zip(case["blocks"][position]["start"], case["blocks"][position]["limit"])]
            if jax_block != kiln_block:
                failures.append(f"{where}: device {position} holds {jax_block} in JAX, "
                                f"{kiln_block} in kiln")
    for failure in failures:
        print(failure)
    print(f"jax_sharding_check: jax {jax.__version__}: {len(record['cases'])} cases, "
          f"{len(failures)} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
