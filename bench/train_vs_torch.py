#!/usr/bin/python3
"""kiln against PyTorch on the Fashion-MNIST recipes (examples/fashion_mnist_{mlp,cnn}.toml
and bench/torch_fmnist.py), side by side in one run. The machine is noisy, so the two
alternate (kiln, torch, kiln, torch, ...) and every ratio is taken pair by pair.

Measures, for the MLP and the CNN at batch 128:
  * the median train step (train_step_bench vs torch_fmnist.py), ratio torch / kiln;
  * the MLP step against its roofline limit (train_step_bench --roofline);
  * process start to the first completed step (kiln train vs torch_fmnist.py --t0);
  * peak resident memory of a 200-step training process (ru_maxrss from wait4, the figure
    /usr/bin/time -v prints as "Maximum resident set size").

  /usr/bin/python3 bench/train_vs_torch.py [--pairs 5] [--build build/release]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# PyTorch's fastest thread setting on this machine (research/baselines.md, remeasured for
# docs/performance.md): for the MLP its default (1 intra-op thread, OpenBLAS with 2), for
# the CNN 2 threads (its convolutions and pooling run on ATen's pool).
TORCH_THREADS = {"mlp": "0", "cnn": "2"}


def run(command, env=None):
    """Runs a command to completion; returns (stdout, wall seconds)."""
    start = time.time()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                               cwd=ROOT)
    out, err = process.communicate()
    if process.returncode != 0:
        sys.exit(f"failed ({process.returncode}): {' '.join(command)}\n{err.decode()}")
    return out.decode(), time.time() - start


def run_measured(command):
    """Runs a command and returns its peak resident set size in MiB (wait4's ru_maxrss)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(command)}\n{process.stderr.read().decode()}")
    return usage.ru_maxrss / 1024.0


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per process")
    args = parser.parse_args()
    bench = os.path.join(args.build, "bench", "train_step_bench")
    kiln = os.path.join(args.build, "kiln")
    torch_script = os.path.join("bench", "torch_fmnist.py")
    runs_dir = tempfile.mkdtemp(prefix="kiln-bench-runs-")

    for model in ("mlp", "cnn"):
        config = f"examples/fashion_mnist_{model}.toml"
        steps = args.steps if model == "mlp" else max(args.steps // 2, 10)
        ratios, kiln_ms, torch_ms = [], [], []
        for _ in range(args.pairs):
            k = last_json(run([bench, "--config", config, "--steps", str(steps), "--json"])[0])
            t = last_json(run(["/usr/bin/python3", torch_script, "--model", model, "--steps",
                               str(steps), "--threads", TORCH_THREADS[model], "--json"])[0])
            kiln_ms.append(k["median_step_ms"])
            torch_ms.append(t["median_step_ms"])
            ratios.append(t["median_step_ms"] / k["median_step_ms"])
        print(f"{model} step: kiln median {statistics.median(kiln_ms):.2f} ms, torch median "
              f"{statistics.median(torch_ms):.2f} ms; torch/kiln per pair "
              f"{' '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f}x)")

    out, _ = run([bench, "--config", "examples/fashion_mnist_mlp.toml", "--roofline"])
    print("mlp roofline:\n  " + "\n  ".join(out.strip().splitlines()))

    first_kiln, first_torch = [], []
    for _ in range(args.pairs):
        run([kiln, "train", "examples/fashion_mnist_mlp.toml", "--quiet", "--set",
             "train.max_steps=1", "--set", f"experiment.runs_dir={runs_dir}", "--set",
             "data.test_limit=1000"])
        latest = max((os.path.join(d, r) for d in [os.path.join(runs_dir, "fashion_mnist_mlp")]
                      for r in os.listdir(d)), key=os.path.getmtime)
        with open(os.path.join(latest, "run.json")) as f:
            first_kiln.append(json.load(f)["first_step_seconds"])
        t = last_json(run(["/usr/bin/python3", torch_script, "--model", "mlp", "--steps", "1",
                           "--warmup", "0", "--t0", f"{time.time():.6f}", "--json"])[0])
        first_torch.append(t["first_step_seconds"])
    print(f"process start to first step: kiln {' '.join(f'{s:.2f}' for s in first_kiln)} s "
          f"(median {statistics.median(first_kiln):.2f}), torch "
          f"{' '.join(f'{s:.2f}' for s in first_torch)} s (median {statistics.median(first_torch):.2f})")

    rss_kiln, rss_torch = [], []
    for _ in range(max(args.pairs // 2, 1)):
        rss_kiln.append(run_measured([kiln, "train", "examples/fashion_mnist_mlp.toml", "--quiet",
                                      "--set", "train.max_steps=200", "--set",
                                      f"experiment.runs_dir={runs_dir}"]))
        rss_torch.append(run_measured(["/usr/bin/python3", torch_script, "--model", "mlp",
                                       "--steps", "200", "--warmup", "0"]))
    print(f"peak RSS, 200 MLP steps: kiln {' '.join(f'{m:.0f}' for m in rss_kiln)} MiB, torch "
          f"{' '.join(f'{m:.0f}' for m in rss_torch)} MiB; kiln/torch "
          f"{statistics.median(rss_kiln) / statistics.median(rss_torch):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
