"""The Fashion-MNIST IDX files of Debian's dataset-fashion-mnist, decoded with NumPy: shared by
the peers' benchmark scripts (bench/jax_fmnist.py, bench/torch_fmnist.py)."""
import gzip

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndims = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)
