#!/usr/bin/python3
"""What asynchronous savepoints cost the MLP's training (issue 19: at most 2%).

Runs examples/fashion_mnist_mlp.toml for one epoch (469 steps at batch 128) with a
savepoint every 100 steps and with none but the final one, alternately (with, without,
with, ...) since the machine is noisy, and takes each pair's ratio of the training time
run.json records (`seconds`, from the run's start to the end of the final savepoint: data
loading, compilation and the final savepoint are in both). Also prints what the training
thread itself spent on the periodic savepoints (run.json's savepoints.training_thread_seconds,
with minus without: taking the host copy and handing it over), a figure the noise of a
shared machine hardly touches. Prints each pair and the medians.

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
    saved = info["savepoints"]["started"]
    return info["seconds"], info["median_step_ms"], saved, \
        info["savepoints"]["training_thread_seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    args = parser.parse_args()
    kiln = os.path.join(args.build, "kiln")
    ratios = []
    direct = []
    with tempfile.TemporaryDirectory(prefix="kiln-savepoint-bench-") as runs:
        for pair in range(args.pairs):
            with_s, with_ms, saves, with_thread = train_seconds(kiln, runs, f"with{pair}", 100)
            without_s, without_ms, _, without_thread = train_seconds(kiln, runs, f"without{pair}",
                                                                     0)
            ratios.append(with_s / without_s)
            direct.append((with_thread - without_thread) / with_s)
            print(f"pair {pair + 1}: every 100 steps {with_s:.3f} s (median step {with_ms:.2f} "
                  f"ms, {saves} savepoints), none {without_s:.3f} s (median step "
                  f"{without_ms:.2f} ms): ratio {ratios[-1]:.4f}; the training thread spent "
                  f"{1e3 * (with_thread - without_thread):.1f} ms on the periodic ones "
                  f"({100 * direct[-1]:.2f}%)")
    median = statistics.median(ratios)
    print(f"median ratio (with / without) over {args.pairs} pairs: {median:.4f} "
          f"({100 * (median - 1):+.2f}%); min {min(ratios):.4f}, max {max(ratios):.4f}")
    print(f"median share of the training thread's time on periodic savepoints: "
          f"{100 * statistics.median(direct):.2f}%")
    return 0 if median <= 1.02 else 1


if __name__ == "__main__":
    sys.exit(main())
