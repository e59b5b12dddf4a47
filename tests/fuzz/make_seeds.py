#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) from real files:
the example configs, the program-text golden files, the first records of Debian's
Fashion-MNIST IDX files (plain and gzip), safetensors files of every dtype written by the
`safetensors` package and one written by kiln, NPY files of every dtype from NumPy's
writer, the heads of scikit-learn's bundled CSVs with hand-made quoting cases, and a
savepoint manifest and an artifact manifest. kiln's files come from the savepoint the savepoint_manifest target
builds (so the fuzz build must exist). The corpus is committed; run this again when those
sources change.

  .venv/peers/bin/python tests/fuzz/make_seeds.py [--fuzz-build build/asan]
"""
import argparse
import gzip
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")


def fresh(target):
    path = CORPUS / target
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def idx_records(source, rows):
    """The first `rows` records of an IDX file, with its first dimension set to `rows`."""
    raw = gzip.decompress(source.read_bytes())
    ndims = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    per_row = 1
    for d in dims[1:]:
        per_row *= d
    header = raw[:4] + rows.to_bytes(4, "big") + raw[8:4 + 4 * ndims]
    return header + raw[4 + 4 * ndims:4 + 4 * ndims + rows * per_row]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fuzz-build", default=str(ROOT / "build" / "asan"),
                        help="the fuzz build, whose savepoint_manifest target writes the "
                        "savepoint seeds (default: build/asan)")
    args = parser.parse_args()

    config = fresh("config")
    for toml in sorted((ROOT / "examples").glob("*.toml")):
        shutil.copy(toml, config / toml.name)

    program = fresh("program_text")
    for text in sorted((ROOT / "tests" / "ir" / "golden").glob("*.txt")):
        shutil.copy(text, program / text.name)
    # Sharded types (docs/ir.md), which no golden program has yet.
    (program / "sharded.txt").write_text(
        "{ lambda ; a:f32[8,4]{data,_} b:f32[8,4]{(data,model),_} c:f32[]{}. let\n"
        "    d:f32[8,4] = add a b\n"
        "  in (d) }\n")

    # The idx target's first byte picks the form: even plain, odd gzip (idx_fuzz.cc).
    idx = fresh("idx")
    for name in ("train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        for rows in (1, 3):
            record = idx_records(FASHION / name, rows)
            stem = f"{name.split('-ubyte')[0]}-{rows}"
            (idx / f"{stem}.plain").write_bytes(b"\x00" + record)
            (idx / f"{stem}.gz").write_bytes(b"\x01" + gzip.compress(record, mtime=0))

    tensors = fresh("safetensors")
    script = ROOT / "tests" / "tools" / "safetensors_peer.py"
    subprocess.run([sys.executable, str(script), "--write", str(tensors / "every_dtype.safetensors")],
                   check=True)
    # NumPy's own writer, every dtype read_npy takes, and a version 2.0 header.
    import numpy as np
    npy = fresh("npy")
    for dtype in ("bool", "uint8", "<i4", "<i8", "<u4", "<f2", "<f4", "<f8"):
        array = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
        with open(npy / f"{np.dtype(dtype).name}.npy", "wb") as out:
            np.lib.format.write_array(out, array, version=(1, 0))
    with open(npy / "float32_v2.npy", "wb") as out:
        np.lib.format.write_array(out, np.zeros((1, 4), "<f4"), version=(2, 0))
    with open(npy / "scalar.npy", "wb") as out:
        np.lib.format.write_array(out, np.array(3.5, "<f8"), version=(1, 0))

    # Token files in llm.c's layout (256 int32 of header, uint16 tokens): bytes of text, a
    # few GPT-2 token ids, none. The last byte picks the vocabulary (token_file_fuzz.cc).
    tokens = fresh("token_file")

    def token_file(name, ids):
        header = [20240520, 1, len(ids)] + [0] * 253
        (tokens / name).write_bytes(struct.pack("<256i", *header) + struct.pack(f"<{len(ids)}H", *ids))

    token_file("bytes_genesis.bin", list(b"In the beginning God created the heaven and the earth.\n"))
    token_file("gpt2_tokens.bin", [818, 262, 3726, 1793, 2727, 262, 9538, 290, 262, 4534, 13, 50256])
    token_file("empty.bin", [])

    # The csv target's first byte: bit 0 header, bits 1-2 delimiter (csv_fuzz.cc).
    csv = fresh("csv")
    sklearn_data = pathlib.Path("/usr/lib/python3/dist-packages/sklearn/datasets/data")
    wine = (sklearn_data / "wine_data.csv").read_bytes().splitlines(keepends=True)
    (csv / "wine_head.csv").write_bytes(b"\x09" + b"".join(wine[:12]))  # header, skip 1
    iris = (sklearn_data / "iris.csv").read_bytes().splitlines(keepends=True)
    (csv / "iris_head.csv").write_bytes(b"\x09" + b"".join(iris[:12]))
    (csv / "quoted.csv").write_bytes(
        b"\x01" + b'name,value\r\n"a, b",1.5\r\n"say ""hi""",NA\r\n"two\nlines",-2e3\r\n')
    (csv / "semicolons.csv").write_bytes(b"\x03" + b"x;y;label\n1;2;0\n3;;1\n5;6\n")
    (csv / "no_header.csv").write_bytes(b"\x00" + b"1,2,3\n4,5,6\n")

    # The savepoint_manifest target's seed is the manifest of the savepoint it builds; that
    # savepoint's weights are a small safetensors file written by kiln.
    manifests = fresh("savepoint_manifest")
    binary = pathlib.Path(args.fuzz_build) / "tests" / "fuzz" / "savepoint_manifest_fuzz"
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as empty:
        subprocess.run([str(binary), "-runs=0", empty], check=True, capture_output=True,
                       env={**os.environ, "KILN_FUZZ_SEED_DIR": out})
        shutil.copy(pathlib.Path(out) / "manifest.json", manifests / "manifest.json")
        shutil.copy(pathlib.Path(out) / "params.safetensors", tensors / "kiln_params.safetensors")
    # The artifact_manifest target's seed: a manifest as `kiln export` writes one.
    artifact = fresh("artifact_manifest")
    shutil.copy(ROOT / "tests" / "artifact" / "manifest_seed.json", artifact / "manifest.json")
    # ...and one of a model trained on a CSV file, with its layout.
    shutil.copy(ROOT / "tests" / "artifact" / "manifest_csv_seed.json",
                artifact / "manifest_csv.json")
    for target in sorted(p.name for p in CORPUS.iterdir()):
        files = list((CORPUS / target).iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
