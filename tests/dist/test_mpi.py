#!/usr/bin/env python3
"""`mpirun -np P kiln train`: the same bits on 1 and 2 processes as in one process, one run
identity, only rank 0 writes, and a rank that hangs or dies stops the job, naming it,
with the last savepoint intact and resumable on another number of processes.

Usage: test_mpi.py PATH_TO_KILN
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

KILN = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else "build/release/kiln")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "examples", "fashion_mnist_mlp.toml")
# 2048 examples in batches of 128: 16 steps an epoch, 32 in all, so a savepoint at step 20
# is in the second epoch.
SMALL = ["--set", "data.train_limit=2048", "--set", "data.test_limit=500", "--set",
         "train.epochs=2", "--set", "mesh.chunks=4", "--set", "train.savepoint_every=10",
         "--set", "tracking.tensorboard=false"]
# As root (CI's containers) Open MPI wants both confirmations; --oversubscribe lets two
# ranks share this machine's two cores with kiln's own threads.
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader",
          "--mca", "btl_vader_single_copy_mechanism", "none"]
SHA = re.compile(r"sha256 ([0-9a-f]{64})")


def environment(devices, extra=None):
    env = dict(os.environ)
    env.update({"KILN_CPU_DEVICES": str(devices), "OMPI_ALLOW_RUN_AS_ROOT": "1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    env.update(extra or {})
    return env


def kiln(args, devices, extra=None, timeout=600):
    return subprocess.run([KILN, *args], capture_output=True, text=True,
                          env=environment(devices, extra), timeout=timeout)


def mpirun(processes, args, devices, extra=None, timeout=600):
    env_flags = []
    for name in ("KILN_CPU_DEVICES", *(extra or {})):
        env_flags += ["-x", name]
    return subprocess.run([*MPIRUN, "-np", str(processes), *env_flags, KILN, *args],
                          capture_output=True, text=True, env=environment(devices, extra),
                          timeout=timeout)


def evaluations(runs):
    """The eval lines of the one run under `runs`: epoch, test loss, test accuracy."""
    (run_dir,) = glob.glob(os.path.join(runs, "fashion_mnist_mlp", "*"))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f if '"kind":"eval"' in line]
    return [(line["epoch"], line["test_loss"], line["test_accuracy"]) for line in lines]


def params_sha(result):
    shas = SHA.findall(result.stdout)
    if result.returncode != 0 or not shas:
        raise AssertionError(f"no params sha (exit {result.returncode}):\n{result.stdout}\n"
                             f"{result.stderr}")
    return shas[-1]


class ManyProcesses(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kiln-mpi-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def runs(self, name):
        return os.path.join(self.dir, name)

    def train_args(self, runs, *more):
        return ["train", MLP, "--quiet", *SMALL, "--set", f"experiment.runs_dir={runs}", *more]

    def run_dirs(self, runs):
        return sorted(glob.glob(os.path.join(runs, "fashion_mnist_mlp", "*")))

    def test_same_bits_on_one_and_two_processes(self):
        one = params_sha(kiln(self.train_args(self.runs("one"), "--set", "mesh.data=2"), 2))
        mpi_one = mpirun(1, self.train_args(self.runs("np1"), "--set", "mesh.data=2"), 2)
        mpi_two = mpirun(2, self.train_args(self.runs("np2"), "--set", "mesh.data=2"), 1)
        mpi_four = mpirun(2, self.train_args(self.runs("np2x2"), "--set", "mesh.data=4"), 2)
        self.assertEqual(params_sha(mpi_one), one)
        self.assertEqual(params_sha(mpi_two), one, mpi_two.stderr)
        self.assertEqual(params_sha(mpi_four), one, mpi_four.stderr)
        # Each rank evaluates every P-th test batch; the ranks share their figures and add
        # them in batch order: the test loss and accuracy of one process, exactly.
        self.assertEqual(len(evaluations(self.runs("one"))), 2)
        self.assertEqual(evaluations(self.runs("np2")), evaluations(self.runs("one")))
        self.assertEqual(evaluations(self.runs("np2x2")), evaluations(self.runs("one")))
        # Rank 0 alone wrote: one run directory, one summary, one catalog entry.
        (run_dir,) = self.run_dirs(self.runs("np2"))
        self.assertEqual(mpi_two.stdout.count("params:"), 1, mpi_two.stdout)
        with open(os.path.join(run_dir, "run.json")) as file:
            info = json.load(file)
        self.assertEqual(info["status"], "completed")
        self.assertEqual(info["params_sha256"], one)
        listed = kiln(["runs", "--runs-dir", self.runs("np2"), "list", "--json"], 1)
        self.assertEqual(len(json.loads(listed.stdout)), 1, listed.stdout + listed.stderr)

    def test_each_rank_sends_a_fixed_share_of_the_sums_however_many_ranks(self):
        # Issue 49: a reduce-scatter then an all-gather, each rank adding its own range of the
        # sums in rank order: the same bits as one process, and 2 (P - 1) / P of the sums'
        # bytes sent per rank and step (1.5 of them at P = 4; the whole-tree exchange sent
        # P - 1 = 3).
        one = params_sha(kiln(self.train_args(self.runs("one"), "--set", "mesh.data=2"), 2))
        four = mpirun(4, self.train_args(self.runs("np4"), "--set", "mesh.data=4"), 1)
        self.assertEqual(params_sha(four), one, four.stderr)
        (run_dir,) = self.run_dirs(self.runs("np4"))
        with open(os.path.join(run_dir, "run.json")) as file:
            info = json.load(file)
        steps = info["steps"]
        sums_bytes = 4 * info["parameters"]  # f32 gradients; the loss and counts are bytes more
        per_step = info["timing"]["process_bytes_sent"] / steps
        self.assertGreater(per_step, 1.5 * sums_bytes)
        self.assertLess(per_step, 1.5 * sums_bytes * 1.01 + 2048, per_step / sums_bytes)

    def test_bench_collectives_between_processes_counts_the_formula(self):
        # The points bench/scale_model.py fits: the sum over P ranks, timed, and the bytes
        # each rank sent against 2 (P - 1) / P x S (a few bytes of framing per message).
        result = mpirun(4, ["bench", "collectives", "--processes", "--json", "--quick",
                            "--repeats", "2", "--max-bytes", "65536"], 1)
        self.assertEqual(result.returncode, 0, result.stderr)
        out = json.loads(result.stdout)
        self.assertEqual(out["processes"], 4)
        self.assertEqual([row["bytes"] for row in out["rows"]], [4096, 65536])
        for row in out["rows"]:
            self.assertGreater(row["median_seconds"], 0)
            self.assertGreaterEqual(row["bytes_sent_per_rank"], row["formula_bytes"])
            self.assertLess(row["bytes_sent_per_rank"], row["formula_bytes"] + 512)
        alone = kiln(["bench", "collectives", "--processes"], 1)
        self.assertEqual(alone.returncode, 1)
        self.assertIn("run it under mpirun", alone.stderr)

    def test_ranks_must_have_one_identity(self):
        runs = self.runs("mismatch")
        base = self.train_args(runs, "--set", "mesh.data=2")
        result = subprocess.run(
            [*MPIRUN, "-np", "1", "-x", "KILN_CPU_DEVICES", KILN, *base, ":", "-np", "1", "-x",
             "KILN_CPU_DEVICES", KILN, *base, "--set", "optim.lr=0.002"],
            capture_output=True, text=True, env=environment(1), timeout=300)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("do not have one run identity", result.stderr)
        self.assertIn("rank 1: config optim.lr", result.stderr)
        self.assertEqual(self.run_dirs(runs), [])  # refused before anything was written

    def test_mesh_must_span_the_processes(self):
        result = mpirun(2, self.train_args(self.runs("bad"), "--set", "mesh.data=3", "--set",
                                           "mesh.chunks=6", "--set", "train.batch_size=96"), 2)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("mesh.data must be a multiple of 2; it is 3", result.stderr)
        result = mpirun(2, self.train_args(self.runs("bad"), "--set", "mesh.data=2", "--set",
                                           "mesh.shard_params=true"), 1)
        self.assertIn("mesh.shard_params across processes is not built yet", result.stderr)

    def fault_then_resume(self, fault, expect_in_stderr):
        """`expect_in_stderr`: a regular expression naming the rank."""
        runs = self.runs("fault")
        # Exchanges: 1 identity, 2 run directory, then three per step (the sums' reduce-scatter
        # and all-gather, and the stop request) and one per evaluation (after steps 16 and
        # 32): step 28's reduce-scatter is exchange 2 + 16 * 3 + 1 + 11 * 3 + 1 = 85, well
        # after the savepoint of step 20.
        began = time.monotonic()
        failed = mpirun(2, self.train_args(runs, "--set", "mesh.data=2"), 1,
                        {"KILN_DIST_FAULT": fault, "KILN_DIST_TIMEOUT_S": "5"}, timeout=300)
        seconds = time.monotonic() - began
        self.assertNotEqual(failed.returncode, 0, failed.stdout)
        self.assertLess(seconds, 120, "the job did not stop within a bounded time")
        self.assertRegex(failed.stderr, expect_in_stderr)
        (run_dir,) = self.run_dirs(runs)
        committed = sorted(os.listdir(os.path.join(run_dir, "savepoints")))
        steps = [int(m[1]) for m in map(re.compile(r"step-(\d+)$").match, committed) if m]
        self.assertIn(20, steps, committed)
        # The savepoint resumes on one process with both devices, and on two processes:
        # both continue to the bits of an uninterrupted run.
        whole = params_sha(kiln(self.train_args(self.runs("whole"), "--set", "mesh.data=2"), 2))
        copy = self.runs("copy")
        shutil.copytree(runs, copy)
        resumed_one = kiln(["resume", run_dir.replace(runs, copy), "--quiet"], 2)
        self.assertEqual(params_sha(resumed_one), whole, resumed_one.stderr)
        resumed_two = mpirun(2, ["resume", run_dir, "--quiet"], 1)
        self.assertEqual(params_sha(resumed_two), whole, resumed_two.stderr)

    def test_a_signal_to_rank_zero_alone_stops_every_rank_after_its_savepoint(self):
        # Issue 43, defect 5: rank 1, with nothing to write, reached its exit first and
        # aborted the job while rank 0 was still writing the stop savepoint and run.json.
        runs = self.runs("signal")
        args = ["train", MLP, "--no-progress", "--set", f"experiment.runs_dir={runs}",
                "--set", "mesh.data=2", "--set", "train.savepoint_every=0", "--set",
                "tracking.tensorboard=false", "--set", "train.log_every=10"]
        env_flags = ["-x", "KILN_CPU_DEVICES"]
        job = subprocess.Popen([*MPIRUN, "-np", "2", *env_flags, KILN, *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment(1))
        try:
            run_dir, pid = self.wait_for_steps(runs, 20, job)
            os.kill(pid, signal.SIGTERM)  # rank 0's process alone, not mpirun's group
            out, err = job.communicate(timeout=180)
        finally:
            if job.poll() is None:
                job.kill()
                job.communicate()
        self.assertEqual(job.returncode, 143, out + err)
        with open(os.path.join(run_dir, "run.json")) as f:
            record = json.load(f)
        self.assertEqual(record["status"], "interrupted", err)
        self.assertEqual(record["signal"], "SIGTERM")
        stop = record["steps"]
        self.assertGreaterEqual(stop, 20)
        saved = sorted(os.listdir(os.path.join(run_dir, "savepoints")))
        self.assertEqual(saved[-1], f"step-{stop:08d}", err)
        self.assertIn(f"interrupted by SIGTERM after step {stop} ", err)

    def test_a_nonfinite_loss_stops_every_rank_after_rank_zero_records_it(self):
        # Every rank computes the same loss and stops after the same step: the job ends
        # normally with status 2, not by an abort that could cut rank 0's record short.
        runs = self.runs("nonfinite")
        result = mpirun(2, self.train_args(runs, "--set", "mesh.data=2", "--set",
                                           "optim.lr=1e30"), 1)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertNotIn("MPI_ABORT", result.stderr)
        [run_dir] = self.run_dirs(runs)
        with open(os.path.join(run_dir, "run.json")) as f:
            record = json.load(f)
        self.assertEqual(record["status"], "failed")
        self.assertIn("loss is nan", record["error"])

    def wait_for_steps(self, runs, steps, job):
        """The run directory and rank 0's pid once metrics.jsonl has `steps` train lines."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if job.poll() is not None:
                self.fail(f"the job ended early (exit {job.returncode}): {job.stderr.read()}")
            for run_dir in self.run_dirs(runs):
                try:
                    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
                        done = sum(1 for line in f if '"kind":"train"' in line)
                    with open(os.path.join(run_dir, "run.json")) as f:
                        pid = json.load(f)["pid"]
                except (OSError, ValueError, KeyError):
                    continue
                if done >= steps:
                    return run_dir, pid
            time.sleep(0.05)
        self.fail(f"no run in {runs} reached step {steps} within 120 s")

    def test_a_hung_rank_stops_the_job_naming_it(self):
        self.fault_then_resume("hang:1:85", r"rank 0: error: nothing from rank 1 within 5 s")

    def test_a_dead_rank_stops_the_job(self):
        # mpirun names the rank that exited: "Process name: [[job,1],1]".
        self.fault_then_resume("exit:1:85", r"Process name: \[\[\d+,\d+\],1\]\s+Exit code:\s+9")


if __name__ == "__main__":
    unittest.main(verbosity=2)
