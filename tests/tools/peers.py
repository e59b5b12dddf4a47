"""What the peer checks share: running under the pinned peers' environment (.venv/peers,
created by scripts/setup from requirements/peers.txt) and checking the pinned versions.
A missing environment, package or version is an error naming scripts/setup (exit 2)."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PEERS_PYTHON = ROOT / ".venv" / "peers" / "bin" / "python"
REQUIREMENTS = ROOT / "requirements" / "peers.txt"


def fail(tool, message):
    print(f"{tool}: {message}", file=sys.stderr)
    sys.exit(2)


def enter(tool):
    """Runs the calling script again under the peers' Python unless it already runs there."""
    if pathlib.Path(sys.prefix).resolve() == PEERS_PYTHON.parents[1].resolve():
        return
    if not PEERS_PYTHON.exists():
        fail(tool, f"the peers' environment {PEERS_PYTHON.parents[1]} does not exist; run "
                   "scripts/setup, which creates it from requirements/peers.txt")
    os.execv(PEERS_PYTHON, [str(PEERS_PYTHON), *sys.argv])


def pinned(package):
    for line in REQUIREMENTS.read_text().splitlines():
        name, _, version = line.partition("==")
        if name.strip().lower() == package:
            return version.strip()
    return None


def require(tool, versions):
    """versions: package -> the version found; each must be the pinned one."""
    for package, found in versions.items():
        if found != pinned(package):
            fail(tool, f"{package} {found} found, but requirements/peers.txt pins "
                       f"{pinned(package)}; run scripts/setup to reinstall the pinned peers")
