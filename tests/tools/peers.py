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


CACHE_BOUND = 512 << 20  # bytes of compiled programs kept per check
CACHE_PRUNED = 256 << 20  # what is left after pruning


def keep_compilations(tool):
    """Lets JAX keep what XLA compiles between runs (its persistent compilation cache).

    The checks compile a few hundred small programs, most of their time; the cache keys
    each by the program, the JAX and XLA versions and the flags, so a run compiles only the
    programs that changed, and every result is still computed in the run. Each check has a
    folder of its own ($KILN_JAX_CACHE, else ~/.cache/kiln/jax-compilations, then the
    check's name), shared by the checkouts of the machine: the checks run side by side, and
    JAX writes an entry in place, so two of them must not share one. JAX's own bound on the
    size takes a lock and lists the folder at every entry it writes (a cold run took twice
    as long), so the bound is kept here instead: over CACHE_BOUND at the start of a run, the
    oldest entries go until CACHE_PRUNED is left."""
    root = os.environ.get("KILN_JAX_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kiln",
        "jax-compilations")
    folder = pathlib.Path(root) / pathlib.Path(tool).stem
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") != str(folder):
        prune(folder)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(folder)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")


def prune(folder):
    try:
        entries = [(entry.stat().st_mtime, entry.stat().st_size, entry.path)
                   for entry in os.scandir(folder) if entry.is_file()]
    except FileNotFoundError:
        return
    total = sum(size for _, size, _ in entries)
    if total <= CACHE_BOUND:
        return
    for _, size, path in sorted(entries):
        if total <= CACHE_PRUNED:
            break
        os.remove(path)
        total -= size


def enter(tool):
    """Runs the calling script again under the peers' Python unless it already runs there."""
    keep_compilations(tool)
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
