#!/usr/bin/python3
"""Rematerialization per block, side by side (issue 47; docs/memory.md).

Trains the CNN example for a short run under each policy of the table below, in rounds that
alternate the policies (the machine is noisy), with `kiln bench step`, and prints from each
run's run.json what the memory report and the timing report say: the activations the
backward pass keeps (the planner's saved_activations), the planner's estimate of the step's
peak, the allocator's observed peak, and the median step time. Each policy differs from the
first only in `--set model.layers[N].remat...` overrides; the params' bits are the same
(checked here too, from params_sha256, at the same step count).

  /usr/bin/python3 bench/remat_policies.py [--rounds 2] [--steps 60] [--build build/release]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "examples", "fashion_mnist_cnn.toml")

# The CNN's layers: conv2d_0 relu_1 max_pool_2 | conv2d_3 relu_4 max_pool_5 | flatten_6
# dense_7 relu_8 | dense_9.
POLICIES = [
    ("none", []),
    ("conv blocks, save_dot_outputs",
     ["model.layers[0].remat=save_dot_outputs", "model.layers[0].remat_span=3",
      "model.layers[3].remat=save_dot_outputs", "model.layers[3].remat_span=3"]),
    ("conv blocks, save_nothing",
     ["model.layers[0].remat=save_nothing", "model.layers[0].remat_span=3",
      "model.layers[3].remat=save_nothing", "model.layers[3].remat_span=3"]),
    ("every block, save_nothing",
     ["model.layers[0].remat=save_nothing", "model.layers[0].remat_span=3",
      "model.layers[3].remat=save_nothing", "model.layers[3].remat_span=3",
      "model.layers[6].remat=save_nothing", "model.layers[6].remat_span=3"]),
]


def run(kiln, runs, steps, overrides):
    args = [kiln, "bench", "step", CONFIG, "--steps", str(steps), "--runs-dir", runs]
    for override in overrides:
        args += ["--set", override]
    subprocess.run(args, check=True, capture_output=True)
    (path,) = glob.glob(os.path.join(runs, "*", "*", "run.json"))
    with open(path) as f:
        info = json.load(f)
    memory = info["memory"]
    return {"saved": memory["estimate"]["saved_activations"],
            "estimate": memory["estimate"]["total"],
            "observed": memory["observed_peak_bytes"],
            "step_ms": info["median_step_ms"],
            "sha": info["params_sha256"]}


def mib(n):
    return f"{n / 2**20:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    args = parser.parse_args()
    kiln = os.path.join(args.build, "kiln")
    results = {name: [] for name, _ in POLICIES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for k, (name, overrides) in enumerate(POLICIES):
                results[name].append(run(kiln, os.path.join(tmp, f"{r}_{k}"), args.steps,
                                         overrides))
    first = results[POLICIES[0][0]]
    print(f"CNN example, batch 128, {args.steps} steps per run, {args.rounds} rounds alternating")
    print(f"{'policy':<32} {'saved MiB':>10} {'estimate MiB':>13} {'observed MiB':>13} "
          f"{'step ms (per round)':>22} {'step / none':>12} {'same bits':>10}")
    for name, _ in POLICIES:
        rows = results[name]
        ratios = [row["step_ms"] / base["step_ms"] for row, base in zip(rows, first)]
        same = all(row["sha"] == base["sha"] for row, base in zip(rows, first))
        steps = ", ".join(f"{row['step_ms']:.2f}" for row in rows)
        print(f"{name:<32} {mib(rows[0]['saved']):>10} {mib(rows[0]['estimate']):>13} "
              f"{mib(max(row['observed'] for row in rows)):>13} {steps:>22} "
              f"{statistics.median(ratios):>12.2f} {'yes' if same else 'NO':>10}")


if __name__ == "__main__":
    main()
