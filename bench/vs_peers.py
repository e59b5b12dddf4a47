#!/usr/bin/python3
"""kiln against the peers our users would pick instead, on the Fashion-MNIST recipes
(examples/fashion_mnist_{mlp,cnn}.toml): JAX (jax.jit of value_and_grad + optax.adamw,
donated buffers, bench/jax_fmnist.py) and PyTorch 2, eager and torch.compile
(bench/torch_fmnist.py), all at batch 128, each at its fastest thread setting.

The machine is noisy (about +-30% run to run), so processes alternate: every round runs
kiln, then each peer, and each peer's ratio is taken against the kiln run of its own round.

Measures, for the MLP and the CNN:
  * the median train step of each process (train_step_bench vs the peers' scripts), and
    peer / kiln per round (above 1: kiln is faster), each labelled with the cores it really
    used: the process's CPU time (user + system, from wait4) over its wall time, so that a
    thread setting is not taken at its word (XLA's "one thread" flags leave it two);
  * the same steps with every framework pinned to one core (taskset -c 0, one thread where
    it has a setting): single-core efficiency side by side, and each framework's two-core
    scaling (its free step time over its pinned one);
  * the MLP step against its roofline limit (train_step_bench --roofline);
  * process start to the first completed step (kiln train vs the peers' --t0);
  * peak resident memory of a 200-step training process (ru_maxrss from wait4).

A peer's thread setting is chosen by a first, untimed pass that runs each candidate once
and keeps the fastest; the settings tried and their step times are printed.

  /usr/bin/python3 bench/vs_peers.py [--rounds 3] [--build build/release] [--models mlp,cnn]

Needs scripts/setup --bench (PyTorch 2 in .venv/bench; JAX is in .venv/peers).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAX_PYTHON = os.path.join(ROOT, ".venv", "peers", "bin", "python")
TORCH_PYTHON = os.path.join(ROOT, ".venv", "bench", "bin", "python")


# The last measured process's CPU seconds (user + system) and wall seconds.
LAST_USAGE = {"cpu": 0.0, "wall": 0.0}
PINNED = ["taskset", "-c", "0"]


def run(command, env=None):
    """Runs a command to completion; returns its stdout. Its CPU time (the children's
    rusage, which counts what the command's own children used too) and wall time go to
    LAST_USAGE."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    process = subprocess.run(command, capture_output=True, cwd=ROOT,
                             env=None if env is None else {**os.environ, **env})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_USAGE["wall"] = time.monotonic() - start
    LAST_USAGE["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if process.returncode != 0:
        sys.exit(f"failed ({process.returncode}): {' '.join(command)}\n{process.stderr.decode()}")
    return process.stdout.decode()


def cores_used():
    """The last process's CPU time over its wall time: the cores it kept busy on average
    (start-up and compilation included)."""
    return LAST_USAGE["cpu"] / LAST_USAGE["wall"] if LAST_USAGE["wall"] > 0 else 0.0


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def peak_rss_mib(command):
    """Runs a command; returns its peak resident set size in MiB (wait4's ru_maxrss)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(command)}\n{process.stderr.read().decode()}")
    return usage.ru_maxrss / 1024.0


class Peer:
    """One peer configuration: a script, its interpreter and its fixed arguments."""

    def __init__(self, name, python, script, extra, thread_options):
        self.name, self.python, self.script = name, python, script
        self.extra, self.thread_options = extra, thread_options
        self.threads = thread_options[0]

    def command(self, model, steps, warmup=10, threads=None):
        threads = self.threads if threads is None else threads
        return [self.python, self.script, "--model", model, "--steps", str(steps), "--warmup",
                str(warmup), "--threads", str(threads), "--json"] + self.extra

    def step_ms(self, model, steps, threads=None, pinned=False):
        """The median step; pinned: on core 0 alone, with one thread."""
        command = self.command(model, steps, threads=1 if pinned else threads)
        return last_json(run(PINNED + command if pinned else command))["median_step_ms"]


def peers():
    jax_script = os.path.join("bench", "jax_fmnist.py")
    torch_script = os.path.join("bench", "torch_fmnist.py")
    missing = [p for p in (JAX_PYTHON, TORCH_PYTHON) if not os.path.exists(p)]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: run scripts/setup --bench")
    return [Peer("jax", JAX_PYTHON, jax_script, [], [0, 1]),
            Peer("torch eager", TORCH_PYTHON, torch_script, [], [1, 2]),
            Peer("torch.compile", TORCH_PYTHON, torch_script, ["--compile"], [1, 2])]


def kiln_step_ms(args, model, steps, pinned=False):
    """The median step; pinned: on core 0 alone, with one compute thread."""
    bench = os.path.join(args.build, "bench", "train_step_bench")
    command = [bench, "--config", f"examples/fashion_mnist_{model}.toml", "--steps", str(steps),
               "--json"]
    if pinned:
        return last_json(run(PINNED + command, env={"KILN_COMPUTE_THREADS": "1"}))["median_step_ms"]
    return last_json(run(command))["median_step_ms"]


def compare_steps(args, model, all_peers):
    steps = args.steps if model == "mlp" else max(args.steps // 2, 10)
    for peer in all_peers:
        tried = {t: peer.step_ms(model, max(steps // 2, 5), threads=t) for t in peer.thread_options}
        peer.threads = min(tried, key=tried.get)
        print(f"{model} {peer.name}: threads tried "
              f"{', '.join(f'{t} -> {ms:.2f} ms' for t, ms in tried.items())}; using {peer.threads}"
              f" (0: the library's own default)")
    kiln_ms, peer_ms, ratios = [], {p.name: [] for p in all_peers}, {p.name: [] for p in all_peers}
    cores = {"kiln": []} | {p.name: [] for p in all_peers}
    for _ in range(args.rounds):
        k = kiln_step_ms(args, model, steps)
        kiln_ms.append(k)
        cores["kiln"].append(cores_used())
        for peer in all_peers:
            ms = peer.step_ms(model, steps)
            cores[peer.name].append(cores_used())
            peer_ms[peer.name].append(ms)
            ratios[peer.name].append(ms / k)
    print(f"{model} step, kiln (used {statistics.median(cores['kiln']):.2f} cores): "
          f"{' '.join(f'{m:.2f}' for m in kiln_ms)} ms (median {statistics.median(kiln_ms):.2f})")
    for peer in all_peers:
        r = ratios[peer.name]
        print(f"{model} step, {peer.name} (threads setting {peer.threads}; used "
              f"{statistics.median(cores[peer.name]):.2f} cores): "
              f"{' '.join(f'{m:.2f}' for m in peer_ms[peer.name])} ms; {peer.name}/kiln per round "
              f"{' '.join(f'{x:.2f}' for x in r)} (median {statistics.median(r):.2f}x)")
    fastest = min(all_peers, key=lambda p: statistics.median(peer_ms[p.name]))
    print(f"{model} step: fastest peer {fastest.name}, kiln {statistics.median(ratios[fastest.name]):.2f}x "
          f"faster (target 1.2x)")
    return {"kiln": statistics.median(kiln_ms)} | {
        p.name: statistics.median(peer_ms[p.name]) for p in all_peers}


def compare_pinned(args, model, all_peers, free_ms):
    """Every framework on core 0 alone with one thread, rounds alternating as above: the
    single-core comparison, and each one's two-core scaling (free step / pinned step)."""
    steps = args.steps if model == "mlp" else max(args.steps // 2, 10)
    kiln_ms, peer_ms = [], {p.name: [] for p in all_peers}
    ratios = {p.name: [] for p in all_peers}
    for _ in range(args.rounds):
        k = kiln_step_ms(args, model, steps, pinned=True)
        kiln_ms.append(k)
        for peer in all_peers:
            ms = peer.step_ms(model, steps, pinned=True)
            peer_ms[peer.name].append(ms)
            ratios[peer.name].append(ms / k)
    kiln_pinned = statistics.median(kiln_ms)
    print(f"{model} step pinned to one core, kiln: {' '.join(f'{m:.2f}' for m in kiln_ms)} ms "
          f"(median {kiln_pinned:.2f}; two cores are {kiln_pinned / free_ms['kiln']:.2f}x faster)")
    for peer in all_peers:
        pinned = statistics.median(peer_ms[peer.name])
        print(f"{model} step pinned to one core, {peer.name}: "
              f"{' '.join(f'{m:.2f}' for m in peer_ms[peer.name])} ms; {peer.name}/kiln per round "
              f"{' '.join(f'{x:.2f}' for x in ratios[peer.name])} (median "
              f"{statistics.median(ratios[peer.name]):.2f}x; two cores are "
              f"{pinned / free_ms[peer.name]:.2f}x faster)")


def first_step(args, all_peers, runs_dir):
    kiln = os.path.join(args.build, "kiln")
    firsts = {"kiln": []} | {p.name: [] for p in all_peers}
    for _ in range(args.rounds):
        run([kiln, "train", "examples/fashion_mnist_mlp.toml", "--quiet", "--set",
             "train.max_steps=1", "--set", f"experiment.runs_dir={runs_dir}", "--set",
             "data.test_limit=1000"])
        experiment = os.path.join(runs_dir, "fashion_mnist_mlp")
        latest = max((os.path.join(experiment, r) for r in os.listdir(experiment)),
                     key=os.path.getmtime)
        with open(os.path.join(latest, "run.json")) as f:
            timing = json.load(f)["timing"]
            firsts["kiln"].append(timing["first_step_seconds"])
            kiln_startup = " + ".join(f"{name} {seconds:.3f}" for name, seconds in timing["startup"])
        for peer in all_peers:
            command = peer.command("mlp", 1, warmup=0) + ["--t0", f"{time.time():.6f}"]
            firsts[peer.name].append(last_json(run(command))["first_step_seconds"])
    for name, values in firsts.items():
        print(f"process start to first MLP step, {name}: {' '.join(f'{s:.2f}' for s in values)} s "
              f"(median {statistics.median(values):.2f}; target for kiln < 0.5 s)")
    print(f"kiln's last start, phase by phase: {kiln_startup}")


def peak_memory(args, all_peers, runs_dir):
    kiln = os.path.join(args.build, "kiln")
    rss = {"kiln": []} | {p.name: [] for p in all_peers}
    for _ in range(max(args.rounds // 2, 1)):
        rss["kiln"].append(peak_rss_mib([kiln, "train", "examples/fashion_mnist_mlp.toml", "--quiet",
                                         "--set", "train.max_steps=200", "--set",
                                         f"experiment.runs_dir={runs_dir}"]))
        for peer in all_peers:
            rss[peer.name].append(peak_rss_mib(peer.command("mlp", 200, warmup=0)))
    smallest_peer = min(statistics.median(v) for n, v in rss.items() if n != "kiln")
    for name, values in rss.items():
        print(f"peak RSS, 200 MLP steps, {name}: {' '.join(f'{m:.0f}' for m in values)} MiB")
    print(f"peak RSS: kiln / smallest peer {statistics.median(rss['kiln']) / smallest_peer:.2f} "
          f"(target <= 0.5)")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--steps", type=int, default=50, help="timed MLP steps per process (CNN: half)")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--skip-startup", action="store_true", help="no first-step or memory runs")
    parser.add_argument("--skip-pinned", action="store_true", help="no one-core runs")
    args = parser.parse_args()
    all_peers = peers()
    runs_dir = tempfile.mkdtemp(prefix="kiln-bench-runs-")
    for model in args.models.split(","):
        free_ms = compare_steps(args, model, all_peers)
        if not args.skip_pinned:
            compare_pinned(args, model, all_peers, free_ms)
    if "mlp" in args.models.split(","):
        out = run([os.path.join(args.build, "bench", "train_step_bench"), "--config",
                   "examples/fashion_mnist_mlp.toml", "--roofline"])
        print("mlp roofline:\n  " + "\n  ".join(out.strip().splitlines()))
    if not args.skip_startup:
        first_step(args, all_peers, runs_dir)
        peak_memory(args, all_peers, runs_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
