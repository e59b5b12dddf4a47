#!/usr/bin/env python3
"""The `kiln` command against what a careless operator or a damaged disk hands it (issue 43):
closed pipes, full outputs, FIFOs and devices where files should be, records nested or
grown without bound, names that are not UTF-8, a damaged catalog row. Each test failed
before its fix; each checks the exit status, that the message names the file, and that
nothing already written was lost.

Usage: test_cli_faults.py PATH_TO_KILN
"""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

KILN = sys.argv.pop(1) if len(sys.argv) > 1 else "build/release/kiln"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "examples", "fashion_mnist_mlp.toml")
SMALL = ["--set", "data.train_limit=1024", "--set", "data.test_limit=500", "--set",
         "train.epochs=1"]
# Each command gets this long: a hang is a failure, not a stuck CI.
TIMEOUT = 120


def kiln(*args, check=False, **kwargs):
    kwargs.setdefault("capture_output", True)
    result = subprocess.run([KILN, *args], text=True, timeout=TIMEOUT, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"kiln {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def read_json(path):
    with open(path) as f:
        return json.load(f)


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class Faults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kiln-cli-faults-")
        cls.runs = os.path.join(cls.dir, "runs")
        result = kiln("train", MLP, *SMALL, "--set", f"experiment.runs_dir={cls.runs}", "--quiet",
                      check=True)
        cls.run_dir = result.stdout.strip().splitlines()[-1]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def copy_of_run(self, name):
        """A copy of the trained run, in an experiment of its own, to damage."""
        copy = os.path.join(self.dir, "copies", name, os.path.basename(self.run_dir))
        shutil.copytree(self.run_dir, copy, symlinks=True)
        return copy

    # Defect 2: `kiln train | head` killed kiln by SIGPIPE and left the run "running".
    def test_a_closed_stdout_pipe_does_not_stop_the_run(self):
        runs = os.path.join(self.dir, "pipe-runs")
        train = subprocess.Popen([KILN, "train", MLP, *SMALL, "--set", f"experiment.runs_dir={runs}",
                                  "--set", "train.log_every=1"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        train.stdout.close()  # the reader is gone before kiln writes anything
        self.assertEqual(train.wait(timeout=TIMEOUT), 0)
        experiment = os.path.join(runs, "fashion_mnist_mlp")
        (run_id,) = os.listdir(experiment)
        self.assertEqual(read_json(os.path.join(experiment, run_id, "run.json"))["status"],
                         "completed")

    # Defect 12: a command whose output is its result exited 0 having written nothing.
    def test_output_that_cannot_be_written_fails_the_command(self):
        for args in (("runs", "--runs-dir", self.runs, "list", "--json"),
                     ("data", "validate", MLP, "--set", "data.train_limit=100", "--set",
                      "data.test_limit=100", "--json")):
            with open("/dev/full", "w") as full:
                result = kiln(*args, stdout=full, capture_output=False, stderr=subprocess.PIPE)
            self.assertEqual(result.returncode, 1, args)
            self.assertIn("cannot write the output to stdout", result.stderr)
        # A reader that is gone (`kiln runs list | head -0`): quiet, and 141 as if SIGPIPE
        # had ended it, the status a shell pipeline expects.
        reader, writer = os.pipe()
        os.close(reader)
        result = kiln("runs", "--runs-dir", self.runs, "list", stdout=writer, capture_output=False,
                      stderr=subprocess.PIPE)
        os.close(writer)
        self.assertEqual(result.returncode, 128 + signal.SIGPIPE, result.stderr)
        self.assertEqual(result.stderr, "")

    # Defect 8: a FIFO as the config hung `kiln train` forever.
    def test_a_fifo_config_is_refused_at_once(self):
        fifo = os.path.join(self.dir, "config.fifo")
        os.mkfifo(fifo)
        for command in ("train", "data"):
            args = ("train", fifo) if command == "train" else ("data", "validate", fifo)
            result = kiln(*args)
            self.assertEqual(result.returncode, 1)
            self.assertIn(f"cannot read config '{fifo}': it is a FIFO", result.stderr)
        result = kiln("train", "/dev/zero")
        self.assertIn("cannot read config '/dev/zero': it is a device", result.stderr)

    # Defect 9: a config name that is not UTF-8 failed with nlohmann's type_error.316.
    def test_a_config_name_that_is_not_utf8_is_recorded_escaped(self):
        name = os.path.join(os.fsencode(self.dir), b"wine\xff.toml")
        shutil.copy(os.path.join(ROOT, "examples", "wine_mlp.toml"), name)
        result = subprocess.run([KILN, "data", "validate", name, "--json"], capture_output=True,
                                timeout=TIMEOUT)
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertTrue(report["config_file"].endswith("wine\\xff.toml"), report["config_file"])

    # Defect 6: `kiln data validate` called a split without records valid.
    def test_validate_reports_an_empty_split(self):
        data = os.path.join(self.dir, "empty-train")
        os.makedirs(data)
        source = "/usr/share/datasets/fashion-mnist"
        for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
            shutil.copy(os.path.join(source, name), data)
        import gzip
        import struct
        with gzip.open(os.path.join(data, "train-images-idx3-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">IIII", 0x0803, 0, 28, 28))
        with gzip.open(os.path.join(data, "train-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">II", 0x0801, 0))
        result = kiln("data", "validate", MLP, "--set", f"data.dir={data}")
        self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
        self.assertIn("the train split has no records", result.stdout)
        self.assertIn("INVALID", result.stdout)

    # Defect 4: `kiln report -o PATH` replaced whatever PATH was.
    def test_report_never_replaces_a_record_a_link_or_a_fifo(self):
        run_dir = self.copy_of_run("report-out")
        record = os.path.join(run_dir, "run.json")
        before = file_bytes(record)
        fifo = os.path.join(self.dir, "report.fifo")
        os.mkfifo(fifo)
        link = os.path.join(self.dir, "report-link.html")
        os.symlink(record, link)
        for out, kind in ((record, "a file that is not an HTML report"), (fifo, "a FIFO"),
                          (link, "a symbolic link"), (run_dir, "a directory")):
            result = kiln("report", run_dir, "-o", out)
            self.assertEqual(result.returncode, 1, out)
            self.assertIn(f"will not write the report to {out}: it is {kind}", result.stderr)
        self.assertEqual(file_bytes(record), before)
        self.assertTrue(os.path.islink(link))
        again = os.path.join(self.dir, "again.html")
        kiln("report", run_dir, "-o", again, check=True)
        kiln("report", run_dir, "-o", again, check=True)  # an HTML report is replaced

    # Defect 7: config.toml or metrics.jsonl swapped for /dev/zero: OOM or a hang.
    def test_report_refuses_records_that_are_devices(self):
        for name in ("config.toml", "metrics.jsonl", "run.json"):
            run_dir = self.copy_of_run(f"device-{name}")
            os.remove(os.path.join(run_dir, name))
            os.symlink("/dev/zero", os.path.join(run_dir, name))
            result = kiln("report", run_dir, "-o", os.path.join(self.dir, f"{name}.html"))
            self.assertEqual(result.returncode, 1, name)
            self.assertIn(f"cannot read {os.path.join(run_dir, name)}: it is a character device",
                          result.stderr)

    # Defect 3: run.json nested 100,000 deep segfaulted report, reindex and resume.
    def test_deeply_nested_records_are_refused_not_crashed_on(self):
        run_dir = self.copy_of_run("deep")
        record = os.path.join(run_dir, "run.json")
        deep = '{"status": "interrupted", "x": ' + "[" * 100000 + "]" * 100000 + "}"
        with open(record, "w") as f:
            f.write(deep)
        for args in (("report", run_dir, "-o", os.path.join(self.dir, "deep.html")),
                     ("resume", run_dir)):
            result = kiln(*args)
            self.assertEqual(result.returncode, 1, args)
            self.assertIn("nested more than 64 levels deep", result.stderr)
            self.assertIn(record, result.stderr)
        runs_dir = os.path.dirname(os.path.dirname(run_dir))
        result = kiln("runs", "--runs-dir", runs_dir, "reindex")
        self.assertIn("nested more than 64 levels deep", result.stdout + result.stderr)
        self.assertEqual(file_bytes(record).decode(), deep)  # nothing rewritten

    # Defect 13: savepoints/ replaced by a file: resume restarted from step 0 and cut
    # metrics.jsonl back to nothing before it failed.
    def test_resume_with_savepoints_replaced_by_a_file_keeps_the_records(self):
        run_dir = self.copy_of_run("savepoints-file")
        info = read_json(os.path.join(run_dir, "run.json"))
        info["status"] = "interrupted"
        with open(os.path.join(run_dir, "run.json"), "w") as f:
            json.dump(info, f)
        shutil.rmtree(os.path.join(run_dir, "savepoints"))
        with open(os.path.join(run_dir, "savepoints"), "w") as f:
            f.write("not a directory")
        metrics = file_bytes(os.path.join(run_dir, "metrics.jsonl"))
        record = file_bytes(os.path.join(run_dir, "run.json"))
        result = kiln("resume", run_dir)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn(f"{os.path.join(run_dir, 'savepoints')}': is not a directory", result.stderr)
        self.assertEqual(file_bytes(os.path.join(run_dir, "metrics.jsonl")), metrics)
        self.assertEqual(file_bytes(os.path.join(run_dir, "run.json")), record)

    # Defect 11: one damaged catalog row made every `kiln runs` command fail.
    def test_a_damaged_catalog_row_is_skipped_with_a_warning(self):
        runs = os.path.join(self.dir, "catalog-runs")
        shutil.copytree(self.runs, runs, symlinks=True)
        database = os.path.join(runs, "kiln.db")
        with sqlite3.connect(database) as db:
            (key,) = db.execute("SELECT run_key FROM runs").fetchone()
            db.execute("UPDATE runs SET info = 'not json' WHERE run_key = ?", (key,))
        result = kiln("runs", "--runs-dir", runs, "list", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout), [])
        self.assertIn(f"warning: run catalog {database}: the record of run {key} is damaged",
                      result.stderr)

    @staticmethod
    def stop(process):
        """Ends a process a failed test left running, and closes its pipes."""
        if process.poll() is None:
            process.kill()
        process.communicate()

    def start_long_run(self, runs):
        """A run of 1000 epochs in the background, returned with its directory once it has
        recorded a step."""
        process = subprocess.Popen(
            [KILN, "train", MLP, "--set", "data.train_limit=1024", "--set", "data.test_limit=500",
             "--set", "train.epochs=1000", "--set", "train.log_every=1", "--set",
             f"experiment.runs_dir={runs}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop, process)
        experiment = os.path.join(runs, "fashion_mnist_mlp")
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            for run_id in os.listdir(experiment) if os.path.isdir(experiment) else []:
                metrics = os.path.join(experiment, run_id, "metrics.jsonl")
                if os.path.exists(metrics) and os.path.getsize(metrics) > 0:
                    return process, os.path.join(experiment, run_id)
            time.sleep(0.05)
        process.kill()
        self.fail(f"the run recorded no step: {process.communicate()}")

    # Also in issue 43: SIGHUP left the run "running" until the next resume.
    def test_sighup_stops_the_run_like_sigterm(self):
        process, run_dir = self.start_long_run(os.path.join(self.dir, "hup-runs"))
        process.send_signal(signal.SIGHUP)
        _, err = process.communicate(timeout=TIMEOUT)
        self.assertEqual(process.returncode, 128 + signal.SIGHUP, err)
        info = read_json(os.path.join(run_dir, "run.json"))
        self.assertEqual(info["status"], "interrupted")
        self.assertEqual(info["signal"], "SIGHUP")

    # Defect 1: two `kiln resume`s started together both trained the same run.
    def test_two_resumes_at_once_one_is_refused(self):
        process, run_dir = self.start_long_run(os.path.join(self.dir, "twice-runs"))
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=TIMEOUT)
        resumes = [subprocess.Popen([KILN, "resume", run_dir], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for resume in resumes:
            self.addCleanup(self.stop, resume)
        # The one refused ends at once; the other trains on until it is stopped.
        deadline = time.monotonic() + TIMEOUT
        while all(r.poll() is None for r in resumes):
            self.assertLess(time.monotonic(), deadline, "neither resume was refused")
            time.sleep(0.02)
        refused = next(r for r in resumes if r.poll() is not None)
        owner = next(r for r in resumes if r is not refused)
        _, refused_err = refused.communicate()
        self.assertEqual(refused.returncode, 1, refused_err)
        self.assertIn(f"cannot resume '{run_dir}': another kiln process (pid {owner.pid}) is "
                      "training or resuming it", refused_err)
        owner.send_signal(signal.SIGINT)
        _, owner_err = owner.communicate(timeout=TIMEOUT)
        self.assertEqual(owner.returncode, 130, owner_err)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            steps = [json.loads(line)["step"] for line in f
                     if line.strip() and json.loads(line).get("kind") == "train"]
        self.assertGreater(len(steps), 0)
        self.assertEqual(steps, sorted(set(steps)), "a step was recorded twice")


if __name__ == "__main__":
    unittest.main(verbosity=2)
