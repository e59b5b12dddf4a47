#!/usr/bin/python3
"""Opens a `kiln report` HTML file in headless Chromium and checks that it renders.

Usage: report_in_chromium.py REPORT.html --screenshot OUT.png [--plots a,b,...] [--self-test]

It fails (exit 1, saying why) when the page
  - throws an uncaught exception, logs a console error or a browser error (Log domain),
  - requests anything but the file itself (the report must be self-contained),
  - lacks one of the expected <svg data-plot="..."> charts, or one of them has no data
    marks (path.series, rect.bar, circle.point) in the DOM, or none that the browser drew
    with a size (SVGGraphicsElement.getBBox),
and saves a screenshot of the page at 1200x3000 either way.

The browser is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: the
browser reads commands on fd 3 and writes answers and events on fd 4), so console messages
and exceptions arrive as structured events (Runtime.exceptionThrown,
Runtime.consoleAPICalled, Log.entryAdded) rather than being scraped from log text, and one
browser start gives the events, the DOM and the screenshot. --self-test first checks that
detection: a copy of the report with a thrown error, a console.error and an external image
appended must fail with each of the three reasons.

Chromium is the Debian package `chromium` (scripts/setup installs it); without it this
fails, naming scripts/setup. Standard library only.
"""
import argparse
import base64
import html.parser
import json
import os
import pathlib
import select
import shutil
import subprocess
import sys
import tempfile
import time

DEFAULT_PLOTS = ["train_loss", "accuracy", "eval_loss", "learning_rate", "step_time",
                 "time_breakdown"]
MARK_CLASSES = {"series", "bar", "point"}
WIDTH, HEIGHT = 1200, 3000
TIMEOUT_S = 45


class PageError(Exception):
    pass


def chromium_binary():
    found = os.environ.get("KILN_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")
    if not found:
        raise PageError("chromium is not installed: run scripts/setup (it installs the Debian "
                        "package chromium)")
    return found


