#!/usr/bin/env python3
"""Runs scripts/check_layers on the repository (it must pass) and on small made-up trees
(an upward include, a public header including src/ or another library's header, a folder
missing from the table: each must fail and name the file and line)."""
import atexit
import pathlib
import shutil
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check_layers"
TABLE = """# arch
## Layers
| folder | what |
|---|---|
| `src/base/` | errors |
| `src/ops/` | ops |
| `src/kernels/` | shared kernel helpers |
| `src/kernels/ref/` | reference kernels |
## Next
"""


def run(root):
    result = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                            text=True)
    return result.returncode, result.stdout + result.stderr


def tree(files):
    root = pathlib.Path(tempfile.mkdtemp(prefix="kiln-layers-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    (root / "docs").mkdir()
    (root / "docs" / "architecture.md").write_text(TABLE)
    (root / "include" / "kiln").mkdir(parents=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def expect(condition, message):
    if not condition:
        print("FAIL:", message)
        sys.exit(1)


code, out = run(SCRIPT.parents[1])
expect(code == 0, f"the repository breaks its own layers:\n{out}")

clean = tree({"src/base/a.h": "#pragma once\n", "src/ops/b.cc": '#include "base/a.h"\n',
              "src/kernels/ref/k.cc": '#include "kernels/shared.h"\n#include "ops/b.h"\n',
              "src/kernels/shared.h": "#pragma once\n", "src/ops/b.h": "\n"})
code, out = run(clean)
expect(code == 0, f"a tree that keeps its layers was refused:\n{out}")

upward = tree({"src/base/a.cc": '#include <vector>\n#include "ops/b.h"\n', "src/ops/b.h": "\n"})
code, out = run(upward)
expect(code == 1 and 'src/base/a.cc:2: layer base includes "ops/b.h" of layer ops' in out,
       f"an upward include was not reported:\n{out}")

nested = tree({"src/kernels/shared.h": '#include "kernels/ref/k.h"\n',
               "src/kernels/ref/k.h": "\n"})
code, out = run(nested)
expect(code == 1 and "layer kernels includes \"kernels/ref/k.h\" of layer kernels/ref" in out,
       f"an include of a nested later layer was not reported:\n{out}")

public = tree({"include/kiln/x.h": '#include "base/a.h"\n', "src/base/a.h": "\n"})
code, out = run(public)
expect(code == 1 and "include/kiln/x.h:1: a public header includes" in out,
       f"a public header including src/ was not reported:\n{out}")

third_party = tree({"include/kiln/y.h": "#include <vector>\n#include <kiln/x.h>\n"
                                         "#include <fmt/format.h>\n",
                     "include/kiln/x.h": "\n"})
code, out = run(third_party)
expect(code == 1 and "include/kiln/y.h:3: a public header includes <fmt/format.h>" in out
       and "y.h:1" not in out and "y.h:2" not in out,
       f"a public header including another library's header was not reported alone:\n{out}")

unlisted = tree({"src/extra/e.cc": "\n"})
code, out = run(unlisted)
expect(code == 1 and "src/extra/: a folder that the layer table does not list" in out,
       f"a folder missing from the table was not reported:\n{out}")
print("check_layers_test: 7 passed, 0 failed")
