#!/usr/bin/env python3
"""Independent safetensors reader and writer (numpy + json, no safetensors package), used by
tests/io/safetensors_test.cc to cross-check kiln's implementation.

  safetensors_check.py FILE          validate FILE; print one tab-separated line per tensor
                                     (tensor, name, dtype, shape, sum) and per metadata entry
  safetensors_check.py --write FILE  write a fixed set of tensors the way the reference
                                     implementation lays them out (most-aligned dtype first,
                                     "__metadata__" first in the header)
"""
import json
import struct
import sys

import numpy as np

# safetensors dtype -> (numpy storage dtype, how to turn the stored values into float64)
DTYPES = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
    "I32": np.int32, "U32": np.uint32, "I64": np.int64, "U64": np.uint64,
    "F16": np.float16, "BF16": np.uint16, "F32": np.float32, "F64": np.float64,
}


def as_float64(dtype, values):
    if dtype == "BF16":  # the top half of a float32
        return (values.reshape(-1).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return values.astype(np.float64)


def no_duplicates(pairs):
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate key in {keys}")
    return dict(pairs)


def read(path):
    data = open(path, "rb").read()
    if len(data) < 8:
        raise ValueError("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"header length {n} past the end")
    header = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=no_duplicates)
    metadata = header.pop("__metadata__", {})
    if not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError("metadata values must be strings")
    buffer = data[8 + n:]
    tensors = {}
    spans = []
    for name, info in header.items():
        if set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError(f"{name}: fields {sorted(info)}")
        dtype = np.dtype(DTYPES[info["dtype"]])
        shape = tuple(info["shape"])
        begin, end = info["data_offsets"]
        if end - begin != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{name}: offsets do not match the shape")
        spans.append((begin, end, name))
        raw = np.frombuffer(buffer[begin:end], dtype=dtype.newbyteorder("<"))
        tensors[name] = (info["dtype"], shape, raw.reshape(shape))
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise ValueError(f"{name}: not contiguous (begins at {begin}, expected {position})")
        position = end
    if position != len(buffer):
        raise ValueError(f"{len(buffer) - position} trailing bytes")
    return tensors, metadata


def check(path):
    tensors, metadata = read(path)
    for name in sorted(tensors):
        dtype, shape, values = tensors[name]
        total = float(np.sum(as_float64(dtype, values)))
        print(f"tensor\t{name}\t{dtype}\t[{','.join(str(d) for d in shape)}]\t{total!r}")
    for key in sorted(metadata):
        print(f"metadata\t{key}\t{metadata[key]}")


def fixed_tensors():
    """The tensor set --write writes: every safetensors dtype kiln has, a scalar, an empty
    tensor. Name -> (safetensors dtype, values; BF16 as its uint16 bit patterns)."""
    return {
        "weights/kernel": ("F32", np.arange(6, dtype=np.float32).reshape(2, 3) / 4),
        "weights/bias": ("F64", np.array([1.5, -2.25], dtype=np.float64)),
        "step": ("I64", np.array(1234567890123, dtype=np.int64)),
        "labels": ("U8", np.array([3, 1, 4, 1, 5], dtype=np.uint8)),
        "mask": ("BOOL", np.array([[True, False], [False, True]])),
        "half": ("F16", np.array([0.5, -1.0, 65504.0], dtype=np.float16)),
        "brain": ("BF16", np.array([0x3F80, 0xC040], dtype=np.uint16)),  # 1.0, -3.0
        "count": ("U32", np.array([4000000000], dtype=np.uint32)),
        "index": ("I32", np.array([-7, 0, 7], dtype=np.int32)),
        "empty": ("F32", np.zeros((0, 4), dtype=np.float32)),
    }


def write(path):
    tensors = fixed_tensors()
    # The reference writer's order: larger elements first, then by name.
    order = sorted(tensors, key=lambda n: (-tensors[n][1].dtype.itemsize, n))
    header = {"__metadata__": {"format": "pt", "source": "safetensors_check.py"}}
    blobs = []
    offset = 0
    for name in order:
        dtype, values = tensors[name]
        blob = values.astype(values.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(values.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":
    try:
        if len(sys.argv) == 3 and sys.argv[1] == "--write":
            write(sys.argv[2])
        elif len(sys.argv) == 2:
            check(sys.argv[1])
        else:
            sys.exit(__doc__)
    except (ValueError, KeyError, UnicodeDecodeError) as error:
        sys.exit(f"safetensors_check.py: {sys.argv[-1]}: invalid: {error}")
