"""SIGKILL fault-injection trials for savepoints, shared by tests/cli/test_cli.py (a few
trials) and scripts/savepoint_kill_trials (50 and more).

A trial trains a tiny config that writes a savepoint after every step (so most moments
fall inside a save), kills the process with SIGKILL after a random delay, checks every
committed savepoint (savepoint_check.py, with the real safetensors package), and resumes;
each resume may be killed again, until the run completes. The trial passes when the final
params.safetensors and the final savepoint's optimizer state have the SHA-256 of the
uninterrupted run and no committed savepoint was ever damaged. Delays come from
random.Random(seed): a failing trial is replayed by its seed.
"""
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MLP = os.path.join(HERE, "..", "..", "examples", "fashion_mnist_mlp.toml")
TINY = ["data.train_limit=512", "data.test_limit=100", "train.batch_size=64", "train.epochs=2",
        "train.savepoint_every=1", "train.savepoint_keep_last=2", "train.log_every=1000"]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def final_hashes(run_dir):
    with open(os.path.join(run_dir, "run.json")) as f:
        info = json.load(f)
    if info.get("status") != "completed":
        raise RuntimeError(f"{run_dir}: status {info.get('status')}")
    # The final savepoint's files: params.safetensors of the run directory names the
    # experiment in its metadata, and each trial has its own.
    savepoint = os.path.join(run_dir, info["last_savepoint"])
    return (sha256(os.path.join(savepoint, "params.safetensors")),
            sha256(os.path.join(savepoint, "opt_state.safetensors")))


def train_command(kiln, runs, name):
    sets = TINY + [f"experiment.runs_dir={runs}", f"experiment.name={name}"]
    return [kiln, "train", MLP, "--quiet"] + [a for s in sets for a in ("--set", s)]


def reference(kiln, runs):
    """The uninterrupted run: its hashes and how long it took."""
    began = time.monotonic()
    subprocess.run(train_command(kiln, runs, "reference"), check=True, capture_output=True)
    seconds = time.monotonic() - began
    (run_dir,) = glob.glob(os.path.join(runs, "reference", "*"))
    return final_hashes(run_dir), seconds


def check_savepoints(run_dir):
    result = subprocess.run([sys.executable, os.path.join(HERE, "savepoint_check.py"), run_dir],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"damaged committed savepoint:\n{result.stdout}{result.stderr}")


def run_killed(command, delay):
    """Starts `command`, SIGKILLs it after `delay` seconds; True when it finished first."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = process.communicate(timeout=delay)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.communicate()
        return False
    if process.returncode != 0:
        raise RuntimeError(f"{command} failed ({process.returncode}): {err.decode()}")
    return True


def trial(kiln, runs, seed, expected, seconds):
    """One trial; returns (kills, kills that left a save half-done)."""
    rng = random.Random(seed)
    name = f"trial{seed}"
    kills = mid_save = 0
    command = train_command(kiln, runs, name)
    for attempt in range(30):
        # Up to the whole run's time: early kills land in start-up, later ones in steps and
        # saves; a kill may miss (the process finished first).
        finished = run_killed(command, rng.uniform(0.05, seconds * 1.1))
        dirs = glob.glob(os.path.join(runs, name, "*"))
        if not dirs or not os.path.exists(os.path.join(dirs[0], "run.json")):
            # Killed before the run was recorded: nothing to resume, start again.
            shutil.rmtree(os.path.join(runs, name), ignore_errors=True)
            command = train_command(kiln, runs, name)
            continue
        (run_dir,) = dirs
        if not finished:
            kills += 1
            leftovers = [n for n in os.listdir(os.path.join(run_dir, "savepoints"))
                         if ".tmp-" in n or not os.path.exists(
                             os.path.join(run_dir, "savepoints", n, "COMMITTED"))] \
                if os.path.isdir(os.path.join(run_dir, "savepoints")) else []
            mid_save += bool(leftovers)
        check_savepoints(run_dir)
        if finished:
            break
        command = [kiln, "resume", run_dir, "--quiet"]
    else:
        raise RuntimeError(f"seed {seed}: not finished after 30 attempts")
    got = final_hashes(run_dir)
    if got != expected:
        raise RuntimeError(f"seed {seed}: hashes {got} differ from the uninterrupted {expected}")
    shutil.rmtree(os.path.join(runs, name))
    return kills, mid_save
