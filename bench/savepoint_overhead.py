#!/usr/bin/python3
"""What asynchronous savepoints cost the MLP's training (issue 19: at most 2%).

Runs examples/fashion_mnist_mlp.toml for one epoch (469 steps at batch 128) with a
savepoint every 100 steps and with none but the final one, alternately (with, without,
with, ...) since the machine is noisy, and takes each pair's ratio of the training time
run.json records (`seconds`, from the run's start to the last step: data loading and
compilation are in both). Prints each pair and the median ratio.

  /usr/bin/python3 bench/savepoint_overhead.py [--pairs 7] [--build build/release]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train_seconds(kiln, runs, name, every):
    subprocess.run([kiln, "train", os.path.join(ROOT, "examples", "fashion_mnist_mlp.toml"),
                    "--quiet", "--set", "train.epochs=1", "--set", f"experiment.name={name}",
                    "--set", f"experiment.runs_dir={runs}", "--set",
                    f"train.savepoint_every={every}"], check=True, capture_output=True)
    (run_dir,) = glob.glob(os.path.join(runs, name, "*"))
    with open(os.path.join(run_dir, "run.json")) as f:
        info = json.load(f)
    saved = len(glob.glob(os.path.join(run_dir, "savepoints", "step-*")))
    return info["seconds"], info["median_step_ms"], saved


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    args = parser.parse_args()
    kiln = os.path.join(args.build, "kiln")
    ratios = []
    with tempfile.TemporaryDirectory(prefix="kiln-savepoint-bench-") as runs:
        for pair in range(args.pairs):
            with_s, with_ms, kept = train_seconds(kiln, runs, f"with{pair}", 100)
            without_s, without_ms, _ = train_seconds(kiln, runs, f"without{pair}", 0)
            ratios.append(with_s / without_s)
            print(f"pair {pair + 1}: every 100 steps {with_s:.3f} s (median step {with_ms:.2f} "
                  f"ms, {kept} savepoints kept), none {without_s:.3f} s (median step "
                  f"{without_ms:.2f} ms): ratio {ratios[-1]:.4f}")
    median = statistics.median(ratios)
    print(f"median ratio (with / without) over {args.pairs} pairs: {median:.4f} "
          f"({100 * (median - 1):+.2f}%); min {min(ratios):.4f}, max {max(ratios):.4f}")
    return 0 if median <= 1.02 else 1


if __name__ == "__main__":
    sys.exit(main())
