#!/usr/bin/env python3
"""Reads a kiln TensorBoard event file back with TensorBoard's own reader and compares it with
what kiln says it wrote. Used by tests/track/tensorboard_test.cc (TensorBoard.RealReader*).

  .venv/tracking/bin/python tests/tools/tensorboard_readback.py EVENT_FILE EXPECTED_JSON

EXPECTED_JSON: {"scalars": [{"tag": str, "step": int, "value": str, "wall_time": float}, ...]}
in the order written; values are strings so that "nan", "inf" and "-inf" survive JSON.

Two readers: the raw record loader (TFRecord framing and CRCs, the Event fields as stored)
and EventAccumulator (what the scalars dashboard shows, after TensorBoard migrates the
legacy simple_value form). Exit 0 when both agree with EXPECTED_JSON, 1 with one line per
mismatch, 2 when the tracking environment is missing (scripts/setup creates it).
"""
import json
import math
import pathlib
import struct
import sys

TOOL = "tensorboard_readback"
ROOT = pathlib.Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements" / "tracking.txt"

try:
    import tensorboard
    from tensorboard.backend.event_processing import event_accumulator, event_file_loader
except ImportError as error:
    print(f"{TOOL}: cannot import tensorboard ({error}); run it with .venv/tracking/bin/python, "
          "which scripts/setup creates from requirements/tracking.txt", file=sys.stderr)
    sys.exit(2)


def pinned_tensorboard():
    for line in REQUIREMENTS.read_text().splitlines():
        name, _, version = line.partition("==")
        if name.strip().lower() == "tensorboard":
            return version.strip()
    return None


def as_float32(text):
    """The float kiln wrote, as TensorBoard returns it (a float32 widened to a double)."""
    return struct.unpack("<f", struct.pack("<f", float(text)))[0]


def same_value(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def check_raw_records(path, expected, problems):
    events = list(event_file_loader.LegacyEventFileLoader(str(path)).Load())
    # The loader stops quietly at a bad CRC or a truncated record, so a short count is how a
    # framing error shows.
    if len(events) != len(expected) + 1:
        problems.append(f"TensorBoard's record reader read {len(events)} records, expected "
                        f"{len(expected) + 1} (the file version and {len(expected)} scalars): "
                        "a bad CRC or a truncated record stops it")
    if events and events[0].file_version != "brain.Event:2":
        problems.append(f"the first record's file_version is {events[0].file_version!r}, "
                        "expected 'brain.Event:2'")
    if events and events[0].wall_time <= 0:
        problems.append(f"the first record's wall_time is {events[0].wall_time}")
    for index, (event, want) in enumerate(zip(events[1:], expected), start=1):
        values = event.summary.value
        if len(values) != 1 or values[0].WhichOneof("value") != "simple_value":
            problems.append(f"record {index}: expected one simple_value, found {event.summary}")
            continue
        got = (values[0].tag, event.step, values[0].simple_value, event.wall_time)
        wanted = (want["tag"], want["step"], as_float32(want["value"]), want["wall_time"])
        if got[:2] != wanted[:2] or not same_value(got[2], wanted[2]) or got[3] != wanted[3]:
            problems.append(f"record {index}: (tag, step, value, wall_time) is {got}, "
                            f"expected {wanted}")


def check_dashboard_scalars(directory, expected, problems):
    # size_guidance 0 keeps every scalar: the default samples 10,000 per tag.
    accumulator = event_accumulator.EventAccumulator(
        str(directory), size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    tags = sorted({want["tag"] for want in expected})
    found_tags = sorted(accumulator.Tags()[event_accumulator.SCALARS])
    if found_tags != tags:
        problems.append(f"EventAccumulator's scalar tags are {found_tags}, expected {tags}")
        return
    for tag in tags:
        got = [(s.step, s.value, s.wall_time) for s in accumulator.Scalars(tag)]
        wanted = [(w["step"], as_float32(w["value"]), w["wall_time"])
                  for w in expected if w["tag"] == tag]
        if len(got) != len(wanted) or not all(
                g[0] == w[0] and same_value(g[1], w[1]) and g[2] == w[2]
                for g, w in zip(got, wanted)):
            problems.append(f"EventAccumulator's {tag}: (step, value, wall_time) are {got}, "
                            f"expected {wanted}")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if tensorboard.__version__ != pinned_tensorboard():
        print(f"{TOOL}: tensorboard {tensorboard.__version__} found, but "
              f"requirements/tracking.txt pins {pinned_tensorboard()}; run scripts/setup",
              file=sys.stderr)
        sys.exit(2)
    path = pathlib.Path(sys.argv[1])
    expected = json.loads(pathlib.Path(sys.argv[2]).read_text())["scalars"]
    if "tfevents" not in path.name:
        print(f"{TOOL}: {path.name} lacks 'tfevents', so TensorBoard would not find it",
              file=sys.stderr)
        sys.exit(1)
    problems = []
    check_raw_records(path, expected, problems)
    check_dashboard_scalars(path.parent, expected, problems)
    for problem in problems:
        print(f"{TOOL}: {path}: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"{TOOL}: {len(expected)} scalars read back as written")


if __name__ == "__main__":
    main()
