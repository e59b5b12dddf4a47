#!/usr/bin/env python3
"""Predicting with an exported artifact, as a user and a service would (docs/artifacts.md):

1. The embedding example (examples/serve_artifact.cc, the public C++ API alone) serves raw
   Fashion-MNIST records from stdin, more than a batch and not a whole number of them; its
   classes must be `kiln predict`'s on the same records, a partial record and a tampered
   artifact must be refused by name.
2. A model trained on a CSV file (examples/wine_mlp.toml's layout, headerless with a line
   of counts and the label in the last column) predicts on a CSV file laid out the same
   way: its logits must equal those `kiln predict` gives for the same records as .npy, bit
   for bit; a missing cell and a model trained on images are refused by name.

  predict_check.py KILN SERVE_ARTIFACT WORKDIR
"""
import gzip
import pathlib
import shutil
import subprocess
import sys

import numpy as np

TOOL = "predict_check"
ROOT = pathlib.Path(__file__).resolve().parents[2]
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")
WINE = pathlib.Path("/usr/lib/python3/dist-packages/sklearn/datasets/data/wine_data.csv")

MLP = """
[experiment]
name = "served"
seed = 1
runs_dir = "{runs}"
[data]
dataset = "fashion_mnist"
dir = "{fashion}"
train_limit = 1024
test_limit = 300
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dense"
features = 32
[[model.layers]]
type = "relu"
[[model.layers]]
type = "dense"
features = 10
[optim]
name = "adamw"
lr = 1e-3
[train]
epochs = 1
batch_size = 64
eval_batch_size = 100
"""


def fail(message):
    print(f"{TOOL}: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, **kwargs)


def trained_and_exported(kiln, work, name, config_text):
    config = work / f"{name}.toml"
    config.write_text(config_text)
    result = run(kiln, "train", config, "--quiet")
    if result.returncode:
        fail(f"kiln train {name}: {result.stderr.decode()}")
    (run_dir,) = (work / f"runs_{name}" / name).iterdir()
    result = run(kiln, "export", run_dir, "--artifacts", work / "artifacts", text=True)
    if result.returncode:
        fail(f"kiln export {name}: {result.stderr}")
    return pathlib.Path(result.stdout.strip().splitlines()[-1])


def predicted_classes(text):
    return [int(line.split()[0]) for line in text.strip().splitlines()]


def check_service(kiln, serve, work):
    artifact = trained_and_exported(
        kiln, work, "served", MLP.format(runs=work / "runs_served", fashion=FASHION))
    data = gzip.open(FASHION / "t10k-images-idx3-ubyte.gz").read()
    images = np.frombuffer(data, np.uint8, offset=16).reshape(-1, 28, 28)[:237]
    np.save(work / "served.npy", images)
    expected = run(kiln, "predict", artifact, work / "served.npy", text=True)
    if expected.returncode:
        fail(f"kiln predict: {expected.stderr}")
    served = run(serve, artifact, input=images.tobytes())
    if served.returncode:
        fail(f"serve_artifact: {served.stderr.decode()}")
    lines = served.stdout.decode().strip().splitlines()
    if predicted_classes(served.stdout.decode()) != predicted_classes(expected.stdout):
        fail("serve_artifact's classes differ from kiln predict's")
    probabilities = [float(line.split()[1]) for line in lines]
    if not all(0.1 <= p <= 1 for p in probabilities):
        fail(f"a top-class probability outside [0.1, 1]: {min(probabilities)}")
    if b"served 237 records" not in served.stderr:
        fail(f"serve_artifact did not report 237 records: {served.stderr.decode()}")
    partial = run(serve, artifact, input=images.tobytes()[:-5])
    if partial.returncode != 1 or b"ends inside record 236 (779 stray bytes)" not in partial.stderr:
        fail(f"a partial record was not refused: {partial.stderr.decode()}")
    tampered = work / "tampered"
    shutil.rmtree(tampered, ignore_errors=True)
    shutil.copytree(artifact, tampered)
    with open(tampered / "program.txt", "a") as program:
        program.write(" ")
    refused = run(serve, tampered, input=images.tobytes())
    if refused.returncode != 1 or b"the SHA-256 of program.txt" not in refused.stderr:
        fail(f"a tampered artifact was not refused: {refused.stderr.decode()}")
    print(f"serve_artifact: {len(lines)} records answered as kiln predict answers them; a "
          "partial record and a tampered artifact refused")
    return artifact


def check_csv(kiln, work, image_artifact):
    config = (ROOT / "examples" / "wine_mlp.toml").read_text()
    config = config.replace('name = "wine_mlp"', 'name = "wine"', 1)
    config = config.replace("[experiment]", f'[experiment]\nruns_dir = "{work / "runs_wine"}"', 1)
    artifact = trained_and_exported(kiln, work, "wine", config)
    # The same layout as the training file: its line of counts, no header, 13 features
    # and the label last (ignored).
    lines = WINE.read_text().splitlines()
    records = np.array([[float(v) for v in line.split(",")[:13]] for line in lines[1:]])
    (work / "wine.csv").write_text("\n".join(lines) + "\n")
    np.save(work / "wine.npy", records)
    from_csv = run(kiln, "predict", artifact, work / "wine.csv", "--output", work / "csv.npy",
                   text=True)
    from_npy = run(kiln, "predict", artifact, work / "wine.npy", "--output", work / "npy.npy",
                   text=True)
    if from_csv.returncode or from_npy.returncode:
        fail(f"kiln predict on CSV / npy: {from_csv.stderr} {from_npy.stderr}")
    csv_logits, npy_logits = np.load(work / "csv.npy"), np.load(work / "npy.npy")
    if csv_logits.shape != (len(records), 3) or csv_logits.tobytes() != npy_logits.tobytes():
        fail("the CSV records' logits differ from the same records' as .npy")
    damaged = lines[:]
    fields = damaged[5].split(",")
    fields[3] = ""
    damaged[5] = ",".join(fields)
    (work / "damaged.csv").write_text("\n".join(damaged) + "\n")
    refused = run(kiln, "predict", artifact, work / "damaged.csv", text=True)
    if refused.returncode == 0 or "line 6 (record 4), column '3': no value" not in refused.stderr:
        fail(f"a CSV record with a missing cell was not refused: {refused.stderr}")
    images = run(kiln, "predict", image_artifact, work / "wine.csv", text=True)
    if images.returncode == 0 or "was not trained on CSV records" not in images.stderr:
        fail(f"CSV records for an image model were not refused: {images.stderr}")
    print(f"kiln predict on CSV: {len(records)} wine records, the .npy logits bit for bit; a "
          "missing cell and an image model refused")


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    kiln, serve, work = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    image_artifact = check_service(kiln, serve, work)
    check_csv(kiln, work, image_artifact)


if __name__ == "__main__":
    main()
