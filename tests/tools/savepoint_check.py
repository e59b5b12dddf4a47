#!/usr/bin/env python3
"""Checks every committed savepoint under the given run directories with the real
safetensors package (pinned in requirements/peers.txt), independently of kiln's reader:
the COMMITTED marker matches manifest.json's SHA-256, each listed file has its size and
SHA-256, and each tree's file loads with safetensors.numpy holding exactly the manifest's
leaves (path, dtype, shape). Prints one line per savepoint; exits 1 naming the first
problem of each bad one, 0 when all are good.

  savepoint_check.py RUN_DIR...

Any Python starts it: it runs itself again under the peers' Python (.venv/peers).
"""
import hashlib
import json
import os
import sys

import peers

DTYPES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "u32": "uint32",
          "u8": "uint8", "bool": "bool", "f16": "float16"}


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check(path, load_file):
    with open(os.path.join(path, "manifest.json"), "rb") as f:
        manifest_bytes = f.read()
    with open(os.path.join(path, "COMMITTED")) as f:
        marker = json.load(f)
    if marker["manifest_sha256"] != hashlib.sha256(manifest_bytes).hexdigest():
        return "manifest.json does not match COMMITTED"
    manifest = json.loads(manifest_bytes)
    for name, record in manifest["files"].items():
        file = os.path.join(path, name)
        if os.path.getsize(file) != record["bytes"] or sha256(file) != record["sha256"]:
            return f"{name} differs from the manifest"
    for tree, record in manifest["trees"].items():
        if not record["leaves"]:
            continue
        tensors = load_file(os.path.join(path, tree + ".safetensors"))
        want = {leaf["path"]: (DTYPES.get(leaf["dtype"], leaf["dtype"]), tuple(leaf["shape"]))
                for leaf in record["leaves"]}
        got = {name: (str(array.dtype), tuple(array.shape)) for name, array in tensors.items()}
        if want != got:
            return f"{tree}.safetensors holds {got}, the manifest says {want}"
    return None


def main(argv):
    peers.enter("savepoint_check.py")
    from safetensors.numpy import load_file

    bad = 0
    for run_dir in argv[1:]:
        directory = os.path.join(run_dir, "savepoints")
        names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
        for name in names:
            path = os.path.join(directory, name)
            if not name.startswith("step-") or not os.path.isfile(os.path.join(path, "COMMITTED")):
                continue
            try:
                problem = check(path, load_file)
            except Exception as error:  # a damaged file is a finding, not a crash
                problem = f"{type(error).__name__}: {error}"
            print(f"{path}: {problem or 'ok'}")
            bad += problem is not None
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