class DevTools:
    """A Chromium process and the DevTools protocol over its pipe."""

    def __init__(self, profile_dir, log):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def child_fds():
            # dup first: a pipe end may already be numbered 3 or 4.
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        args = [chromium_binary(), "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--hide-scrollbars", "--mute-audio",
                # A request the report makes is reported (Network.requestWillBeSent) and then
                # fails at once at this closed port, instead of leaving the machine or
                # waiting on a connection timeout.
                "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
                f"--user-data-dir={profile_dir}", f"--window-size={WIDTH},{HEIGHT}",
                "about:blank"]
        # close_fds would close 3 and 4 after child_fds ran; every other descriptor of this
        # process is close-on-exec anyway (Python's default).
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        preexec_fn=child_fds, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.deadline = time.monotonic() + TIMEOUT_S

    def close(self):
        try:
            self.send("Browser.close")
        except (PageError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)

    def _read_message(self, until):
        while b"\0" not in self.buffer:
            left = until - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise PageError(f"chromium exited (status {self.process.poll()}) before answering")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        command = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self.to_browser, json.dumps(command).encode() + b"\0")
        while True:
            message = self._read_message(self.deadline)
            if message is None:
                raise PageError(f"no answer from chromium to {method} within {TIMEOUT_S} s")
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise PageError(f"{method} failed: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method, seconds):
        until = min(self.deadline, time.monotonic() + seconds)
        if any(event.get("method") == method for event in self.events):
            return True
        while (message := self._read_message(until)) is not None:
            self.events.append(message)
            if message.get("method") == method:
                return True
        return False

    def drain(self, seconds):
        until = time.monotonic() + seconds
        while (message := self._read_message(until)) is not None:
            self.events.append(message)


# Runs in the page: each plot's size and how many of its marks the browser drew.
GEOMETRY = """(() => {
  const plots = {};
  for (const svg of document.querySelectorAll('svg[data-plot]')) {
    const box = svg.getBoundingClientRect();
    const marks = [...svg.querySelectorAll('.series, .bar, .point')];
    const drawn = marks.filter(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0; });
    (plots[svg.dataset.plot] = plots[svg.dataset.plot] || []).push(
        {width: box.width, height: box.height, marks: marks.length, drawn: drawn.length});
  }
  return plots;
})()"""


def page_problems(events, report_url):
    problems = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            problems.append(f"uncaught exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(arg.get("value", arg.get("description", "")))
                            for arg in params.get("args", []))
            problems.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            problems.append(f"browser error ({entry.get('source')}): {entry.get('text')}")
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if url != report_url and not url.startswith("data:"):
                problems.append(f"the report fetches {url} (it must be self-contained)")
    return problems


class Marks(html.parser.HTMLParser):
    """Counts the data marks inside each <svg data-plot> of a DOM dump."""

    def __init__(self):
        super().__init__()
        self.plots = {}
        self.current = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg" and "data-plot" in attrs:
            self.current = attrs["data-plot"]
            self.plots.setdefault(self.current, []).append(0)
        elif self.current and MARK_CLASSES & set((attrs.get("class") or "").split()):
            self.plots[self.current][-1] += 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "svg":
            self.current = None


def plot_problems(dom, geometry, plots):
    marks = Marks()
    marks.feed(dom)
    problems = []
    for name in plots:
        if name not in marks.plots:
            problems.append(f'no <svg data-plot="{name}"> in the page')
            continue
        for index, count in enumerate(marks.plots[name]):
            drawn = geometry.get(name, [])[index] if index < len(geometry.get(name, [])) else {}
            if count == 0:
                problems.append(f"plot {name} has no data marks")
            elif drawn.get("width", 0) <= 0 or drawn.get("drawn", 0) == 0:
                problems.append(f"plot {name} has {count} marks but the browser drew none: {drawn}")
    return problems


def check(report, screenshot, plots):
    """Problems found in `report` (empty: it renders cleanly); saves the screenshot."""
    report = pathlib.Path(report).resolve()
    url = report.as_uri()
    with tempfile.TemporaryDirectory(prefix="kiln-chromium-") as profile:
        log_path = pathlib.Path(profile) / "chromium.log"
        with open(log_path, "wb") as log:
            browser = DevTools(pathlib.Path(profile) / "profile", log)
            try:
                target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
                session = browser.send("Target.attachToTarget",
                                       {"targetId": target, "flatten": True})["sessionId"]
                for domain in ("Runtime", "Log", "Page", "Network"):
                    browser.send(f"{domain}.enable", session=session)
                browser.send("Emulation.setDeviceMetricsOverride",
                             {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                              "mobile": False}, session=session)
                browser.send("Page.navigate", {"url": url}, session=session)
                if not browser.wait_for("Page.loadEventFired", TIMEOUT_S):
                    raise PageError(f"{url} did not finish loading")
                browser.drain(0.3)  # errors of timers that fire right after load
                geometry = browser.send("Runtime.evaluate",
                                        {"expression": GEOMETRY, "returnByValue": True},
                                        session=session)["result"]["value"]
                root = browser.send("DOM.getDocument", {"depth": 0}, session=session)["root"]
                dom = browser.send("DOM.getOuterHTML", {"nodeId": root["nodeId"]},
                                   session=session)["outerHTML"]
                shot = browser.send("Page.captureScreenshot", {"format": "png"}, session=session)
                pathlib.Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
                pathlib.Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
            except PageError as error:
                log_text = log_path.read_text(errors="replace")[-3000:]
                raise PageError(f"{error}\nchromium's log:\n{log_text}")
            finally:
                browser.close()
    return page_problems(browser.events, url) + plot_problems(dom, geometry, plots)


# Appended together to a copy of the report, each must be reported, for its own reason (the
# exception does not stop the later script or the image).
BROKEN = [
    ("<script>throw new Error('x')</script>", "uncaught exception: Error: x"),
    ("<script>console.error('logged')</script>", "console.error: logged"),
    ('<img src="http://192.0.2.1/pixel.png" alt="">', "the report fetches http://192.0.2.1"),
]


def self_test(report, plots):
    """Checks that check() catches what it is meant to catch, on a broken copy of `report`."""
    text = pathlib.Path(report).read_text()
    additions = "\n".join(addition for addition, _ in BROKEN)
    with tempfile.TemporaryDirectory(prefix="kiln-report-broken-") as scratch:
        broken = pathlib.Path(scratch) / "broken.html"
        broken.write_text(text.replace("</body>", additions + "\n</body>"))
        problems = check(broken, pathlib.Path(scratch) / "broken.png", plots)
    for addition, expected in BROKEN:
        if not any(expected in problem for problem in problems):
            raise PageError(f"self-test: a report with {addition} was not caught "
                            f"(expected '{expected}', found {problems})")
        print(f"self-test: {addition} -> caught: {expected}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--screenshot", required=True, help="where to save the PNG")
    parser.add_argument("--plots", default=",".join(DEFAULT_PLOTS),
                        help="the data-plot names that must be drawn (comma-separated)")
    parser.add_argument("--self-test", action="store_true",
                        help="first check that broken copies of the report fail")
    args = parser.parse_args()
    plots = [name for name in args.plots.split(",") if name]
    try:
        if args.self_test:
            self_test(args.report, plots)
        problems = check(args.report, args.screenshot, plots)
    except PageError as error:
        print(f"FAIL: {error}", file=sys.stderr)
        return 1
    if problems:
        print(f"FAIL: {args.report} (screenshot {args.screenshot}):", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(f"ok: {args.report} renders {len(plots)} plots without errors; "
          f"screenshot {args.screenshot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
