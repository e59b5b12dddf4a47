#!/usr/bin/env python3
"""Runs the `kiln` command as a user would and checks its output and exit codes.

Usage: test_cli.py PATH_TO_KILN
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

KILN = sys.argv.pop(1) if len(sys.argv) > 1 else "build/release/kiln"


def run(*args, env=None, check=True):
    full_env = dict(os.environ)
    full_env.pop("KILN_CPU_DEVICES", None)
    full_env.update(env or {})
    result = subprocess.run([KILN, *args], capture_output=True, text=True, env=full_env, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"kiln {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


class Cli(unittest.TestCase):
    def test_help_lists_commands_and_environment(self):
        out = run("--help").stdout
        for word in ("devices", "bench", "KILN_CPU_DEVICES", "KILN_COMPUTE_THREADS"):
            self.assertIn(word, out)

    def test_devices_table_and_json(self):
        out = run("devices", env={"KILN_CPU_DEVICES": "4"}).stdout
        self.assertIn("4 device(s)", out)
        for i in range(4):
            self.assertIn(f"cpu:{i}", out)
        devices = json.loads(run("devices", "--json", env={"KILN_CPU_DEVICES": "3"}).stdout)
        self.assertEqual([d["id"] for d in devices], [0, 1, 2])
        self.assertTrue(all(d["kind"] == "cpu" and d["compute_threads"] >= 1 for d in devices))

    def test_bad_device_count_is_a_clear_error(self):
        for bad in ("0", "300", "many"):
            result = run("devices", env={"KILN_CPU_DEVICES": bad}, check=False)
            self.assertEqual(result.returncode, 1, bad)
            self.assertIn(f"KILN_CPU_DEVICES='{bad}'", result.stderr)
            self.assertIn("HINT:", result.stderr)

    def test_bench_ops_quick_prints_every_section(self):
        out = run("bench", "ops", "--quick", env={"KILN_CPU_DEVICES": "4"}).stdout
        for section in ("dot_general", "Elementwise bandwidth", "STREAM add", "kiln exp",
                        "dispatch overhead", "under-reports"):
            self.assertIn(section, out)

    def test_usage_errors(self):
        self.assertNotEqual(run(check=False).returncode, 0)
        self.assertNotEqual(run("frobnicate", check=False).returncode, 0)
        result = run("bench", "ops", "--repeats", "0", check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("repeats", result.stderr)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "examples", "fashion_mnist_mlp.toml")
SMALL = ["--set", "data.train_limit=1024", "--set", "data.test_limit=500", "--set",
         "train.epochs=1"]


class TrainCli(unittest.TestCase):
    """`kiln train` as a user runs it: on a small subset, so each run takes seconds."""

    def setUp(self):
        self.runs = tempfile.mkdtemp(prefix="kiln-cli-runs-")
        self.where = ["--set", f"experiment.runs_dir={self.runs}"]

    def tearDown(self):
        shutil.rmtree(self.runs, ignore_errors=True)

    def train(self, *args, env=None, check=True):
        return run("train", MLP, *SMALL, *self.where, *args, env=env, check=check)

    def test_same_weights_with_one_and_two_compute_threads(self):
        digests = []
        for threads in ("1", "2"):
            result = self.train(env={"KILN_COMPUTE_THREADS": threads})
            run_dir = result.stdout.strip().splitlines()[-1]
            self.assertTrue(run_dir.startswith(self.runs), result.stdout)
            with open(os.path.join(run_dir, "params.safetensors"), "rb") as f:
                digests.append(hashlib.sha256(f.read()).hexdigest())
            with open(os.path.join(run_dir, "run.json")) as f:
                info = json.load(f)
            self.assertEqual(info["status"], "completed")
            self.assertEqual(info["params_sha256"], digests[-1])
            self.assertEqual(info["compute_threads"], int(threads))
            for name in ("config.toml", "metrics.jsonl"):
                self.assertTrue(os.path.exists(os.path.join(run_dir, name)), name)
        self.assertEqual(digests[0], digests[1])

    def test_prints_config_and_plain_progress_lines_off_a_terminal(self):
        result = self.train("--set", "train.log_every=4")
        self.assertIn("# resolved config", result.stdout)
        self.assertIn("[[model.layers]]", result.stdout)
        self.assertIn("step 4/8", result.stderr)
        self.assertIn("step 8/8", result.stderr)
        self.assertIn("test loss", result.stderr)
        self.assertIn("done: 8 steps", result.stdout)

    def test_print_config_applies_overrides(self):
        out = run("train", MLP, "--print-config", "--set", "optim.lr=3e-4").stdout
        self.assertIn("lr = 0.0003", out)

    def test_malformed_toml_names_line_and_column(self):
        path = os.path.join(self.runs, "bad.toml")
        with open(path, "w") as f:
            f.write("[train]\nepochs = = 3\n")
        result = run("train", path, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{path}:2:", result.stderr)

    def test_unknown_override_suggests_the_key(self):
        result = self.train("--set", "optim.lrr=3e-4", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("optim.lrr", result.stderr)
        self.assertIn("did you mean 'optim.lr'", result.stderr)
        self.assertEqual(os.listdir(self.runs), [])

    def test_missing_dataset_gives_the_install_hint_and_no_run(self):
        result = self.train("--set", "data.dir=/nonexistent", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("dataset-fashion-mnist", result.stderr)
        self.assertEqual(os.listdir(self.runs), [])

    def test_non_finite_loss_exits_2_and_marks_the_run_failed(self):
        result = self.train("--set", "optim.name=sgd", "--set", "optim.lr=1e30", check=False)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("non-finite", result.stderr)
        experiment = os.path.join(self.runs, "fashion_mnist_mlp")
        (run_id,) = os.listdir(experiment)
        with open(os.path.join(experiment, run_id, "run.json")) as f:
            self.assertEqual(json.load(f)["status"], "failed")


if __name__ == "__main__":
    unittest.main(verbosity=2)
