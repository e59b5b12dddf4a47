#!/usr/bin/env python3
"""`kiln export --onnx` checked in ONNX Runtime (the pinned onnxruntime of
requirements/peers.txt), in two parts:

1. The translation table: onnx_cases writes one small model per case (every translated
   primitive, with the shapes and edge cases that change its translation) with an input
   and kiln's own output; each runs in ONNX Runtime and must give kiln's output within
   the tolerance below (integers and booleans exactly, NaN where kiln has NaN).
2. Whole models as a user exports them: three small runs (a CNN with batch norm, pooling
   and dropout; an MLP with layer and RMS norms and smooth activations; a 2-layer GPT-2 on
   bytes of text) are trained and exported with --onnx by the kiln command; ONNX Runtime
   runs model.onnx on the whole Fashion-MNIST test set (10,000 images, preprocessed as
   manifest.json says) or on the text's last contexts, in batches of the signature's size
   (the last one padded), and must give `kiln predict`'s logits within the tolerance and
   the same predicted class for every prediction.

  onnx_runtime_check.py KILN ONNX_CASES WORKDIR
"""
import gzip
import json
import pathlib
import shutil
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import peers  # noqa: E402

TOOL = "onnx_runtime_check"
# |onnx - kiln| <= ATOL + RTOL * |kiln|: the two sum products and evaluate transcendental
# functions in different orders and with different polynomials, in f32.
ATOL = 1e-5
RTOL = 1e-4
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")
TEXT = pathlib.Path(__file__).resolve().parents[3] / "data" / "kjv.txt"

# The [data] and model sections of each exported model.
IMAGES = """
[data]
dataset = "fashion_mnist"
dir = "{fashion}"
train_limit = 1024
test_limit = 500
"""
MODELS = {
    "cnn": IMAGES + """
[[model.layers]]
type = "conv2d"
features = 8
kernel_size = [3, 3]
padding = "same"
[[model.layers]]
type = "batch_norm"
[[model.layers]]
type = "relu"
[[model.layers]]
type = "max_pool"
window = [2, 2]
[[model.layers]]
type = "conv2d"
features = 8
kernel_size = [3, 3]
strides = [2, 2]
[[model.layers]]
type = "avg_pool"
window = [2, 2]
padding = "same"
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dropout"
rate = 0.3
[[model.layers]]
type = "dense"
features = 10
""",
    "mlp": IMAGES + """
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dense"
features = 32
[[model.layers]]
type = "layer_norm"
[[model.layers]]
type = "gelu"
[[model.layers]]
type = "dense"
features = 32
[[model.layers]]
type = "rms_norm"
[[model.layers]]
type = "silu"
[[model.layers]]
type = "dense"
features = 16
[[model.layers]]
type = "gelu_tanh"
[[model.layers]]
type = "dense"
features = 16
[[model.layers]]
type = "elu"
[[model.layers]]
type = "dense"
features = 16
[[model.layers]]
type = "softplus"
[[model.layers]]
type = "dense"
features = 10
""",
    # A small GPT-2 on bytes of the King James Bible (data/kjv.txt, written by
    # scripts/setup): embeddings (gather), causal attention, layer norms, GELU.
    "gpt2": """
[data]
dataset = "text"
train_file = "{text}"
context = 32
test_fraction = 0.05
test_limit = 128
[model]
kind = "gpt2"
[model.gpt2]
layers = 2
heads = 2
channels = 32
vocab_size = 256
max_context = 32
""",
}

CONFIG = """
[experiment]
name = "onnx_{name}"
seed = 5
runs_dir = "{runs}"
{sections}
[optim]
name = "adamw"
lr = 1e-3
[train]
epochs = 1
batch_size = 32
eval_batch_size = 64
max_steps = 30
"""


