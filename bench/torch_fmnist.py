"""The PyTorch side of kiln's training benchmarks: the same recipe as
examples/fashion_mnist_{mlp,cnn}.toml, in the way a PyTorch user would write it.

  mlp: Flatten, Linear 784-512, ReLU, Linear 512-512, ReLU, Linear 512-10
  cnn: Conv 3x3 1->32 (no padding), ReLU, MaxPool 2, Conv 3x3 32->64, ReLU, MaxPool 2,
       Flatten (1600), Linear 1600-128, ReLU, Linear 128-10
  AdamW(lr 1e-3, weight decay 0.01), batch 128, cross-entropy, pixels / 255.

Data: the IDX .gz files of Debian's dataset-fashion-mnist, decoded with numpy.
A step = gather the batch, zero_grad, forward, loss, backward, optimizer step.

  .venv/bench/bin/python bench/torch_fmnist.py --model mlp --steps 60 --json    # step timing
  .venv/bench/bin/python bench/torch_fmnist.py --model mlp --compile --json      # torch.compile
  .venv/bench/bin/python bench/torch_fmnist.py --model mlp --epochs 3           # test accuracy
  .venv/bench/bin/python bench/torch_fmnist.py --model mlp --steps 1 --t0 $(date +%s.%N)

--compile wraps the model in torch.compile and compiles the optimizer step too (PyTorch's
"compiled optimizer" recipe); the first steps, which compile, are in the warm-up.

--threads 0 (the default) leaves torch and its BLAS at their own settings, which is the
fastest on this machine for the MLP (docs/performance.md); --threads N sets them to N.
Run with .venv/bench/bin/python: PyTorch 2 from PyPI, pinned in requirements/bench.txt and
installed by scripts/setup --bench.

--private makes the step DP-SGD with Opacus (bench/dp_step_peers.py), as its tutorials
write it: the model wrapped in GradSampleModule (per-example gradients from hooks), the
optimizer in DPOptimizer (each example clipped to --clip, noise of --sigma x --clip, divided
by the batch size).
"""
import argparse
import json
import os
import statistics
import sys
import time

from fmnist_idx import DATA_DIR, read_idx


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--steps", type=int, default=60, help="steps to time (without --epochs)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--epochs", type=int, default=0, help="train full epochs, then evaluate")
    parser.add_argument("--threads", type=int, default=0, help="0: torch's own default")
    parser.add_argument("--compile", action="store_true", help="torch.compile model and optimizer step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--t0", type=float, help="launch time ($(date +%%s.%%N)) for time to first step")
    parser.add_argument("--json", action="store_true", help="one JSON line at the end")
    parser.add_argument("--private", action="store_true", help="a DP-SGD step with Opacus")
    parser.add_argument("--sigma", type=float, default=1.1, help="--private: noise multiplier")
    parser.add_argument("--clip", type=float, default=1.0, help="--private: per-example L2 clip")
    return parser.parse_args()




def build_model(torch, name):
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                             nn.ReLU(), nn.Linear(512, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def main():
    args = parse_args()
    if args.threads > 0:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    import torch
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    images = torch.from_numpy(read_idx(f"{DATA_DIR}/train-images-idx3-ubyte.gz").copy())
    labels = torch.from_numpy(read_idx(f"{DATA_DIR}/train-labels-idx1-ubyte.gz").astype("int64"))
    x_all = (images.float() / 255.0).unsqueeze(1)  # N, 1, 28, 28
    model = build_model(torch, args.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    if args.private:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
        model = GradSampleModule(model)
        optimizer = DPOptimizer(optimizer, noise_multiplier=args.sigma, max_grad_norm=args.clip,
                                expected_batch_size=args.batch)
    loss_fn = torch.nn.CrossEntropyLoss()
    forward = torch.compile(model) if args.compile else model
    optimizer_step = torch.compile(optimizer.step) if args.compile else optimizer.step

    def step(indices):
        x = x_all.index_select(0, indices)
        y = labels.index_select(0, indices)
        optimizer.zero_grad()
        loss = loss_fn(forward(x), y)
        loss.backward()
        optimizer_step()
        return loss

    result = {"model": args.model, "threads": torch.get_num_threads(), "compile": args.compile,
              "torch": torch.__version__, "private": args.private}
    n = x_all.shape[0]
    if args.epochs > 0:
        for _ in range(args.epochs):
            order = torch.randperm(n)
            for begin in range(0, n, args.batch):
                step(order[begin:begin + args.batch])
        test_x = (torch.from_numpy(read_idx(f"{DATA_DIR}/t10k-images-idx3-ubyte.gz").copy())
                  .float() / 255.0).unsqueeze(1)
        test_y = torch.from_numpy(read_idx(f"{DATA_DIR}/t10k-labels-idx1-ubyte.gz").astype("int64"))
        with torch.no_grad():
            correct = (model(test_x).argmax(1) == test_y).sum().item()
        result["test_accuracy"] = correct / test_y.shape[0]
    else:
        order = torch.randperm(n)
        times = []
        for i in range(args.warmup + args.steps):
            begin = (i * args.batch) % (n - args.batch)
            start = time.perf_counter()
            step(order[begin:begin + args.batch])
            times.append(time.perf_counter() - start)
            if i == 0 and args.t0 is not None:
                result["first_step_seconds"] = time.time() - args.t0
        timed = times[args.warmup:] if len(times) > args.warmup else times
        result["median_step_ms"] = 1e3 * statistics.median(timed)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
