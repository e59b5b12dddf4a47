#!/usr/bin/python3
"""What per-example gradients cost: the DP-SGD train step against the ordinary one, for the
CNN of examples/fashion_mnist_cnn.toml at batch 128, in kiln, JAX (jax.vmap of jax.grad
with optax, bench/jax_fmnist.py --private) and PyTorch 2 with Opacus (GradSampleModule and
DPOptimizer, bench/torch_fmnist.py --private), in one run (issue 50, docs/performance.md).

Every round runs, one after the other, each framework's ordinary step and its private step
(each process the median of its timed steps), so that the private / ordinary ratio of a
framework is taken within one round; and kiln's private step against each peer's, round by
round (above 1: kiln is faster). The machine is noisy (about +-30% run to run): compare the
ratios, pair by pair. All steps clip to L2 norm 1 and add noise of multiplier 1.1; kiln's
step is timed on a batch of 128 real rows (a run's Poisson batches add padding rows:
docs/privacy.md).

  /usr/bin/python3 bench/dp_step_peers.py [--rounds 3] [--build build/release] [--steps 30]

Needs scripts/setup --bench (PyTorch 2 and Opacus in .venv/bench; JAX in .venv/peers).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAX_PYTHON = os.path.join(ROOT, ".venv", "peers", "bin", "python")
TORCH_PYTHON = os.path.join(ROOT, ".venv", "bench", "bin", "python")


def median_step_ms(command):
    process = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if process.returncode != 0:
        sys.exit(f"failed ({process.returncode}): {' '.join(command)}\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])["median_step_ms"]


def commands(args):
    kiln = [os.path.join(args.build, "bench", "train_step_bench"), "--config",
            "examples/fashion_mnist_cnn.toml", "--steps", str(args.steps), "--json"]
    private = ["--set", "privacy.enabled=true", "--set", "privacy.noise_multiplier=1.1",
               "--set", "privacy.clip_norm=1.0", "--set", f"privacy.examples_per_chunk={args.chunk}"]
    peer = ["--model", "cnn", "--steps", str(args.steps), "--json"]
    return {
        "kiln": (kiln, kiln + private),
        "jax": ([JAX_PYTHON, "bench/jax_fmnist.py"] + peer,
                [JAX_PYTHON, "bench/jax_fmnist.py"] + peer + ["--private"]),
        "torch+opacus": ([TORCH_PYTHON, "bench/torch_fmnist.py"] + peer,
                         [TORCH_PYTHON, "bench/torch_fmnist.py"] + peer + ["--private"]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per process")
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--chunk", type=int, default=32, help="kiln's privacy.examples_per_chunk")
    args = parser.parse_args()
    for python in (JAX_PYTHON, TORCH_PYTHON):
        if not os.path.exists(python):
            sys.exit(f"{python} is missing: run scripts/setup --bench")
    runs = commands(args)
    results = {name: {"ordinary": [], "private": []} for name in runs}
    for round_index in range(args.rounds):
        for name, (ordinary, private) in runs.items():
            results[name]["ordinary"].append(median_step_ms(ordinary))
            results[name]["private"].append(median_step_ms(private))
        line = ", ".join(f"{name} {r['ordinary'][-1]:.1f} / {r['private'][-1]:.1f} ms"
                         for name, r in results.items())
        print(f"round {round_index + 1} (ordinary / private): {line}", flush=True)
    print("\nprivate / ordinary step, per round (target for kiln: at most 3):")
    for name, r in results.items():
        ratios = [p / o for o, p in zip(r["ordinary"], r["private"])]
        print(f"  {name:14s} {', '.join(f'{x:.2f}' for x in ratios)}  "
              f"(median {statistics.median(ratios):.2f})")
    print("\npeer's private step / kiln's, per round (above 1: kiln is faster):")
    for name, r in results.items():
        if name == "kiln":
            continue
        ratios = [p / k for p, k in zip(r["private"], results["kiln"]["private"])]
        print(f"  {name:14s} {', '.join(f'{x:.2f}' for x in ratios)}  "
              f"(median {statistics.median(ratios):.2f})")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
