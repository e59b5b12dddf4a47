#!/usr/bin/env python3
"""A layer type of a user's own in a config file (docs/training.md, *Layer types of your
own*), as examples/custom_layer.cc registers one (`residual_mlp`):

1. The example program trains examples/fashion_mnist_residual.toml (a slice of the data):
   the run's params hold the layer's own, under its path ("residual_mlp_3/dense_0/kernel").
2. `kiln` alone refuses the config, and resuming the run, naming the unknown type and the
   way to add it; the example program resumes the completed run (nothing to do).
3. Bad configs are refused by name as for kiln's own layers: a missing required field, a
   field the type does not take, an out-of-range value.
4. The run exported by the example program is served by plain `kiln predict`: an artifact
   holds the traced program, not the code that registered the layer.

  custom_layer_check.py KILN CUSTOM_LAYER WORKDIR
"""
import json
import pathlib
import shutil
import signal
import struct
import subprocess
import sys
import time

import numpy as np

TOOL = "custom_layer_check"
ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "fashion_mnist_residual.toml"
SMALL = ["--set", "data.train_limit=512", "--set", "data.test_limit=200", "--set",
         "train.epochs=1", "--set", "train.batch_size=64"]


def fail(message):
    print(f"{TOOL}: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


def safetensors_names(path):
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    return sorted(name for name in header if name != "__metadata__")


def expect_refused(result, *phrases, what):
    if result.returncode != 1:
        fail(f"{what}: exit status {result.returncode}, expected 1\n{result.stderr}")
    for phrase in phrases:
        if phrase not in result.stderr:
            fail(f"{what}: the error does not say {phrase!r}:\n{result.stderr}")


def status(run_dir):
    return json.loads((run_dir / "run.json").read_text())["status"]


def check_resume(kiln, custom, work):
    """An interrupted run: kiln refuses to resume it, leaving it as it was; the program that
    registered the layer resumes it to the end."""
    runs = work / "interrupted"
    process = subprocess.Popen(
        [custom, "train", CONFIG, "--set", "train.epochs=2", "--set",
         f"experiment.runs_dir={runs}", "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    metrics = None
    while time.monotonic() < deadline and process.poll() is None:
        found = list(runs.glob("*/*/metrics.jsonl"))
        if found and found[0].stat().st_size > 0:
            metrics = found[0]
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    if metrics is None or process.returncode != 130:
        fail(f"the run was not interrupted (exit status {process.returncode}): {err}")
    run_dir = metrics.parent
    expect_refused(run(kiln, "resume", run_dir), "unknown layer type 'residual_mlp'",
                   what="kiln resume")
    if status(run_dir) != "interrupted":
        fail(f"a refused resume changed the run's status to {status(run_dir)}")
    resumed = run(custom, "resume", run_dir, "--quiet")
    if resumed.returncode or status(run_dir) != "completed":
        fail(f"custom_layer resume: {resumed.stdout} {resumed.stderr}")
    print("kiln refuses to resume the run by the type's name and leaves it interrupted; the "
          "program that registered the type resumes it to the end")


def main():
    kiln, custom, work = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    runs = ["--set", f"experiment.runs_dir={work / 'runs'}"]

    trained = run(custom, "train", CONFIG, *SMALL, *runs, "--quiet")
    if trained.returncode:
        fail(f"custom_layer train: {trained.stderr}")
    (run_dir,) = (work / "runs" / "fashion_mnist_residual").iterdir()
    names = safetensors_names(run_dir / "params.safetensors")
    wanted = [f"residual_mlp_3/dense_{i}/{leaf}" for i in (0, 2) for leaf in ("bias", "kernel")]
    if not set(wanted) <= set(names):
        fail(f"the run's params do not hold the layer's {wanted}: {names}")
    print(f"custom_layer train: params {names}")

    expect_refused(run(kiln, "train", CONFIG, *SMALL, *runs),
                   "unknown layer type 'residual_mlp'", "register_layer_type",
                   what="kiln train")
    check_resume(kiln, custom, work)

    text = CONFIG.read_text()
    layer = 'type = "residual_mlp"\nfeatures = 512\n'
    if layer not in text:
        fail("examples/fashion_mnist_residual.toml no longer has the residual_mlp layer")
    bad = {
        "missing": (text.replace(layer, 'type = "residual_mlp"\n'),
                    "missing field 'features'; residual_mlp takes: features"),
        "foreign": (text.replace(layer, layer + "rate = 0.5\n"),
                    "unknown field 'rate' for a residual_mlp layer; residual_mlp takes: features"),
        "range": (text.replace(layer, 'type = "residual_mlp"\nfeatures = 0\n'),
                  "features = 0 is out of range; expected an integer in [1, 65536]"),
    }
    for name, (config_text, phrase) in bad.items():
        path = work / f"{name}.toml"
        path.write_text(config_text)
        expect_refused(run(custom, "train", path, *runs), str(path), phrase,
                       what=f"a config with a {name} field")
    print("a missing, a foreign and an out-of-range field are refused by name")

    exported = run(custom, "export", run_dir, "--artifacts", work / "artifacts")
    if exported.returncode:
        fail(f"custom_layer export: {exported.stderr}")
    artifact = exported.stdout.strip().splitlines()[-1]
    images = np.zeros((3, 28, 28), np.uint8)
    np.save(work / "images.npy", images)
    predicted = run(kiln, "predict", artifact, work / "images.npy")
    if predicted.returncode or len(predicted.stdout.strip().splitlines()) < 3:
        fail(f"kiln predict on the exported artifact: {predicted.stdout} {predicted.stderr}")
    print("plain kiln predict serves the artifact the example program exported")
    print(f"{TOOL}: ok")


if __name__ == "__main__":
    main()
