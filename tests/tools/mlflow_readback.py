#!/usr/bin/env python3
"""Reads a run back from an MLflow tracking server through MLflow's own Python client and
compares it with what kiln meant to send (tests/track/mlflow_test.cc). Run it with the
tracking peers' interpreter, .venv/tracking/bin/python.

usage: mlflow_readback.py EXPECTED.json

EXPECTED.json: {"tracking_uri", "experiment", "run_name", "status",
                "params": {key: value}, "tags": {key: value} (a subset of the run's tags:
                MLflow adds its own), "metrics": {key: [[step, value, timestamp_ms], ...]},
                "artifacts": {artifact path: text content}}

Exits 0 and prints a one-line summary when everything matches; otherwise prints every
mismatch and exits 1.
"""

import json
import math
import sys
import tempfile
from pathlib import Path

from mlflow.tracking import MlflowClient


def same_value(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def check_metrics(client, run, expected, problems):
    logged = set(run.data.metrics)
    if logged != set(expected):
        problems.append(f"metric keys: MLflow has {sorted(logged)}, expected {sorted(expected)}")
    for key, points in expected.items():
        history = client.get_metric_history(run.info.run_id, key)
        got = sorted((m.step, m.timestamp, m.value) for m in history)
        want = sorted((step, timestamp, value) for step, value, timestamp in points)
        if len(got) != len(want):
            problems.append(f"metric {key}: {len(got)} points in MLflow, expected {len(want)}")
            continue
        for g, w in zip(got, want):
            if g[:2] != w[:2] or not same_value(g[2], w[2]):
                problems.append(f"metric {key}: (step, timestamp, value) {g} in MLflow, "
                                f"expected {w}")
                break


def check_artifacts(client, run, expected, problems):
    with tempfile.TemporaryDirectory() as scratch:
        for path, content in expected.items():
            try:
                local = client.download_artifacts(run.info.run_id, path, scratch)
            except Exception as error:  # the client's errors have no common base
                problems.append(f"artifact {path}: cannot download: {error}")
                continue
            got = Path(local).read_text(encoding="utf-8")
            if got != content:
                problems.append(f"artifact {path}: content {got!r}, expected {content!r}")


def find_run(client, expected, problems):
    experiment = client.get_experiment_by_name(expected["experiment"])
    if experiment is None:
        problems.append(f"no experiment named {expected['experiment']!r}")
        return None
    name = expected["run_name"]
    runs = client.search_runs([experiment.experiment_id],
                              filter_string=f"attributes.run_name = '{name}'")
    if len(runs) != 1:
        problems.append(f"{len(runs)} runs named {name!r} in {expected['experiment']!r}, "
                        "expected 1")
        return None
    return runs[0]


def main():
    expected = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    client = MlflowClient(tracking_uri=expected["tracking_uri"])
    problems = []
    run = find_run(client, expected, problems)
    if run is not None:
        if run.info.status != expected["status"]:
            problems.append(f"status {run.info.status}, expected {expected['status']}")
        if run.data.params != expected["params"]:
            problems.append(f"params {run.data.params}, expected {expected['params']}")
        for key, value in expected["tags"].items():
            if run.data.tags.get(key) != value:
                problems.append(f"tag {key}: {run.data.tags.get(key)!r}, expected {value!r}")
        check_metrics(client, run, expected["metrics"], problems)
        check_artifacts(client, run, expected["artifacts"], problems)
    if problems:
        print("MLflow's client reads back something else:", file=sys.stderr)
        for problem in problems:
            print("  " + problem, file=sys.stderr)
        return 1
    points = sum(len(p) for p in expected["metrics"].values())
    print(f"ok: run {run.info.run_id} {run.info.status}, {len(expected['params'])} params, "
          f"{points} metric points, {len(expected['artifacts'])} artifacts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
