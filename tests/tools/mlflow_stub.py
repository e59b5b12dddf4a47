#!/usr/bin/env python3
"""A stand-in for an MLflow tracking server, for kiln's MLflow mirror tests
(tests/track/mlflow_test.cc). Standard library only, so it runs with /usr/bin/python3.

It binds a free port on 127.0.0.1, writes the port to --port-file once it listens (the
test waits for that file), and appends every request it gets to --record as one JSON line:
{"method", "path", "query", "json" (a POST's body), "data" (a PUT's body), "status" (what it
answered)}. The line is written before the answer goes out, so a client that has its answer
can rely on the record.

Modes:
  ok         answers the calls kiln makes as MLflow would, minimally
  slow       like ok, after sleeping --sleep seconds on every request
  error5xx   answers 503 to the first --fail-first requests to each path, then like ok
  notmlflow  answers 404 with an HTML page to everything, as a web server that is not
             MLflow would
"""

import argparse
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

API = "/api/2.0/mlflow/"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts/"


class Stub:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.experiments = {}  # name -> id
        self.runs = {}  # run id -> run info
        self.failures = {}  # path -> 503s answered so far

    def record(self, entry):
        with self.lock, open(self.args.record, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")

    def should_fail(self, path):
        if self.args.mode != "error5xx":
            return False
        with self.lock:
            done = self.failures.get(path, 0)
            if done >= self.args.fail_first:
                return False
            self.failures[path] = done + 1
            return True

    def answer(self, method, path, query, body):
        """(status, content type, payload) for one request in ok mode."""
        if path == "/health":
            return 200, "text/plain", b"OK"
        if method == "PUT" and path.startswith(ARTIFACTS):
            return 200, "application/json", b"{}"
        if not path.startswith(API):
            return self.error(404, "ENDPOINT_NOT_FOUND", f"no endpoint {path}")
        call = path[len(API):]
        with self.lock:
            return self.call(method, call, query, body)

    def call(self, method, call, query, body):
        if method == "GET" and call == "experiments/get-by-name":
            name = query.get("experiment_name", "")
            if name not in self.experiments:
                return self.error(404, "RESOURCE_DOES_NOT_EXIST", f"no experiment {name!r}")
            return self.ok({"experiment": self.experiment(name)})
        if method == "POST" and call == "experiments/create":
            name = body["name"]
            if name in self.experiments:
                return self.error(400, "RESOURCE_ALREADY_EXISTS", f"{name!r} exists")
            self.experiments[name] = str(len(self.experiments) + 1)
            return self.ok({"experiment_id": self.experiments[name]})
        if method == "POST" and call == "runs/create":
            run_id = uuid.uuid4().hex
            experiment_id = body["experiment_id"]
            self.runs[run_id] = {
                "run_id": run_id,
                "run_uuid": run_id,
                "experiment_id": experiment_id,
                "run_name": body.get("run_name", ""),
                "status": "RUNNING",
                "start_time": body.get("start_time", 0),
                "artifact_uri": f"mlflow-artifacts:/{experiment_id}/{run_id}/artifacts",
                "lifecycle_stage": "active",
            }
            return self.ok({"run": {"info": self.runs[run_id], "data": {}}})
        if method == "GET" and call == "runs/get":
            info = self.runs.get(query.get("run_id", ""))
            if info is None:
                return self.error(404, "RESOURCE_DOES_NOT_EXIST", "no such run")
            return self.ok({"run": {"info": info, "data": {}}})
        if method == "POST" and call == "runs/log-batch":
            if body.get("run_id") not in self.runs:
                return self.error(404, "RESOURCE_DOES_NOT_EXIST", "no such run")
            return self.ok({})
        if method == "POST" and call == "runs/update":
            info = self.runs.get(body.get("run_id"))
            if info is None:
                return self.error(404, "RESOURCE_DOES_NOT_EXIST", "no such run")
            info["status"] = body["status"]
            if "end_time" in body:
                info["end_time"] = body["end_time"]
            return self.ok({"run_info": info})
        return self.error(404, "ENDPOINT_NOT_FOUND", f"no endpoint {call}")

    def experiment(self, name):
        experiment_id = self.experiments[name]
        return {
            "experiment_id": experiment_id,
            "name": name,
            "artifact_location": f"mlflow-artifacts:/{experiment_id}",
            "lifecycle_stage": "active",
        }

    @staticmethod
    def ok(payload):
        return 200, "application/json", json.dumps(payload).encode()

    @staticmethod
    def error(status, code, message):
        payload = {"error_code": code, "message": message}
        return status, "application/json", json.dumps(payload).encode()


def make_handler(stub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as MLflow's server does

        def log_message(self, *args):
            pass

        def handle_any(self, method):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            entry = {"method": method, "path": parts.path, "query": query}
            body = None
            if method == "POST":
                body = json.loads(raw or b"{}")
                entry["json"] = body
            elif method == "PUT":
                entry["data"] = raw.decode("utf-8", "replace")
            if stub.args.mode == "slow":
                time.sleep(stub.args.sleep)
            if stub.args.mode == "notmlflow":
                status, kind = 404, "text/html"
                payload = b"<html><body><h1>404 Not Found</h1></body></html>"
            elif stub.should_fail(parts.path):
                status, kind, payload = 503, "text/plain", b"Service Unavailable"
            else:
                status, kind, payload = stub.answer(method, parts.path, query, body)
            entry["status"] = status
            stub.record(entry)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):
            self.handle_any("GET")

        def do_POST(self):
            self.handle_any("POST")

        def do_PUT(self):
            self.handle_any("PUT")

    return Handler


def exit_with_parent():
    """Ends the stub when the test that started it is gone (a crashed test cannot stop it)."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["ok", "slow", "error5xx", "notmlflow"], default="ok")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--sleep", type=float, default=30.0)
    parser.add_argument("--fail-first", type=int, default=2)
    args = parser.parse_args()

    threading.Thread(target=exit_with_parent, daemon=True).start()
    stub = Stub(args)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(stub))
    server.daemon_threads = True
    temporary = args.port_file + ".tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(str(server.server_address[1]))
    os.replace(temporary, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
