#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) from real files:
the example configs, the program-text golden files, the first records of Debian's
Fashion-MNIST IDX files (plain and gzip), and safetensors files of every dtype written by
the `safetensors` package (the peers' environment) and by kiln (a run's final weights,
when a release build is given). The corpus is committed; run this again when those
sources change.

  tests/fuzz/make_seeds.py [--kiln build/release/kiln]
"""
import argparse
import gzip
import os
import pathlib
import shutil
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
    parser.add_argument("--kiln", help="a kiln binary, to add a file kiln writes")
    args = parser.parse_args()

    config = fresh("config")
    for toml in sorted((ROOT / "examples").glob("*.toml")):
        shutil.copy(toml, config / toml.name)

    program = fresh("program_text")
    for text in sorted((ROOT / "tests" / "ir" / "golden").glob("*.txt")):
        shutil.copy(text, program / text.name)

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
    if args.kiln:
        with tempfile.TemporaryDirectory() as runs:
            subprocess.run([args.kiln, "train", str(ROOT / "examples" / "fashion_mnist_mlp.toml"),
                            "--quiet", "--set", "train.max_steps=1", "--set", "data.train_limit=256",
                            "--set", "data.test_limit=256", "--set", f"experiment.runs_dir={runs}"],
                           check=True)
            written = sorted(pathlib.Path(runs).rglob("*.safetensors"))
            for path in written[:1]:
                shutil.copy(path, tensors / f"kiln_{path.name}")
    for target in sorted(p.name for p in CORPUS.iterdir()):
        files = list((CORPUS / target).iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
