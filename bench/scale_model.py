#!/usr/bin/python3
"""A latency-bandwidth (alpha-beta) model of a data-parallel step across processes, fitted
on this machine and checked against it, then used to project a cluster (issue 49, "a scale
model"; docs/distributed.md, *The scale model*).

1. Measure: `mpirun -np P kiln bench collectives --processes --json` for each P: the sum
   over processes the trainer uses (reduce-scatter by all_to_all, then all-gather), 4 KiB
   to 16 MiB, the slowest rank's median time.
2. Fit a fixed cost gamma per call, one alpha (seconds per message round) and one beta
   (seconds per byte) to every point of every P by least squares on the algorithm's cost,
       t(P, S) = gamma + k(P) [2 (P - 1) alpha + 2 (P - 1) / P x S x beta],
       k(P) = max(1, P / cores),
   and print each point's prediction beside its measurement. k is this machine's: P
   processes share its cores, so each one's copies, adds and wake-ups take k times as long.
3. Check a step: the MLP run of bench/scale_processes.py (global batch 128 in 16 chunks,
   one compute thread per process) for each P, its median step time beside the model
       T(P) = T(1) / min(P, cores) + t(P, gradient bytes)
   (the chunks split over min(P, cores) busy cores; the sum of the gradients added after
   the backward pass, as kiln does today, with no overlap).
4. Project, as a model and not a measurement: P = 64 ... 1024 ranks, one per machine, on a
   stated network (alpha = 5 us, 100 Gb/s) for the MLP and GPT-2 124M at a fixed batch per
   rank (weak scaling), with the step as compute + communication (kiln today) and as
   max(compute, communication) (gradients in buckets overlapping the backward pass, not yet
   in kiln), and the P from which the communication no longer fits in the backward pass
   (two thirds of the step's compute).

  /usr/bin/python3 bench/scale_model.py [--build build/release] [--processes 2,4,8,16]
      [--steps-processes 1,2,4,8] [--max-bytes 16777216]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale_processes  # noqa: E402  (the MLP run of each P, shared)

CORES = os.cpu_count() or 1
NETWORK_ALPHA = 5e-6            # seconds per message round: a stated cluster, not measured
NETWORK_BETA = 8 / 100e9        # seconds per byte at 100 Gb/s
# Weak scaling: the batch per rank stays that of one process, so compute per rank stays T1.
# GPT-2 124M at B = 4, T = 64 on a machine of this kind, two cores (docs/performance.md,
# gpt2_step_bench: 0.68 s a step on 2026-12-07); 124,475,904 params of 4 bytes.
GPT2_STEP_SECONDS = 0.68
GPT2_GRADIENT_BYTES = 4 * 124_475_904


def collective_points(kiln, processes, max_bytes):
    env = {**os.environ, "KILN_CPU_DEVICES": "1", "KILN_COMPUTE_THREADS": "1",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    command = [*scale_processes.MPIRUN, "-np", str(processes), "-x", "KILN_CPU_DEVICES", "-x",
               "KILN_COMPUTE_THREADS", kiln, "bench", "collectives", "--processes", "--json",
               "--repeats", "5", "--max-bytes", str(max_bytes)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    if result.returncode != 0:
        sys.exit(f"bench collectives at P = {processes} failed:\n{result.stderr}")
    rows = json.loads(result.stdout)["rows"]
    return [(processes, row["bytes"], row["median_seconds"]) for row in rows]


def comm_seconds(processes, size, alpha, beta, cores=None, gamma=0.0):
    """The sum over `processes` ranks; `cores`: the ranks share that many cores (this
    machine), None: one machine per rank (the projection)."""
    if processes < 2:
        return 0.0
    shared = max(1.0, processes / cores) if cores else 1.0
    return gamma + shared * (2 * (processes - 1) * alpha +
                             2 * (processes - 1) / processes * size * beta)


def fit(points):
    features = np.array([[1.0, 2 * (p - 1) * max(1.0, p / CORES),
                          2 * (p - 1) / p * s * max(1.0, p / CORES)] for p, s, _ in points])
    times = np.array([t for _, _, t in points])
    # Relative least squares: small messages count as much as large ones.
    weights = 1 / times
    (gamma, alpha, beta), *_ = np.linalg.lstsq(features * weights[:, None], times * weights,
                                               rcond=None)
    return max(gamma, 0.0), max(alpha, 0.0), max(beta, 0.0)


def crossover(step, gradient_bytes, alpha, beta):
    """The first P (a power of two up to 2^20) whose communication exceeds the backward
    pass, two thirds of the step."""
    p = 2
    while p <= 1 << 20:
        if comm_seconds(p, gradient_bytes, alpha, beta) > 2 / 3 * step:
            return p
        p *= 2
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--processes", default="2,4,8,16")
    parser.add_argument("--steps-processes", default="1,2,4,8")
    parser.add_argument("--max-bytes", type=int, default=16 << 20)
    args = parser.parse_args()
    kiln = os.path.abspath(os.path.join(args.build, "kiln"))

    points = []
    for p in (int(x) for x in args.processes.split(",")):
        points += collective_points(kiln, p, args.max_bytes)
    gamma, alpha, beta = fit(points)
    print(f"# 1-2. the sum over P processes on this machine ({CORES} cores), fitted: "
          f"gamma = {gamma * 1e6:.0f} us, alpha = {alpha * 1e6:.1f} us, beta = "
          f"{beta * 1e9:.3f} ns/byte ({1 / beta / 1e9 if beta else float('inf'):.2f} GB/s)")
    print(f"{'P':>3} {'bytes':>10} {'measured ms':>12} {'model ms':>10} {'model/measured':>15}")
    errors = []
    for p, s, t in points:
        m = comm_seconds(p, s, alpha, beta, CORES, gamma)
        errors.append(m / t)
        print(f"{p:>3} {s:>10.0f} {t * 1e3:>12.3f} {m * 1e3:>10.3f} {m / t:>15.2f}")
    print(f"model/measured over the {len(points)} points: median {np.median(errors):.2f}, "
          f"range {min(errors):.2f} to {max(errors):.2f}")

    scratch = tempfile.mkdtemp(prefix="kiln-scale-model-")
    try:
        steps = {}
        gradient_bytes = None
        for p in (int(x) for x in args.steps_processes.split(",")):
            info = scale_processes.train(kiln, p, os.path.join(scratch, f"p{p}"))
            steps[p] = info["timing"]["step_ms"]["median"] / 1e3
            gradient_bytes = 4 * info["parameters"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    one = steps.get(1)
    print(f"\n# 3. the MLP step (bench/scale_processes.py's run), {gradient_bytes} gradient "
          f"bytes: T(P) = T(1) / min(P, {CORES}) + t(P, bytes)")
    print(f"{'P':>3} {'measured ms':>12} {'model ms':>10} {'compute':>9} {'comm':>8} "
          f"{'model/measured':>15}")
    for p, measured in steps.items():
        if one is None:
            break
        compute = one / min(p, CORES)
        comm = comm_seconds(p, gradient_bytes, alpha, beta, CORES, gamma)
        model = compute + comm
        print(f"{p:>3} {measured * 1e3:>12.2f} {model * 1e3:>10.2f} {compute * 1e3:>9.2f} "
              f"{comm * 1e3:>8.2f} {model / measured:>15.2f}")

    print(f"\n# 4. projection (a model, not a measurement): one rank per machine, alpha = "
          f"{NETWORK_ALPHA * 1e6:.0f} us, {8 / NETWORK_BETA / 1e9:.0f} Gb/s, a fixed batch "
          f"per rank")
    workloads = [("MLP", one, gradient_bytes), ("GPT-2 124M", GPT2_STEP_SECONDS,
                                                GPT2_GRADIENT_BYTES)]
    print(f"{'model':<11} {'P':>5} {'compute ms':>11} {'comm ms':>9} {'no overlap':>11} "
          f"{'overlap':>9} {'efficiency':>11}")
    for name, step, size in workloads:
        if step is None:
            continue
        for p in (64, 128, 256, 512, 1024):
            comm = comm_seconds(p, size, NETWORK_ALPHA, NETWORK_BETA)
            serial = step + comm
            overlapped = max(step, comm + step / 3)  # the forward third cannot overlap
            print(f"{name:<11} {p:>5} {step * 1e3:>11.2f} {comm * 1e3:>9.2f} "
                  f"{serial * 1e3:>11.2f} {overlapped * 1e3:>9.2f} {step / serial:>10.0%}")
        cross = crossover(step, size, NETWORK_ALPHA, NETWORK_BETA)
        print(f"{name}: the communication stops fitting in the backward pass from P = "
              f"{cross if cross else 'beyond 2^20'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
