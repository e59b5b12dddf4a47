#!/usr/bin/env python3
"""The real safetensors package (its NumPy API, pinned in requirements/peers.txt) reading
what kiln writes and writing what kiln reads, for tests/io/safetensors_test.cc.

  safetensors_peer.py FILE          load FILE with safetensors.numpy and print one
                                    tab-separated line per tensor (tensor, name, dtype,
                                    shape, sum) and per metadata entry, as
                                    safetensors_check.py does
  safetensors_peer.py --write FILE  write safetensors_check.py's fixed tensors with
                                    safetensors.numpy.save_file

Any Python starts it: it runs itself again under the peers' Python (.venv/peers, created
by scripts/setup). A missing environment or another version than the pin exits 2 naming
scripts/setup.
"""
import pathlib
import sys

import peers


def main(argv):
    peers.enter("safetensors_peer.py")
    try:
        import ml_dtypes
        import numpy as np
        import safetensors
        from safetensors import safe_open
        from safetensors.numpy import save_file
    except ImportError as error:
        peers.fail("safetensors_peer.py", f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    peers.require("safetensors_peer.py", {"safetensors": safetensors.__version__})
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    import safetensors_check

    if len(argv) == 3 and argv[1] == "--write":
        tensors = {}
        for name, (dtype, values) in safetensors_check.fixed_tensors().items():
            tensors[name] = values.view(ml_dtypes.bfloat16) if dtype == "BF16" else values
        save_file(tensors, argv[2], metadata={"format": "pt", "source": "safetensors package"})
        return 0
    if len(argv) != 2:
        print(__doc__)
        return 2
    names = {np.dtype(ml_dtypes.bfloat16): "BF16"}
    for name, storage in safetensors_check.DTYPES.items():
        if name != "BF16":
            names[np.dtype(storage)] = name
    with safe_open(argv[1], framework="numpy") as file:
        metadata = file.metadata() or {}
        for name in sorted(file.keys()):
            values = file.get_tensor(name)
            dtype = names[values.dtype]
            total = float(np.sum(values.astype(np.float64)))
            shape = ",".join(str(d) for d in values.shape)
            print(f"tensor\t{name}\t{dtype}\t[{shape}]\t{total!r}")
    for key in sorted(metadata):
        print(f"metadata\t{key}\t{metadata[key]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
