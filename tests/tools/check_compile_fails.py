#!/usr/bin/env python3
"""Checks that misuse of kiln's templates fails to compile with a clear message.

Each file in the given directory starts with a line `// expect: <text>`; compiling it must
fail and the compiler's output must contain <text>. Usage:
    check_compile_fails.py <compiler> <directory> <include dir>...
"""
import pathlib
import subprocess
import sys


def main() -> int:
    compiler, directory, *includes = sys.argv[1:]
    failures = 0
    files = sorted(pathlib.Path(directory).glob("*.cc"))
    if not files:
        print(f"no test files in {directory}")
        return 1
    for path in files:
        first = path.read_text().splitlines()[0]
        if not first.startswith("// expect: "):
            print(f"{path.name}: first line must be '// expect: <text>'")
            failures += 1
            continue
        expected = first[len("// expect: "):]
        command = [compiler, "-std=c++20", "-fsyntax-only", *(f"-I{d}" for d in includes), str(path)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode == 0:
            print(f"FAIL {path.name}: compiled, but should not")
            failures += 1
        elif expected not in result.stderr:
            print(f"FAIL {path.name}: the compiler's errors do not say '{expected}':")
            print(result.stderr[:4000])
            failures += 1
        else:
            print(f"ok   {path.name}: {expected}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
