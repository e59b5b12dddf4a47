#!/usr/bin/python3
"""`kiln report` end to end: trains two tiny runs with the built kiln, reports one run and the
two overlaid, and renders both reports in headless Chromium (report_in_chromium.py, whose
self-test first shows that a broken report fails). The screenshots stay in ARTIFACT_DIR.

Usage: report_end_to_end.py PATH_TO_KILN ARTIFACT_DIR
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLE = HERE.parent.parent / "examples" / "fashion_mnist_mlp.toml"
CHECKER = HERE / "report_in_chromium.py"
PLOTS = "train_loss,accuracy,eval_loss,learning_rate,step_time,time_breakdown,roofline,memory"


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, args))} exited {result.returncode}:\n"
                 f"{result.stdout}{result.stderr}")
    return result.stdout


def train(kiln, runs_dir, *overrides):
    run(kiln, "train", EXAMPLE, "--quiet", "--set", "train.epochs=2",
        "--set", "data.train_limit=1024", "--set", "data.test_limit=1000",
        "--set", f"experiment.runs_dir={runs_dir}", "--set", "tracking.tensorboard=false",
        *[item for override in overrides for item in ("--set", override)])
    experiment = pathlib.Path(runs_dir) / "fashion_mnist_mlp"
    return sorted(experiment.iterdir(), key=lambda p: p.stat().st_mtime)[-1]


def main():
    kiln, artifacts = sys.argv[1], pathlib.Path(sys.argv[2])
    if not (os.environ.get("KILN_CHROMIUM") or shutil.which("chromium")):
        sys.exit("FAIL: chromium is not installed: run scripts/setup (it installs the Debian "
                 "package chromium, which this test renders the report in)")
    artifacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kiln-report-") as scratch:
        runs_dir = pathlib.Path(scratch) / "runs"
        first = train(kiln, runs_dir)
        second = train(kiln, runs_dir, "experiment.seed=1", "optim.lr=0.003")

        written = run(kiln, "report", first).strip()
        if pathlib.Path(written) != first / "report.html" or not pathlib.Path(written).is_file():
            sys.exit(f"FAIL: kiln report {first} printed '{written}', not {first}/report.html")
        again = pathlib.Path(scratch) / "again.html"
        run(kiln, "report", first, "-o", again)
        if again.read_bytes() != pathlib.Path(written).read_bytes():
            sys.exit("FAIL: two reports of the same run differ")
        two = pathlib.Path(scratch) / "two.html"
        run(kiln, "report", first, second, "--output", two)

        print(run(sys.executable, CHECKER, written, "--self-test", "--plots", PLOTS,
                  "--screenshot", artifacts / "report.png"), end="")
        print(run(sys.executable, CHECKER, two, "--plots", PLOTS + ",final_accuracy",
                  "--screenshot", artifacts / "report-two-runs.png"), end="")
        shutil.copy(two, artifacts / "report-two-runs.html")
        shutil.copy(written, artifacts / "report.html")
    print(f"ok: reports render in chromium; screenshots in {artifacts}")


if __name__ == "__main__":
    main()
