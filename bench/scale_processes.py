#!/usr/bin/python3
"""`mpirun -np P kiln train` for P = 1, 2, 4, 8, 16 on this machine (issue 49, "scale
checked on this machine"): the MLP example on 2,048 training images for one epoch (16
steps of 128), mesh.data = P with one logical device per process, mesh.chunks = 16 so that
every P adds the same chunks in the same tree. For each P it prints the params' SHA-256
(the same for every P, checked), the bytes each rank sent per step against the
reduce-scatter + all-gather formula 2 (P - 1) / P x the sums' bytes (checked within 1%),
and the median step time. Every rank runs on this machine's cores (--oversubscribe), so
beyond P = 2 the step time measures the sharing of two cores by P processes, not a
cluster: what it shows is that the bits and the bytes hold, and what P processes on one
machine cost.

  /usr/bin/python3 bench/scale_processes.py [--build build/release] [--processes 1,2,4,8,16]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader",
          "--mca", "btl_vader_single_copy_mechanism", "none"]


def train(kiln, processes, runs):
    args = [kiln, "train", os.path.join(ROOT, "examples", "fashion_mnist_mlp.toml"), "--quiet",
            "--set", "data.train_limit=2048", "--set", "data.test_limit=500", "--set",
            "train.epochs=1", "--set", "mesh.chunks=16", "--set", f"mesh.data={processes}",
            "--set", "tracking.tensorboard=false", "--set", "tracking.catalog=false", "--set",
            f"experiment.runs_dir={runs}"]
    env = {**os.environ, "KILN_CPU_DEVICES": "1", "KILN_COMPUTE_THREADS": "1",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    command = [*MPIRUN, "-np", str(processes), "-x", "KILN_CPU_DEVICES", "-x",
               "KILN_COMPUTE_THREADS", *args]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    if result.returncode != 0:
        sys.exit(f"P = {processes} failed ({result.returncode}):\n{result.stderr}")
    (run_dir,) = glob.glob(os.path.join(runs, "fashion_mnist_mlp", "*"))
    with open(os.path.join(run_dir, "run.json")) as file:
        return json.load(file)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--processes", default="1,2,4,8,16")
    args = parser.parse_args()
    kiln = os.path.abspath(os.path.join(args.build, "kiln"))
    scratch = tempfile.mkdtemp(prefix="kiln-scale-")
    shas, failures = set(), []
    print(f"{'P':>3} {'params sha256':<18} {'bytes/rank/step':>16} {'formula':>12} "
          f"{'ratio':>7} {'median step':>12}")
    try:
        for processes in (int(p) for p in args.processes.split(",")):
            info = train(kiln, processes, os.path.join(scratch, f"p{processes}"))
            timing = info["timing"]
            sums = 4 * info["parameters"]  # f32 gradients (the loss and counts are bytes more)
            sent = timing["process_bytes_sent"] / info["steps"]
            formula = 2 * (processes - 1) / processes * sums
            ratio = sent / formula if formula else float("nan")
            shas.add(info["params_sha256"])
            if processes > 1 and not 1.0 <= ratio <= 1.01:
                failures.append(f"P = {processes}: {sent:.0f} bytes per rank and step, the "
                                f"formula says {formula:.0f}")
            print(f"{processes:>3} {info['params_sha256'][:16]:<18} {sent:>16.0f} "
                  f"{formula:>12.0f} {ratio:>7.4f} {timing['step_ms']['median']:>9.2f} ms")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if len(shas) != 1:
        failures.append(f"{len(shas)} different params SHA-256 across P: {sorted(shas)}")
    for failure in failures:
        print(f"FAIL: {failure}")
    print("the same params for every P; bytes per rank within 1% of 2 (P - 1) / P of the sums"
          if not failures else "")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
