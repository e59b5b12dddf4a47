#!/usr/bin/env python3
"""Runs the `kiln` command as a user would and checks its output and exit codes.

Usage: test_cli.py PATH_TO_KILN
"""
import hashlib
import json
import re
import os
import glob
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

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

    def test_devices_check_places_blocks_on_every_device(self):
        for count, rows in (("4", 7), ("3", 3), ("1", 3)):
            result = run("devices", "--check", env={"KILN_CPU_DEVICES": count})
            self.assertIn("all placements check out", result.stdout)
            self.assertEqual(result.stdout.count(" ok\n"), rows, result.stdout)
        checks = json.loads(run("devices", "--check", "--json",
                                env={"KILN_CPU_DEVICES": "4"}).stdout)
        self.assertEqual([c["spec"] for c in checks],
                         ["{_,_}", "{data,_}", "{_,data}", "{data,_}", "{data,model}",
                          "{model,data}", "{(data,model),_}"])
        self.assertTrue(all(c["problems"] == [] and c["devices"] == 4 for c in checks))

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

    def test_bench_collectives_counts_the_ring_formula(self):
        out = run("bench", "collectives", "--quick", "--repeats", "1", "--max-bytes", "65536",
                  env={"KILN_CPU_DEVICES": "4"}).stdout
        self.assertIn("## 2 devices", out)
        self.assertIn("## 4 devices", out)
        rows = [line.split() for line in out.splitlines() if line.strip().endswith(("4096", "6144",
                                                                                   "65536", "98304"))]
        # size, unit, ..., sent/dev, formula: the measured bytes are the formula's.
        self.assertEqual(len(rows), 4, out)
        for row in rows:
            self.assertEqual(row[-2], row[-1], row)
        result = run("bench", "collectives", "--quick", env={"KILN_CPU_DEVICES": "2"}, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("runs on 2 and 4 logical devices; this process has 2", result.stderr)
        self.assertIn("KILN_CPU_DEVICES=4 kiln bench collectives", result.stderr)

    def test_usage_errors(self):
        self.assertNotEqual(run(check=False).returncode, 0)
        self.assertNotEqual(run("frobnicate", check=False).returncode, 0)
        result = run("bench", "ops", "--repeats", "0", check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("repeats", result.stderr)

    def test_usage_errors_exit_with_the_documented_status(self):
        # CLI11's own codes (106, 109, 114...) are mapped to 1; --help and --version are 0.
        for args in ((), ("frobnicate",), ("train",), ("train", "a.toml", "--bogus"),
                     ("devices", "--json", "extra"), ("--bogus",)):
            self.assertEqual(run(*args, check=False).returncode, 1, args)
        self.assertEqual(run("--help", check=False).returncode, 0)
        self.assertEqual(run("train", "--help", check=False).returncode, 0)
        self.assertEqual(run("--version", check=False).returncode, 0)

    def test_generate_usage_and_a_missing_run_are_clear_errors(self):
        self.assertEqual(run("generate", "--help").returncode, 0)
        result = run("generate", tempfile.gettempdir(), check=False)  # no --prompt
        self.assertEqual(result.returncode, 1)
        self.assertIn("--prompt", result.stderr)
        result = run("generate", tempfile.gettempdir(), "--prompt", "And", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("not a run directory", result.stderr)
        result = run("generate", tempfile.gettempdir(), "--prompt", "x", "--tokens", "-1",
                     check=False)
        self.assertEqual(result.returncode, 1)

    def test_mistyped_command_suggests_the_closest(self):
        result = run("trian", "x.toml", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("unknown command 'trian'; did you mean 'train'?", result.stderr)

    def test_unknown_kernels_setting_is_refused(self):
        result = run("devices", env={"KILN_KERNELS": "bogus"}, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("KILN_KERNELS='bogus'", result.stderr)

    def test_kernel_mode_setting_and_checks_in_each_mode(self):
        result = run("kernels", "check", "softmax", env={"KILN_PALLAS": "bogus"}, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("KILN_PALLAS='bogus' is not a kernel mode", result.stderr)
        both = run("kernels", "check", "softmax").stdout
        compiled = run("kernels", "check", "softmax", "--mode", "compiled").stdout
        self.assertRegex(both, r"softmax +compiled .* ok")
        self.assertRegex(both, r"softmax +interpret .* ok")
        self.assertNotIn(" interpret ", compiled)
        count = lambda text: int(re.search(r"(\d+) case\(s\), 0 failed", text).group(1))
        self.assertEqual(count(both), 2 * count(compiled))

    @staticmethod
    def privacy_json(*args):
        """`kiln privacy ARGS --json`, parsed."""
        return json.loads(run("privacy", *args, "--json").stdout)

    def test_privacy_epsilon_from_rate_or_batch_and_bad_settings_by_name(self):
        # dp-accounting 0.6.0 gives 1.71177 at order 9.6 for these (docs/privacy.md).
        out = run("privacy", "epsilon", "-q", "0.01", "--sigma", "1.1", "--steps", "1000").stdout
        self.assertIn("epsilon 1.7118 at delta 1e-05 (RDP accountant, Rényi order 9.6) for 1000 "
                      "steps", out)
        spent = self.privacy_json("epsilon", "--batch", "256", "--examples", "60000",
                                  "--sigma", "1.1", "--epochs", "60")
        self.assertEqual(spent["steps"], 14063)
        self.assertAlmostEqual(spent["sampling_rate"], 256 / 60000)
        self.assertEqual(spent["series"], "upper_bound")
        self.assertEqual(spent["accountant"], "rdp")
        exact = self.privacy_json("epsilon", "-q", "0.01", "--sigma", "0.5", "--steps", "100",
                                  "--exact")
        bound = self.privacy_json("epsilon", "-q", "0.01", "--sigma", "0.5", "--steps", "100")
        self.assertLess(exact["epsilon"], bound["epsilon"])
        for args, message in (
                (("-q", "0", "--sigma", "1", "--steps", "3"), "sampling_rate is 0"),
                (("-q", "0.1", "--sigma", "-1", "--steps", "3"), "noise_multiplier is -1"),
                (("-q", "0.1", "--sigma", "1", "--steps", "3", "--delta", "2"), "delta is 2"),
                (("--batch", "10", "--sigma", "1", "--steps", "3"),
                 "give --batch and --examples together"),
                (("-q", "0.1", "--sigma", "1", "--steps", "3", "--epochs", "2"),
                 "give --epochs (with a sampling rate) or --steps, not both"),
                (("-q", "0.1", "--sigma", "1"), "give --steps or --epochs")):
            result = run("privacy", "epsilon", *args, check=False)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn(message, result.stderr)

    def test_privacy_epsilon_by_the_pld_accountant_and_bad_settings_by_name(self):
        # dp-accounting 0.6.0's PLDAccountant gives 1.51537 for these (docs/privacy.md).
        out = run("privacy", "epsilon", "-q", "0.01", "--sigma", "1.1", "--steps", "1000",
                  "--accountant", "pld").stdout
        self.assertIn("epsilon 1.5154 at delta 1e-05 (PLD accountant, discretization 0.0001) "
                      "for 1000 steps", out)
        mnist = ("--batch", "256", "--examples", "60000", "--sigma", "1.1", "--epochs", "40")
        pld = self.privacy_json("epsilon", *mnist, "--accountant", "pld")
        rdp = self.privacy_json("epsilon", *mnist, "--accountant", "rdp")
        self.assertEqual(pld["accountant"], "pld")
        self.assertEqual(pld["steps"], 9375)
        self.assertEqual(pld["discretization"], 1e-4)
        self.assertNotIn("order", pld)
        self.assertEqual(rdp, self.privacy_json("epsilon", *mnist))  # rdp is the default
        self.assertLess(pld["epsilon"], rdp["epsilon"])  # 1.910 against 2.088
        for args, message in (
                (("--accountant", "moments"), "--accountant: moments not in {rdp,pld}"),
                (("--accountant", "pld", "--exact"), "--exact is the RDP accountant's"),
                (("--accountant", "pld", "--delta", "0"), "delta is 0; it must be in (0, 1)"),
                (("--accountant", "pld", "--delta", "1e-12"),
                 "delta is 1e-12; the PLD accountant needs it at 1e-10 or more")):
            result = run("privacy", "epsilon", "-q", "0.01", "--sigma", "1.1", "--steps", "10",
                         *args, check=False)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn(message, result.stderr)
        result = run("privacy", "epsilon", "-q", "1.5", "--sigma", "1.1", "--steps", "10",
                     "--accountant", "pld", check=False)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("sampling_rate is 1.5; it must be in (0, 1]", result.stderr)

    def test_privacy_noise_finds_the_multiplier_for_a_budget(self):
        out = run("privacy", "noise", "-q", "0.01", "--steps", "1000", "--epsilon", "1.71177").stdout
        self.assertIn("noise multiplier 1.1000: 1000 steps at sampling rate 0.01", out)
        found = self.privacy_json("noise", "--batch", "256", "--examples", "60000", "--epochs",
                                  "60", "--epsilon", "3")
        self.assertLessEqual(found["epsilon"], 3)
        self.assertEqual(found["steps"], 14063)
        # The same accounting as `epsilon`: the noise found spends what `epsilon` says.
        spent = self.privacy_json("epsilon", "--batch", "256", "--examples", "60000",
                                  "--epochs", "60", "--sigma", repr(found["noise_multiplier"]))
        self.assertAlmostEqual(spent["epsilon"], found["epsilon"], places=9)
        # By the PLD accountant: a smaller noise for the same budget, which `epsilon` with the
        # same accountant confirms.
        by_pld = self.privacy_json("noise", "--batch", "256", "--examples", "60000", "--epochs",
                                   "60", "--epsilon", "3", "--accountant", "pld")
        self.assertEqual(by_pld["accountant"], "pld")
        self.assertLessEqual(by_pld["epsilon"], 3)
        self.assertLess(by_pld["noise_multiplier"], found["noise_multiplier"])
        pld_spent = self.privacy_json("epsilon", "--batch", "256", "--examples", "60000",
                                      "--epochs", "60", "--sigma",
                                      repr(by_pld["noise_multiplier"]), "--accountant", "pld")
        self.assertAlmostEqual(pld_spent["epsilon"], by_pld["epsilon"], places=9)
        unreachable = run("privacy", "noise", "-q", "0.01", "--steps", "1000", "--epsilon",
                          "0.0001", check=False)
        self.assertEqual(unreachable.returncode, 1, unreachable.stderr)
        self.assertIn("no noise multiplier up to 1e+06", unreachable.stderr)
        missing = run("privacy", "noise", "-q", "0.01", "--steps", "10", check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("--epsilon is required", missing.stderr)

    def test_kernels_bench_measures_on_the_cpu_and_refuses_what_it_cannot_run_on(self):
        result = run("kernels", "bench", "layer_norm", "--quick", "--repeats", "2")
        self.assertIn("# device: cpu,", result.stdout)
        self.assertIn("the kernel compiled, both sides jitted", result.stdout)
        self.assertRegex(result.stdout, r"kernel +[0-9.]+ ms")
        self.assertRegex(result.stdout, r"unfused program \(jit\) +[0-9.]+ ms")
        self.assertIn("unfused / kernel per pair:", result.stdout)
        interpreted = run("kernels", "bench", "layer_norm", "--quick", "--repeats", "1",
                          "--mode", "interpret")
        self.assertIn("the kernel in interpret mode, both sides eager", interpreted.stdout)
        self.assertRegex(interpreted.stdout, r"unfused program \(eager ops\) +[0-9.]+ ms")
        # No estimate for a device the kernel did not run on: a refusal, exit 2, no figure.
        refused = run("kernels", "bench", "layer_norm", "--device", "cuda", check=False)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("--device cuda: not measured", refused.stderr)
        self.assertNotIn("ms", refused.stdout)
        # Every kernel kiln ships has inputs to be benched on.
        for name in run("kernels", "list").stdout.split():
            quick = run("kernels", "bench", name, "--quick", "--repeats", "1")
            self.assertIn(f"# kiln kernels bench {name}:", quick.stdout)
        unknown = run("kernels", "bench", "layer_nrom", check=False)
        self.assertEqual(unknown.returncode, 1)
        self.assertIn("no kernel named 'layer_nrom'", unknown.stderr)
        self.assertIn("softmax_cross_entropy", unknown.stderr)

    def test_kernels_bench_double_buffer_compares_the_kernel_with_itself(self):
        result = run("kernels", "bench", "matmul", "--quick", "--repeats", "2",
                     "--double-buffer")
        self.assertIn("double-buffered against single-buffered, both jitted", result.stdout)
        self.assertRegex(result.stdout, r"kernel, double-buffered +[0-9.]+ ms")
        self.assertRegex(result.stdout, r"kernel, single-buffered +[0-9.]+ ms")
        self.assertIn("single-buffered / double-buffered per pair:", result.stdout)
        refused = run("kernels", "bench", "matmul", "--quick", "--double-buffer", "--mode",
                      "interpret", check=False)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("cannot be given with --mode interpret", refused.stderr)
        # The variable that sets every call's double buffering: a bad value names itself.
        bad = run("kernels", "bench", "matmul", "--quick", "--repeats", "1",
                  env={"KILN_PALLAS_DOUBLE_BUFFER": "yes"}, check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("KILN_PALLAS_DOUBLE_BUFFER='yes' is not a double-buffering setting: 'on' or "
                      "'off'", bad.stderr)
        on = run("kernels", "bench", "matmul", "--quick", "--repeats", "1",
                 env={"KILN_PALLAS_DOUBLE_BUFFER": "on"})
        self.assertIn("unfused / kernel per pair:", on.stdout)

    def test_kernels_bench_takes_the_matmuls_size_and_each_kernels_blocks(self):
        sized = run("kernels", "bench", "matmul", "--repeats", "1", "--size", "96", "--blocks",
                    "32,64,48")
        self.assertIn("f32 96x96 @ 96x96, blocks 32x64x48", sized.stdout)
        rows = run("kernels", "bench", "softmax_cross_entropy", "--quick", "--repeats", "1",
                   "--blocks", "2")
        self.assertIn("2 rows a block", rows.stdout)
        wrong = run("kernels", "bench", "matmul", "--quick", "--blocks", "32", check=False)
        self.assertEqual(wrong.returncode, 2)
        self.assertIn("--blocks for matmul: three, M,N,K, got 1 value(s)", wrong.stderr)
        fixed = run("kernels", "bench", "flash_attention", "--quick", "--blocks", "32",
                    check=False)
        self.assertEqual(fixed.returncode, 2)
        self.assertIn("its blocks are fixed", fixed.stderr)
        not_matmul = run("kernels", "bench", "softmax", "--size", "64", check=False)
        self.assertEqual(not_matmul.returncode, 2)
        self.assertIn("--size is matmul's", not_matmul.stderr)
        negative = run("kernels", "bench", "matmul", "--blocks", "0,8,8", check=False)
        self.assertNotEqual(negative.returncode, 0)

    def test_config_larger_than_the_limit_is_refused(self):
        with tempfile.NamedTemporaryFile(suffix=".toml") as big:
            big.write(b"# " + b"x" * (1 << 21) + b"\n")
            big.flush()
            result = run("train", big.name, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("larger than 1048576 bytes", result.stderr)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "examples", "fashion_mnist_mlp.toml")
TOOLS = os.path.join(ROOT, "tests", "tools")
SMALL = ["--set", "data.train_limit=1024", "--set", "data.test_limit=500", "--set",
         "train.epochs=1"]


WINE = os.path.join(ROOT, "examples", "wine_mlp.toml")


class DataCli(unittest.TestCase):
    """`kiln data validate`: the report, its JSON form and the exit status."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kiln-cli-data-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_valid_data_reports_histograms_and_identity_and_exits_0(self):
        out = run("data", "validate", MLP).stdout
        self.assertIn("train: 60000 records read, no violations", out)
        self.assertIn("classes: [6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000]", out)
        self.assertRegex(out, r"dataset identity: [0-9a-f]{64}")
        report = json.loads(run("data", "validate", WINE, "--json").stdout)
        self.assertTrue(report["valid"])
        self.assertEqual(report["train_report"]["records_read"] + report["test_report"]["records_read"], 178)
        self.assertEqual(len(report["identity"]), 64)

    def test_violations_are_grouped_by_rule_and_exit_3(self):
        path = os.path.join(self.dir, "bad.csv")
        with open(path, "w") as f:
            f.write("a,b,label\n1,2,0\n3,,1\n5,6,7\n7,8\n9,10,1\n")
        config = os.path.join(self.dir, "bad.toml")
        with open(config, "w") as f:
            f.write(f'[data]\ndataset = "csv"\ntrain_file = "{path}"\ntest_fraction = 0.2\n'
                    '[data.label]\nnum_classes = 2\n[[model.layers]]\ntype = "dense"\nfeatures = 2\n')
        result = run("data", "validate", config, check=False)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn("missing_value", result.stdout)
        self.assertIn("label_set", result.stdout)
        self.assertIn("malformed_row", result.stdout)
        self.assertIn("record 2 has label 7", result.stdout)
        self.assertIn("INVALID", result.stdout)
        # kiln train refuses the same data before creating a run.
        train = run("train", config, "--set", f"experiment.runs_dir={self.dir}/runs", check=False)
        self.assertEqual(train.returncode, 1)
        self.assertIn("violates its contract", train.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "runs")))

    def test_unreadable_data_exits_1(self):
        result = run("data", "validate", MLP, "--set", "data.dir=/nonexistent", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("dataset-fashion-mnist", result.stderr)


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

    def test_private_training_reports_epsilon_and_stops_at_the_budget(self):
        # At q = 1/8 and sigma 0.5, 3 steps spend epsilon 9.2 and 4 steps 10.1 (`kiln privacy
        # epsilon -q 0.125 --sigma 0.5 --steps 4 --delta 1e-4`): a budget of 10 ends the
        # 8-step run after 3.
        result = self.train("--set", "privacy.enabled=true", "--set", "privacy.noise_multiplier=0.5",
                            "--set", "privacy.max_epsilon=10", "--set", "privacy.delta=1e-4")
        self.assertIn("privacy: privacy.max_epsilon = 10 allows 3 of the 8 planned steps",
                      result.stdout)
        self.assertIn("epsilon ", result.stderr)
        run_dir = result.stdout.strip().splitlines()[-1]
        with open(os.path.join(run_dir, "run.json")) as f:
            privacy = json.load(f)["privacy"]
        self.assertLessEqual(privacy["epsilon"], 10)
        self.assertEqual(privacy["steps"], 3)
        self.assertEqual(privacy["steps_within_budget"], 3)
        refused = self.train("--set", "privacy.enabled=true", "--set", "privacy.clip_norm=0",
                             check=False)
        self.assertEqual(refused.returncode, 1, refused.stderr)
        self.assertIn("privacy.clip_norm = 0.0 is out of range", refused.stderr)

    def test_export_then_predict_with_the_artifact_alone(self):
        run_dir = self.train().stdout.strip().splitlines()[-1]
        artifacts = os.path.join(self.runs, "artifacts")
        out = run("export", run_dir, "--artifacts", artifacts).stdout
        self.assertIn("exported version 1.0.0+", out)
        self.assertIn("bit for bit", out)
        artifact = out.strip().splitlines()[-1]
        again = run("export", run_dir, "--artifacts", artifacts).stdout
        self.assertIn("already exported", again)
        # Three raw test images as a .npy file of u8 [3, 28, 28], written by hand.
        import gzip
        with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
            pixels = f.read()[16:16 + 3 * 28 * 28]
        header = "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 28, 28), }"
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        images = os.path.join(self.runs, "images.npy")
        with open(images, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
            f.write(pixels)
        classes = run("predict", artifact, images).stdout.split()
        self.assertEqual(len(classes), 3)
        self.assertTrue(all(c.isdigit() and 0 <= int(c) <= 9 for c in classes), classes)
        # The IDX file itself (gzip), as Fashion-MNIST ships: one class per test image.
        idx = run("predict", artifact, "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")
        self.assertEqual(idx.stdout.split()[:3], classes)
        self.assertEqual(len(idx.stdout.split()), 10000)
        logits = os.path.join(self.runs, "logits.npy")
        self.assertIn("f32[3,10]", run("predict", artifact, images, "--output", logits).stdout)
        with open(logits, "rb") as f:
            written = f.read()
        self.assertTrue(written.startswith(b"\x93NUMPY\x01\x00"))
        self.assertIn(b"'descr': '<f4'", written)
        self.assertIn(b"'shape': (3, 10)", written)
        self.assertEqual(len(written) % 64, (3 * 10 * 4) % 64)
        verified = run("verify", artifact).stdout
        self.assertIn("verified", verified)
        self.assertNotIn("FAIL", verified)
        # Another run's directory is not an artifact; damaged weights are refused.
        result = run("predict", run_dir, images, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("is not an artifact", result.stderr)
        with open(os.path.join(artifact, "weights.safetensors"), "r+b") as f:
            f.seek(-1, os.SEEK_END)
            f.write(b"\x7f")
        result = run("predict", artifact, images, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("the SHA-256 of weights.safetensors", result.stderr)

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


    def run_dirs(self, experiment="fashion_mnist_mlp"):
        return sorted(glob.glob(os.path.join(self.runs, experiment, "*")))

    def info(self, run_dir):
        with open(os.path.join(run_dir, "run.json")) as f:
            return json.load(f)

    def start(self, *args, experiment="fashion_mnist_mlp"):
        """A longer run in the background, returned once it has recorded a step."""
        process = subprocess.Popen(
            [KILN, "train", MLP, "--set", "data.train_limit=1024", "--set",
             "data.test_limit=500", "--set", "train.epochs=1000", "--set", "train.log_every=1",
             *self.where, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None:
            metrics = [os.path.join(d, "metrics.jsonl") for d in self.run_dirs(experiment)]
            if metrics and os.path.exists(metrics[0]) and os.path.getsize(metrics[0]) > 0:
                return process
            time.sleep(0.05)
        process.kill()
        self.fail(f"the run recorded no step: {process.communicate()}")

    def test_sigint_and_sigterm_mark_the_run_interrupted(self):
        for sig, status in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            process = self.start("--set", f"experiment.name=stop{int(sig)}",
                                 experiment=f"stop{int(sig)}")
            process.send_signal(sig)
            out, err = process.communicate(timeout=240)
            self.assertEqual(process.returncode, status, err)
            self.assertIn("interrupted", err)
            (run_dir,) = self.run_dirs(f"stop{int(sig)}")
            info = self.info(run_dir)
            self.assertEqual(info["status"], "interrupted")
            self.assertEqual(info["signal"], sig.name)
            self.assertGreaterEqual(info["steps"], 1)
            self.assertEqual([n for n in os.listdir(run_dir) if ".tmp." in n], [])
            self.assertFalse(os.path.exists(os.path.join(run_dir, "params.safetensors")))

    def test_kill_and_rerun(self):
        # The README's example: a run killed at once (SIGKILL) leaves run.json "running";
        # the next run of the experiment marks it "crashed".
        process = self.start()
        process.kill()
        process.communicate(timeout=60)
        (killed,) = self.run_dirs()
        self.assertEqual(self.info(killed)["status"], "running")
        self.assertEqual(self.info(killed)["host"], socket.gethostname())
        result = self.train()
        self.assertIn(f"marked {killed} as crashed", result.stdout)
        self.assertEqual(self.info(killed)["status"], "crashed")
        self.assertEqual(self.info(result.stdout.strip().splitlines()[-1])["status"], "completed")

    def test_kill_and_resume(self):
        # The README's example: a run killed at once (SIGKILL) after some savepoints
        # continues with `kiln resume` to the weights of a run never killed.
        process = self.start("--set", "train.epochs=10", "--set", "train.savepoint_every=3")
        (run_dir,) = self.run_dirs()
        deadline = time.monotonic() + 120
        while not glob.glob(os.path.join(run_dir, "savepoints", "step-*", "COMMITTED")):
            self.assertLess(time.monotonic(), deadline, "no savepoint was committed")
            time.sleep(0.02)
        process.kill()
        process.communicate(timeout=60)
        result = run("resume", run_dir)
        self.assertIn(f"resuming {run_dir} from step ", result.stdout)
        self.assertEqual(self.info(run_dir)["status"], "completed")
        straight = self.train("--set", "data.train_limit=1024", "--set", "data.test_limit=500",
                              "--set", "train.epochs=10", "--set", "train.log_every=1",
                              "--set", "train.savepoint_every=0")
        other = straight.stdout.strip().splitlines()[-1]
        self.assertEqual(self.info(run_dir)["params_sha256"], self.info(other)["params_sha256"])
        again = run("resume", run_dir)
        self.assertIn(f"nothing to do: {run_dir} completed", again.stdout)

    def test_sigterm_saves_and_says_how_to_resume(self):
        process = self.start()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=240)
        self.assertEqual(process.returncode, 143, err)
        (run_dir,) = self.run_dirs()
        self.assertIn(f"continue with: kiln resume {run_dir}", err)
        steps = self.info(run_dir)["steps"]
        self.assertTrue(os.path.exists(
            os.path.join(run_dir, "savepoints", f"step-{steps:08d}", "COMMITTED")))
        checked = subprocess.run([sys.executable, os.path.join(TOOLS, "savepoint_check.py"),
                                  run_dir], capture_output=True, text=True)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
        self.assertIn(f"step-{steps:08d}: ok", checked.stdout)

    def test_resume_refuses_a_changed_config_naming_the_key(self):
        process = self.start()
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=240)
        (run_dir,) = self.run_dirs()
        refused = run("resume", run_dir, "--set", "optim.lr=0.01", check=False)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("config optim.lr: 0.001 -> 0.01", refused.stderr)
        self.assertIn("--allow-changed", refused.stderr)
        self.assertEqual(self.info(run_dir)["status"], "interrupted")

    def test_checkpoint_every_is_refused_naming_savepoint_every(self):
        result = self.train("--set", "train.checkpoint_every=100", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("train-state saves are called savepoints in kiln", result.stderr)
        self.assertIn("use 'train.savepoint_every'", result.stderr)

    def test_sigkill_at_random_moments_then_resume_is_bit_identical(self):
        # Five trials of tests/tools/savepoint_kill.py (scripts/savepoint_kill_trials runs
        # 50 and more): each run is killed at random moments, during saves too, and resumed.
        sys.path.insert(0, TOOLS)
        import savepoint_kill
        expected, seconds = savepoint_kill.reference(KILN, self.runs)
        kills = 0
        for seed in range(1, 6):
            k, _ = savepoint_kill.trial(KILN, self.runs, seed, expected, seconds)
            kills += k
        self.assertGreater(kills, 0, "no trial was killed: the delays are too long")

    def test_a_full_stderr_does_not_fail_the_run(self):
        with open("/dev/full", "w") as full:
            result = subprocess.run([KILN, "train", MLP, *SMALL, *self.where],
                                    stdout=subprocess.PIPE, stderr=full, text=True, timeout=300)
        self.assertEqual(result.returncode, 0)
        (run_dir,) = self.run_dirs()
        self.assertEqual(self.info(run_dir)["status"], "completed")
        self.assertTrue(os.path.exists(os.path.join(run_dir, "params.safetensors")))

    def test_model_errors_create_no_run(self):
        path = os.path.join(self.runs, "strides.toml")
        with open(path, "w") as f:
            f.write('[[model.layers]]\ntype = "conv2d"\nfeatures = 4\nkernel_size = [3, 3]\n'
                    'strides = [9223372036854775807, 1]\n')
        result = run("train", path, *self.where, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("strides", result.stderr)
        self.assertEqual(os.listdir(self.runs), ["strides.toml"])

    def train_tiny_gpt2(self, line, steps, *overrides):
        """examples/gpt2_small.toml shrunk to one block of 32 channels, on `line` x 40."""
        corpus = os.path.join(self.runs, "corpus.txt")
        with open(corpus, "w") as f:
            f.write(line * 40)
        return run("train", os.path.join(ROOT, "examples", "gpt2_small.toml"), *self.where,
                   "--set", f"data.train_file={corpus}", "--set", "data.context=16",
                   "--set", "data.test_limit=0", "--set", "model.gpt2.layers=1",
                   "--set", "model.gpt2.channels=32", "--set", f"train.max_steps={steps}",
                   "--set", "optim.warmup_steps=5", "--set", "train.batch_size=8", *overrides)

    def test_a_gpt2_trains_from_text_and_generate_continues_the_prompt(self):
        result = self.train_tiny_gpt2("Let there be light: and there was light.\n", 30)
        run_dir = result.stdout.strip().splitlines()[-1]
        self.assertIn("GPT-2(layers 1", result.stdout)
        out = run("generate", run_dir, "--prompt", "Let there", "--tokens", "12",
                  "--temperature", "0").stdout
        self.assertTrue(out.startswith("Let there"), out)
        self.assertEqual(len(out.encode()), len("Let there") + 12 + 1)  # and a newline
        again = run("generate", run_dir, "--prompt", "Let there", "--tokens", "12",
                    "--temperature", "0").stdout
        self.assertEqual(again, out)
        # The config of a plain-attention run keeps the text it had before the key existed.
        with open(os.path.join(run_dir, "config.toml")) as f:
            self.assertNotIn("\nattention = ", f.read())

    def test_a_gpt2_trains_with_flash_attention_from_its_config(self):
        result = self.train_tiny_gpt2("In the beginning was the Word.\n", 10,
                                      "--set", "model.gpt2.attention=flash")
        run_dir = result.stdout.strip().splitlines()[-1]
        self.assertIn("flash attention", result.stdout)
        with open(os.path.join(run_dir, "config.toml")) as f:
            self.assertIn('attention = "flash"', f.read())
        out = run("generate", run_dir, "--prompt", "In the", "--tokens", "4").stdout
        self.assertTrue(out.startswith("In the"), out)
        bad = run("train", os.path.join(ROOT, "examples", "gpt2_small.toml"), *self.where,
                  "--set", "model.gpt2.attention=fused", check=False)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("model.gpt2.attention", bad.stderr)


def can_mount_tmpfs():
    probe = tempfile.mkdtemp(prefix="kiln-mount-probe-")
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", probe],
                                 capture_output=True).returncode == 0
        if mounted:
            subprocess.run(["umount", probe], check=True)
        return mounted
    except OSError:
        return False
    finally:
        os.rmdir(probe)


class BenchCli(unittest.TestCase):
    """`kiln bench step`, `cost` and `machine`: the timing report, the cost to a quality target
    and the machine's peaks."""

    def test_bench_step_prints_the_timing_report(self):
        out = run("bench", "step", MLP, *SMALL, "--steps", "6").stdout
        for line in ("compile", "time to first step", "steady-state step", "examples/s",
                     "data wait", "savepoints", "host syncs per step",
                     "parameter placement", "all 6 as requested"):
            self.assertIn(line, out)
        timing = json.loads(run("bench", "step", MLP, *SMALL, "--steps", "6", "--json").stdout)
        self.assertEqual(timing["misplaced_params"], 0)
        self.assertEqual(timing["steady_steps"], 5)  # the first step is not steady state

    def test_bench_cost_trains_each_variant_until_the_target(self):
        runs = tempfile.mkdtemp(prefix="kiln-cli-cost-")
        try:
            out = json.loads(run("bench", "cost", MLP, *SMALL, "--target", "test_accuracy=0.5",
                                 "--max-epochs", "3", "--compare", "optim.lr=1e-3,1e-9",
                                 "--runs-dir", runs, "--json").stdout)
            learns, stalls = out["rows"]
            self.assertEqual(learns["variant"], "optim.lr=1e-3")
            # lr 1e-3 gets past 50% in its first epoch and stops there; lr 1e-9 never does,
            # and runs all three epochs.
            self.assertTrue(learns["reached"])
            self.assertEqual(learns["epochs"], 1)
            self.assertGreaterEqual(learns["test_accuracy"], 0.5)
            self.assertFalse(stalls["reached"])
            self.assertEqual(stalls["epochs"], 3)
            self.assertEqual(stalls["steps"], 3 * learns["steps"])
            self.assertGreater(learns["train_flops"], 0)
            self.assertAlmostEqual(stalls["train_flops"] / learns["train_flops"], 3, places=6)
            # The same model and batch: the same step, so about the same peak memory.
            self.assertGreater(learns["peak_bytes"], 0)
            self.assertLess(abs(stalls["peak_bytes"] / learns["peak_bytes"] - 1), 0.2)
            runs_json = [json.load(open(os.path.join(row["run_dir"], "run.json")))
                         for row in out["rows"]]
            self.assertEqual([r["status"] for r in runs_json], ["completed", "completed"])
            table = run("bench", "cost", MLP, *SMALL, "--target", "test_loss=100").stdout
            self.assertIn("(the config)", table)
            self.assertIn("vs first", table)
            self.assertIn("peak mem", table)
        finally:
            shutil.rmtree(runs, ignore_errors=True)
        for target, says in (("test_accuracy=88", "for 88%, write 0.88"),
                             ("accuracy=0.8", "expected METRIC=VALUE"),
                             ("test_loss=abc", "'abc' is not a number")):
            result = run("bench", "cost", MLP, "--target", target, check=False)
            self.assertEqual(result.returncode, 1)
            self.assertIn(says, result.stderr)
        result = run("bench", "cost", MLP, "--target", "test_loss=1", "--compare", "optim.lr",
                     check=False)
        self.assertIn("expected KEY=VALUE,VALUE", result.stderr)

    def test_bench_machine_measures_once_then_reads_the_cache(self):
        cache = tempfile.mkdtemp(prefix="kiln-cli-cache-")
        try:
            env = {"KILN_CACHE_DIR": cache}
            first = json.loads(run("bench", "machine", "--json", env=env).stdout)
            self.assertFalse(first["cached"])
            self.assertGreater(first["gemm_gflops"], 0)
            self.assertGreater(first["bandwidth_gbs"], 0)
            second = json.loads(run("bench", "machine", "--json", env=env).stdout)
            self.assertTrue(second["cached"])
            self.assertEqual(second["gemm_gflops"], first["gemm_gflops"])
            self.assertIn("GFLOP/s", run("bench", "machine", env=env).stdout)
        finally:
            shutil.rmtree(cache, ignore_errors=True)


TRACKING_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), ".venv", "tracking", "bin", "python")


class MlflowCli(unittest.TestCase):
    """`kiln train` mirroring to a real MLflow server (the pinned one of .venv/tracking), read
    back with MLflow's own client; `kiln runs push` to a server that is down."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(TRACKING_PYTHON):
            raise AssertionError(f"{TRACKING_PYTHON} is missing: run scripts/setup")
        cls.dir = tempfile.mkdtemp(prefix="kiln-cli-mlflow-")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            cls.port = probe.getsockname()[1]
        env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
        mlflow = os.path.join(os.path.dirname(TRACKING_PYTHON), "mlflow")
        cls.server = subprocess.Popen(
            [mlflow, "server", "--host", "127.0.0.1", "--port", str(cls.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{cls.dir}/mlflow.db",
             "--artifacts-destination", f"{cls.dir}/artifacts"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        cls.uri = f"http://127.0.0.1:{cls.port}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(cls.uri + "/health", timeout=2)
                return
            except OSError:
                time.sleep(0.5)
        raise AssertionError("the MLflow server did not start in 180 s")

    @classmethod
    def tearDownClass(cls):
        os.killpg(cls.server.pid, signal.SIGTERM)
        try:
            cls.server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(cls.server.pid, signal.SIGKILL)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_a_mirrored_run_reads_back_through_mlflow(self):
        runs = os.path.join(self.dir, "runs")
        run("train", MLP, *SMALL, "--set", f"experiment.runs_dir={runs}", "--set",
            f"tracking.mlflow_uri={self.uri}", "--set", "tracking.mlflow_experiment=cli-test",
            "--quiet")
        (run_dir,) = glob.glob(os.path.join(runs, "fashion_mnist_mlp", "*"))
        with open(os.path.join(run_dir, "run.json")) as f:
            info = json.load(f)
        self.assertTrue(info["mlflow"]["complete"], info.get("tracking_problems"))
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            losses = [json.loads(line)["loss"] for line in f if '"kind":"train"' in line]
        check = f"""
import json, sys, mlflow
client = mlflow.MlflowClient("{self.uri}")
run = client.get_run("{info['mlflow']['run_id']}")
history = client.get_metric_history(run.info.run_id, "train/loss")
print(json.dumps({{"status": run.info.status, "name": run.info.run_name,
                   "experiment": client.get_experiment(run.info.experiment_id).name,
                   "lr": run.data.params.get("optim.lr"),
                   "layer": run.data.params.get("model.layers.1.features"),
                   "config_sha256": run.data.tags.get("config_sha256"),
                   "losses": [m.value for m in sorted(history, key=lambda m: m.step)],
                   "artifacts": sorted(a.path for a in client.list_artifacts(run.info.run_id))}}))
"""
        result = subprocess.run([TRACKING_PYTHON, "-c", check], capture_output=True, text=True,
                                timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        seen = json.loads(result.stdout)
        self.assertEqual(seen["status"], "FINISHED")
        self.assertEqual(seen["name"], info["run_id"])
        self.assertEqual(seen["experiment"], "cli-test")
        self.assertEqual(seen["lr"], "0.001")
        self.assertEqual(seen["layer"], "512")
        self.assertEqual(seen["config_sha256"], info["config_sha256"])
        self.assertEqual(len(seen["losses"]), len(losses))
        for a, b in zip(seen["losses"], losses):
            self.assertAlmostEqual(a, b, places=5)
        self.assertEqual(seen["artifacts"], ["config.toml", "metrics.jsonl", "report.html", "run.json"])

    def test_an_unreachable_server_costs_the_run_nothing_and_push_sends_it_later(self):
        runs = os.path.join(self.dir, "runs-down")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            down = f"http://127.0.0.1:{probe.getsockname()[1]}"
        result = run("train", MLP, *SMALL, "--set", f"experiment.runs_dir={runs}", "--set",
                     f"tracking.mlflow_uri={down}", "--set", "tracking.wait_seconds=1", "--quiet")
        self.assertIn("unreachable", result.stderr)
        self.assertIn("kiln runs push", result.stderr)
        (run_dir,) = glob.glob(os.path.join(runs, "fashion_mnist_mlp", "*"))
        with open(os.path.join(run_dir, "run.json")) as f:
            info = json.load(f)
        self.assertEqual(info["status"], "completed")
        self.assertFalse(info["mlflow"]["complete"])
        failed = run("runs", "push", run_dir, "--wait", "1", check=False)
        self.assertEqual(failed.returncode, 1)
        self.assertIn("unreachable", failed.stdout)
        pushed = run("runs", "push", run_dir, "--mlflow-uri", self.uri)
        self.assertIn("sent", pushed.stdout)
        with open(os.path.join(run_dir, "run.json")) as f:
            self.assertTrue(json.load(f)["mlflow"]["complete"])


class RunsCli(unittest.TestCase):
    """`kiln runs`: the catalog that several `kiln train` processes write at once."""

    @classmethod
    def setUpClass(cls):
        cls.runs = tempfile.mkdtemp(prefix="kiln-cli-catalog-")
        where = ["--set", f"experiment.runs_dir={cls.runs}"]
        # Three runs started together: their writes to runs/kiln.db interleave.
        processes = [subprocess.Popen([KILN, "train", MLP, *SMALL, *where, "--quiet", "--set",
                                       f"optim.lr={lr}"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for lr in ("0.001", "0.0003", "0.003")]
        cls.outputs = [p.communicate(timeout=300) for p in processes]
        cls.codes = [p.returncode for p in processes]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.runs, ignore_errors=True)

    def runs_command(self, *args, check=True):
        return run("runs", "--runs-dir", self.runs, *args, check=check)

    def test_concurrent_runs_are_all_listed_with_their_metrics(self):
        self.assertEqual(self.codes, [0, 0, 0], self.outputs)
        listed = json.loads(self.runs_command("list", "--json").stdout)
        self.assertEqual(len(listed), 3)
        for entry in listed:
            self.assertEqual(entry["status"], "completed")
            with open(os.path.join(entry["run_dir"], "metrics.jsonl")) as f:
                lines = [json.loads(line) for line in f]
            train_steps = sum(1 for line in lines if line["kind"] == "train")
            self.assertEqual(entry["metrics"]["train/loss"]["points"], train_steps)
            final_eval = [line for line in lines if line["kind"] == "eval"][-1]
            self.assertAlmostEqual(entry["metrics"]["eval/test_accuracy"]["final"]["value"],
                                   final_eval["test_accuracy"])
        table = self.runs_command("list").stdout
        self.assertIn("3 runs", table)
        filtered = json.loads(self.runs_command("list", "--json", "--filter",
                                                "param.optim.lr<0.001").stdout)
        self.assertEqual(len(filtered), 1)

    def test_show_and_compare(self):
        listed = json.loads(self.runs_command("list", "--json").stdout)
        a, b = listed[0]["run"], listed[1]["run"]
        shown = json.loads(self.runs_command("show", a, "--json").stdout)
        self.assertEqual(shown["run"], a)
        self.assertIn("optim.lr", shown["params"])
        self.assertEqual(shown["artifacts"][0]["name"], "params")
        self.assertIn("cpu", shown["environment"])
        self.assertIn("eval/test_accuracy", self.runs_command("show", a).stdout)
        compared = json.loads(self.runs_command("compare", a, b, "--json").stdout)
        self.assertEqual([d["key"] for d in compared["config"]], ["optim.lr"])
        self.assertEqual(compared["environment"], [])
        self.assertIn("best", compared["metrics"]["eval/test_accuracy"]["a"])
        self.assertIn("optim.lr", self.runs_command("compare", a, b).stdout)

    def test_bad_names_and_filters_are_clear_errors(self):
        result = self.runs_command("show", "nope", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("no run 'nope'", result.stderr)
        result = self.runs_command("show", "2", check=False)  # every run id starts with 2
        self.assertIn("names 3 runs", result.stderr)
        result = self.runs_command("list", "--filter", "colour=red", check=False)
        self.assertIn("unknown field 'colour'", result.stderr)
        result = run("runs", "--runs-dir", os.path.join(self.runs, "none"), "list", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("no run catalog at", result.stderr)

    def test_reindex_rebuilds_a_lost_catalog(self):
        before = json.loads(self.runs_command("list", "--json").stdout)
        copy = tempfile.mkdtemp(prefix="kiln-cli-reindex-")
        try:
            for name in os.listdir(self.runs):
                if not name.startswith("kiln.db"):
                    shutil.copytree(os.path.join(self.runs, name), os.path.join(copy, name))
            result = run("runs", "--runs-dir", copy, "reindex")
            self.assertIn("recorded 3 runs", result.stdout)
            after = json.loads(run("runs", "--runs-dir", copy, "list", "--json").stdout)
            self.assertEqual([r["run"] for r in after], [r["run"] for r in before])
            self.assertEqual([r["metrics"] for r in after], [r["metrics"] for r in before])
        finally:
            shutil.rmtree(copy, ignore_errors=True)


@unittest.skipUnless(can_mount_tmpfs(), "needs permission to mount a tmpfs (root)")
class FullDisk(unittest.TestCase):
    """`kiln train` with its runs on a tiny tmpfs: the failed write is named and the run's
    final state recorded whenever the disk allows."""

    def full_disk_run(self, size, *args):
        disk = tempfile.mkdtemp(prefix="kiln-full-disk-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", disk], check=True)
        try:
            result = run("train", MLP, *SMALL, "--set", f"experiment.runs_dir={disk}", *args,
                         check=False)
            runs = glob.glob(os.path.join(disk, "fashion_mnist_mlp", "*"))
            infos = []
            for run_dir in runs:
                self.assertEqual([n for n in os.listdir(run_dir) if ".tmp." in n], [])
                with open(os.path.join(run_dir, "run.json")) as f:
                    infos.append(json.load(f))
            return result, infos
        finally:
            subprocess.run(["umount", disk], check=True)
            os.rmdir(disk)

    def test_each_failed_write_is_named_and_recorded(self):
        # tmpfs gives a file 4 KiB pages. 4 KiB: room for run.json only; 24 KiB: config.toml
        # (3 pages), run.json and its replacement, one page of metrics, short of 12 epochs'
        # (about 17 KB); 1 MiB: not for the 2.7 MB of weights.
        for size, file, args in (("4k", "config.toml", ()),
                                 ("24k", "metrics.jsonl", ("--set", "train.epochs=12")),
                                 ("1m", "params.safetensors", ())):
            result, infos = self.full_disk_run(size, *args)
            self.assertEqual(result.returncode, 1, (size, result.stderr))
            self.assertIn(file, result.stderr, size)
            self.assertIn("No space left on device", result.stderr, size)
            self.assertNotIn(".run.json.tmp", result.stderr, size)
            self.assertEqual(len(infos), 1, size)
            self.assertEqual(infos[0]["status"], "failed", size)
            self.assertIn(file, infos[0]["error"], size)

    def test_a_disk_filling_up_during_savepoints_keeps_the_committed_ones(self):
        # 24 MiB: the run and two or so savepoints of the MLP (about 8 MB each, optimizer
        # state included) fit, the next does not.
        disk = tempfile.mkdtemp(prefix="kiln-full-disk-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", disk], check=True)
        try:
            result = run("train", MLP, *SMALL, "--set", f"experiment.runs_dir={disk}", "--set",
                         "train.savepoint_every=2", "--set", "train.savepoint_keep_last=100",
                         check=False)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn("could not be written (the earlier savepoints are intact)",
                          result.stderr)
            self.assertIn("No space left on device", result.stderr)
            (run_dir,) = glob.glob(os.path.join(disk, "fashion_mnist_mlp", "*"))
            with open(os.path.join(run_dir, "run.json")) as f:
                self.assertEqual(json.load(f)["status"], "failed")
            committed = glob.glob(os.path.join(run_dir, "savepoints", "step-*", "COMMITTED"))
            self.assertGreaterEqual(len(committed), 1)
            self.assertEqual([n for n in os.listdir(os.path.join(run_dir, "savepoints"))
                              if ".tmp" in n], [])
            checked = subprocess.run([sys.executable, os.path.join(TOOLS, "savepoint_check.py"),
                                      run_dir], capture_output=True, text=True)
            self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
        finally:
            subprocess.run(["umount", disk], check=True)
            os.rmdir(disk)


if __name__ == "__main__":
    unittest.main(verbosity=2)
