#!/usr/bin/env python3
"""Runs the `kiln` command as a user would and checks its output and exit codes.

Usage: test_cli.py PATH_TO_KILN
"""
import json
import os
import subprocess
import sys
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