def fail(message):
    print(f"{TOOL}: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def compare(np, what, expected, actual):
    """None if `actual` is `expected` within the tolerance, else why not."""
    if actual.shape != expected.shape:
        return f"{what}: shape {actual.shape}, kiln's is {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"{what}: dtype {actual.dtype}, kiln's is {expected.dtype}"
    if expected.dtype.kind not in "fc":
        bad = np.flatnonzero(actual.reshape(-1) != expected.reshape(-1))
        if bad.size:
            i = bad[0]
            return (f"{what}: {bad.size} elements differ, first at {i}: "
                    f"{actual.reshape(-1)[i]} vs kiln's {expected.reshape(-1)[i]}")
        return None
    e = expected.astype(np.float64).reshape(-1)
    a = actual.astype(np.float64).reshape(-1)
    nan_e, nan_a = np.isnan(e), np.isnan(a)
    if (nan_e != nan_a).any():
        i = np.flatnonzero(nan_e != nan_a)[0]
        return f"{what}: NaN differs at {i}: {a[i]} vs kiln's {e[i]}"
    ok = ~nan_e
    with np.errstate(invalid="ignore"):
        same_inf = np.isinf(e) & (a == e)
        close = same_inf | (np.abs(a - e) <= ATOL + RTOL * np.abs(e))
    bad = np.flatnonzero(ok & ~close)
    if bad.size:
        i = bad[0]
        return (f"{what}: {bad.size} of {e.size} elements outside {ATOL} + {RTOL} |kiln|, "
                f"first at {i}: {a[i]!r} vs kiln's {e[i]!r}")
    return None


def max_error(np, expected, actual):
    finite = np.isfinite(expected)
    if not finite.any():
        return 0.0
    return float(np.max(np.abs(actual[finite].astype(np.float64) - expected[finite])))


def check_cases(np, ort, onnx_cases, work):
    cases_dir = work / "cases"
    shutil.rmtree(cases_dir, ignore_errors=True)
    subprocess.run([onnx_cases, str(cases_dir)], check=True)
    failures, worst = [], 0.0
    names = sorted(p.name for p in cases_dir.iterdir())
    if len(names) < 40:
        fail(f"onnx_cases wrote {len(names)} cases; the table has more")
    for name in names:
        case = cases_dir / name
        session = ort.InferenceSession(str(case / "model.onnx"),
                                       providers=["CPUExecutionProvider"])
        x = np.load(case / "input.npy")
        expected = np.load(case / "expected.npy")
        (actual,) = session.run(["output"], {"input": x})
        problem = compare(np, name, expected, actual)
        if problem:
            failures.append(problem)
        elif expected.dtype.kind == "f":
            worst = max(worst, max_error(np, expected, actual))
    for problem in failures:
        print(f"  {problem}", file=sys.stderr)
    if failures:
        fail(f"{len(failures)} of {len(names)} translation cases differ from kiln in ONNX "
             "Runtime")
    print(f"{len(names)} translation cases: ONNX Runtime equals kiln (largest difference "
          f"{worst:.3g})")


def read_idx_images(path):
    import numpy as np
    data = gzip.open(path).read()
    count, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(count, rows, cols)


def check_model(np, ort, kiln, work, name, layers):
    from safetensors.numpy import load_file
    config = work / f"{name}.toml"
    runs = work / f"runs_{name}"
    sections = layers.format(fashion=FASHION, text=TEXT)
    config.write_text(CONFIG.format(name=name, runs=runs, sections=sections))
    subprocess.run([kiln, "train", str(config), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    (run,) = (runs / f"onnx_{name}").iterdir()
    exported = subprocess.run([kiln, "export", str(run), "--onnx", "--artifacts",
                               str(work / "artifacts")], check=True, capture_output=True,
                              text=True).stdout
    artifact = pathlib.Path(exported.strip().splitlines()[-1])
    manifest = json.loads((artifact / "manifest.json").read_text())
    if "model.onnx" not in manifest["files"]:
        fail(f"{name}: the manifest does not list model.onnx")
    weights = load_file(str(artifact / "weights.safetensors"))
    shape = manifest["input"]["shape"]
    batch = shape[0]
    if manifest["input"]["dtype"] == "i32":  # token ids: the text's last contexts as they are
        records_path = work / f"{name}_tokens.npy"
        tail = np.frombuffer(TEXT.read_bytes()[-batch * 8 * shape[1]:], np.uint8)
        x = tail.astype(np.int32).reshape(-1, shape[1])
        np.save(records_path, x)
    else:  # the Fashion-MNIST test set, preprocessed as manifest.json says
        records_path = FASHION / "t10k-images-idx3-ubyte.gz"
        images = read_idx_images(records_path)
        x = images.astype(np.float32).reshape([-1] + shape[1:])
        scale = weights["preprocess/scale"]
        scale = scale.reshape([1] * len(shape) if scale.size == 1 else [1] + shape[1:])
        x = x * scale + weights["preprocess/offset"].reshape(scale.shape)
    logits_path = work / f"{name}_kiln.npy"
    subprocess.run([kiln, "predict", str(artifact), str(records_path), "--output",
                    str(logits_path)], check=True, stdout=subprocess.DEVNULL)
    expected = np.load(logits_path)
    session = ort.InferenceSession(str(artifact / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    outputs = []
    for start in range(0, len(x), batch):
        block = x[start:start + batch]
        rows = len(block)
        if rows < batch:
            block = np.concatenate([block, np.zeros((batch - rows, *block.shape[1:]),
                                                    np.float32)])
        (y,) = session.run(["output"], {"input": block})
        outputs.append(y[:rows])
    actual = np.concatenate(outputs)
    problem = compare(np, f"{name} logits", expected, actual)
    if problem:
        fail(problem)
    kiln_classes, onnx_classes = expected.argmax(-1), actual.argmax(-1)
    differ = int((kiln_classes != onnx_classes).sum())
    if differ:
        fail(f"{name}: {differ} of {kiln_classes.size} predictions get another class in ONNX "
             "Runtime")
    top2 = np.sort(expected, axis=-1)[..., -2:]
    print(f"{name}: ONNX Runtime predicts kiln's class for all {kiln_classes.size} "
          f"predictions ({len(x)} records); largest logit difference "
          f"{max_error(np, expected, actual):.3g}, smallest top-2 margin "
          f"{float((top2[..., 1] - top2[..., 0]).min()):.3g}")


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    peers.enter(__file__)
    kiln, onnx_cases, work = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    import numpy as np
    import onnxruntime as ort
    peers.require(TOOL, {"onnxruntime": ort.__version__, "numpy": np.__version__})
    shutil.rmtree(work / "artifacts", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    check_cases(np, ort, onnx_cases, work)
    for name, layers in MODELS.items():
        shutil.rmtree(work / f"runs_{name}", ignore_errors=True)
        check_model(np, ort, kiln, work, name, layers)


if __name__ == "__main__":
    main()
