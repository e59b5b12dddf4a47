#!/usr/bin/python3
"""kiln's GPT-2 train step against the peers a user would pick instead: JAX (jax.jit of
value_and_grad + optax.adamw, the params and optimizer state donated) and PyTorch 2, eager
and torch.compile (torch.optim.AdamW, fused where torch has it on the CPU), on the same
model as kiln/nn/gpt2.h: GPT-2 124M (12 layers, 12 heads, C 768, vocabulary 50257 padded
to 50304), f32, causal attention that materialises the T x T scores, tied output
projection, AdamW(lr 3e-4, weight decay 0).

The machine is noisy, so processes alternate: every round runs kiln
(build/release/bench/gpt2_step_bench --json), then each peer, and each peer's ratio is
taken against the kiln run of its own round (above 1: kiln is faster). Each process times
--steps steps after --warmup untimed ones and reports its median; the peers run at their
default thread settings (XLA and torch: one thread per core), which on this 2-core machine
is their fastest for GEMM-bound work.

  /usr/bin/python3 bench/gpt2_peers.py [--rounds 2] [--context 64] [--peers jax,torch,compile]
                                      [--threads 1]

--threads N runs every side on N cores (taskset -c 0-(N-1)) with N compute threads: kiln with
KILN_COMPUTE_THREADS=N, torch with torch.set_num_threads(N), JAX with the thread pools XLA
sizes from the cores it may run on (XLA has no thread-count setting of its own: its
--xla_cpu_multi_thread_eigen=false still ran at 160% CPU here).

--gemms compares the matrix products alone: every GEMM shape of kiln's step (its forward
and backward dense layers, attention per head, the tied projection; the list
gpt2_step_bench --gemms-only prints) through kiln's GEMM and through XLA's dot_general
(jax.jit, operands laid out as kiln's, transposes folded into the dimension numbers),
alternating per round. It says whether a peer's step is faster than kiln's GEMMs alone,
which no change outside the GEMM could beat.

One side alone (what the rounds run):
  .venv/peers/bin/python bench/gpt2_peers.py --side jax --context 64
  .venv/bench/bin/python bench/gpt2_peers.py --side torch [--compile]

Needs scripts/setup --bench (PyTorch 2 in .venv/bench; JAX is in .venv/peers).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAX_PYTHON = os.path.join(ROOT, ".venv", "peers", "bin", "python")
TORCH_PYTHON = os.path.join(ROOT, ".venv", "bench", "bin", "python")

LAYERS, HEADS, CHANNELS, VOCAB, PADDED_VOCAB, MAX_CONTEXT = 12, 12, 768, 50257, 50304, 1024
LEARNING_RATE = 3e-4


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", choices=["jax", "torch"], help="run one side and print JSON")
    parser.add_argument("--compile", action="store_true", help="torch side: torch.compile")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--peers", default="jax,torch,compile")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--gemms", action="store_true",
                        help="compare the step's GEMM shapes alone, kiln against XLA")
    parser.add_argument("--shapes", help="jax side with --gemms: kiln's JSON lines of shapes")
    parser.add_argument("--threads", type=int, default=0,
                        help="compute threads for every side (0: each side's default)")
    return parser.parse_args()


def timed_steps(step, args):
    """Runs warmup then timed steps; step() must return only once the step is complete."""
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    for _ in range(args.warmup - 1):
        step()
    samples = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        samples.append(time.perf_counter() - start)
    return first, statistics.median(samples)


def jax_side(args):
    import jax
    import jax.numpy as jnp
    import optax

    key = jax.random.key(0)
    keys = iter(jax.random.split(key, 4 + 4 * LAYERS))
    residual = 0.02 / math.sqrt(2 * LAYERS)

    def normal(shape, std):
        return jax.random.normal(next(keys), shape, jnp.float32) * std

    def dense(n_in, n_out, std):
        return {"kernel": normal((n_in, n_out), std), "bias": jnp.zeros((n_out,), jnp.float32)}

    def norm():
        return {"scale": jnp.ones((CHANNELS,), jnp.float32), "bias": jnp.zeros((CHANNELS,), jnp.float32)}

    c = CHANNELS
    params = {"wte": normal((PADDED_VOCAB, c), 0.02), "wpe": normal((MAX_CONTEXT, c), 0.02),
              "ln_f": norm(),
              "h": [{"ln_1": norm(), "ln_2": norm(),
                     "c_attn": dense(c, 3 * c, 0.02), "attn_proj": dense(c, c, residual),
                     "c_fc": dense(c, 4 * c, 0.02), "mlp_proj": dense(4 * c, c, residual)}
                    for _ in range(LAYERS)]}

    def layer_norm(p, x):
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p["scale"] + p["bias"]

    def linear(p, x):
        return x @ p["kernel"] + p["bias"]

    def loss_fn(p, tokens, targets):
        b, t = tokens.shape
        x = jnp.take(p["wte"], tokens, axis=0) + p["wpe"][:t]
        for block in p["h"]:
            q, k, v = jnp.split(linear(block["c_attn"], layer_norm(block["ln_1"], x)), 3, axis=2)
            shape = (b, t, HEADS, c // HEADS)
            y = jax.nn.dot_product_attention(q.reshape(shape), k.reshape(shape), v.reshape(shape),
                                             is_causal=True)
            x = x + linear(block["attn_proj"], y.reshape(b, t, c))
            hidden = jax.nn.gelu(linear(block["c_fc"], layer_norm(block["ln_2"], x)), approximate=True)
            x = x + linear(block["mlp_proj"], hidden)
        logits = layer_norm(p["ln_f"], x) @ p["wte"].T
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, targets))

    optimizer = optax.adamw(LEARNING_RATE, weight_decay=0.0)
    state = {"params": params, "opt": optimizer.init(params)}

    def train_step(p, opt, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(p, tokens, targets)
        updates, opt = optimizer.update(grads, opt, p)
        return optax.apply_updates(p, updates), opt, loss

    train_step = jax.jit(train_step, donate_argnums=(0, 1))
    data = jax.random.randint(jax.random.key(1), (args.batch, args.context + 1), 0, VOCAB)
    tokens, targets = data[:, :-1], data[:, 1:]

    def step():
        state["params"], state["opt"], loss = train_step(state["params"], state["opt"], tokens, targets)
        loss.block_until_ready()

    first, median = timed_steps(step, args)
    return {"side": "jax", "version": jax.__version__, "first_step_s": first, "median_step_s": median}


def jax_gemms_side(args):
    import jax
    import jax.numpy as jnp
    from jax import lax

    with open(args.shapes) as shapes_file:
        shapes = [json.loads(line) for line in shapes_file if line.strip()]
    results = []
    for s in shapes:
        m, n, k = s["m"], s["n"], s["k"]
        a = jnp.full((k, m) if s["trans_a"] else (m, k), 0.5, jnp.float32)
        b = jnp.full((n, k) if s["trans_b"] else (k, n), 0.25, jnp.float32)
        dims = (((0 if s["trans_a"] else 1,), (1 if s["trans_b"] else 0,)), ((), ()))
        product = jax.jit(lambda a, b, dims=dims: lax.dot_general(a, b, dims))
        product(a, b).block_until_ready()  # compile and warm, as kiln's side warms
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            product(a, b).block_until_ready()
            samples.append(time.perf_counter() - start)
        results.append(dict(s, seconds=statistics.median(samples)))
    return {"side": "jax", "version": jax.__version__, "gemms": results}


def torch_side(args):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    c = CHANNELS
    residual = 0.02 / math.sqrt(2 * LAYERS)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = torch.nn.LayerNorm(c), torch.nn.LayerNorm(c)
            self.c_attn, self.attn_proj = torch.nn.Linear(c, 3 * c), torch.nn.Linear(c, c)
            self.c_fc, self.mlp_proj = torch.nn.Linear(c, 4 * c), torch.nn.Linear(4 * c, c)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
            # The T x T scores materialised, as kiln's attention does (no flash kernel).
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            scores = scores.masked_fill(~mask, float("-inf"))
            y = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.attn_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class Gpt2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Embedding(PADDED_VOCAB, c)
            self.wpe = torch.nn.Embedding(MAX_CONTEXT, c)
            self.h = torch.nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = torch.nn.LayerNorm(c)
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    torch.nn.init.zeros_(p)
                elif "ln_" in name:
                    torch.nn.init.ones_(p)
                else:
                    torch.nn.init.normal_(p, 0.0, residual if name.endswith("proj.weight") else 0.02)

        def forward(self, tokens, targets):
            t = tokens.shape[1]
            x = self.wte(tokens) + self.wpe.weight[:t]
            for block in self.h:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.T
            return F.cross_entropy(logits.view(-1, PADDED_VOCAB), targets.reshape(-1))

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = Gpt2()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    forward = torch.compile(model) if args.compile else model
    generator = torch.Generator().manual_seed(1)
    data = torch.randint(0, VOCAB, (args.batch, args.context + 1), generator=generator)
    tokens, targets = data[:, :-1], data[:, 1:]

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = forward(tokens, targets)
        loss.backward()
        optimizer.step()
        loss.item()

    first, median = timed_steps(step, args)
    return {"side": "torch.compile" if args.compile else "torch", "version": torch.__version__,
            "threads": torch.get_num_threads(), "first_step_s": first, "median_step_s": median}


def run_json(command, env=None):
    process = subprocess.run(command, capture_output=True, cwd=ROOT, env=env)
    if process.returncode != 0:
        sys.exit(f"failed ({process.returncode}): {' '.join(command)}\n{process.stderr.decode()}")
    return json.loads(process.stdout.decode().strip().splitlines()[-1])


def gemm_label(s):
    return (f"{'T' if s['trans_a'] else 'N'}{'T' if s['trans_b'] else 'N'} m={s['m']} n={s['n']} "
            f"k={s['k']}")


def orchestrate_gemms(args):
    """kiln's GEMMs against XLA's, shape by shape, alternating per round."""
    env = dict(os.environ)
    pinned = ["taskset", "-c", f"0-{args.threads - 1}"] if args.threads > 0 else []
    if args.threads > 0:
        env["KILN_COMPUTE_THREADS"] = str(args.threads)
    kiln = pinned + [os.path.join(args.build, "bench", "gpt2_step_bench"), "--batch",
                     str(args.batch), "--context", str(args.context), "--gemms-only", "--json"]
    shapes_path = os.path.join(ROOT, "build", f"gpt2_gemm_shapes_{os.getpid()}.jsonl")
    print(f"GPT-2 124M step's GEMMs, B = {args.batch}, T = {args.context}, "
          f"{args.rounds} rounds (each shape: the median of 5 calls after one warm-up)")
    kiln_rounds, jax_rounds = [], []
    try:
        for round_index in range(args.rounds):
            process = subprocess.run(kiln, capture_output=True, cwd=ROOT, env=env, check=True)
            lines = process.stdout.decode().strip().splitlines()
            with open(shapes_path, "w") as shapes_file:
                shapes_file.write("\n".join(lines) + "\n")
            kiln_rounds.append([json.loads(line) for line in lines])
            jax = run_json(pinned + [JAX_PYTHON, __file__, "--side", "jax", "--gemms", "--shapes",
                                     shapes_path], env)
            jax_rounds.append(jax["gemms"])
            kiln_total = sum(s["seconds"] * s["count"] for s in kiln_rounds[-1])
            jax_total = sum(s["seconds"] * s["count"] for s in jax_rounds[-1])
            print(f"round {round_index}: a step's GEMMs, kiln {kiln_total:.3f} s, JAX "
                  f"{jax['version']} {jax_total:.3f} s, XLA / kiln {jax_total / kiln_total:.2f}",
                  flush=True)
    finally:
        if os.path.exists(shapes_path):
            os.remove(shapes_path)
    print(f"{'shape':<30} {'count':>5} {'kiln ms':>9} {'XLA ms':>9} {'XLA/kiln per round':>22}")
    for index, shape in enumerate(kiln_rounds[0]):
        ratios = [j[index]["seconds"] / k[index]["seconds"] for k, j in zip(kiln_rounds, jax_rounds)]
        kiln_ms = statistics.median(k[index]["seconds"] for k in kiln_rounds) * 1e3
        jax_ms = statistics.median(j[index]["seconds"] for j in jax_rounds) * 1e3
        print(f"{gemm_label(shape):<30} {shape['count']:>5} {kiln_ms:9.3f} {jax_ms:9.3f} "
              f"{' '.join(f'{r:.2f}' for r in ratios):>22}")
    totals = [sum(j["seconds"] * j["count"] for j in js) / sum(k["seconds"] * k["count"] for k in ks)
              for ks, js in zip(kiln_rounds, jax_rounds)]
    print(f"a step's GEMMs, XLA / kiln per round: {' '.join(f'{r:.2f}' for r in totals)} "
          f"(median {statistics.median(totals):.2f}; above 1: kiln's GEMMs are faster)")


def orchestrate(args):
    common = ["--batch", str(args.batch), "--context", str(args.context), "--steps", str(args.steps),
              "--warmup", str(args.warmup), "--threads", str(args.threads)]
    env = dict(os.environ)
    if args.threads > 0:
        env["KILN_COMPUTE_THREADS"] = str(args.threads)
        env["OMP_NUM_THREADS"] = str(args.threads)
    pinned = ["taskset", "-c", f"0-{args.threads - 1}"] if args.threads > 0 else []
    kiln = pinned + [os.path.join(args.build, "bench", "gpt2_step_bench"), "--batch", str(args.batch),
            "--context", str(args.context), "--steps", str(args.steps), "--rounds", "1", "--json"]
    peers = {"jax": pinned + [JAX_PYTHON, __file__, "--side", "jax"] + common,
             "torch": pinned + [TORCH_PYTHON, __file__, "--side", "torch"] + common,
             "compile": pinned + [TORCH_PYTHON, __file__, "--side", "torch", "--compile"] + common}
    chosen = [name for name in args.peers.split(",") if name]
    for name in chosen:
        if name not in peers:
            sys.exit(f"--peers: unknown peer '{name}' (jax, torch, compile)")
        if not os.path.exists(peers[name][len(pinned)]):
            sys.exit(f"{peers[name][len(pinned)]} is missing: run scripts/setup --bench")
    threads = f"{args.threads} threads" if args.threads else "default threads"
    print(f"GPT-2 124M, B = {args.batch}, T = {args.context}, {threads}, {args.rounds} rounds of "
          f"{args.steps} steps after {args.warmup} warm-up steps")
    ratios = {name: [] for name in chosen}
    for round_index in range(args.rounds):
        k = run_json(kiln, env)
        line = (f"round {round_index}: kiln {k['median_step_s']:.3f} s (GEMM limit "
                f"{k['limit_s']:.3f} s, {k['median_step_s'] / k['limit_s']:.2f}x)")
        for name in chosen:
            result = run_json(peers[name], env)
            ratio = result["median_step_s"] / k["median_step_s"]
            ratios[name].append(ratio)
            line += (f"; {result['side']} {result['version']} {result['median_step_s']:.3f} s "
                     f"(first {result['first_step_s']:.1f} s) = {ratio:.2f}x kiln")
        print(line, flush=True)
    for name in chosen:
        values = " ".join(f"{r:.2f}" for r in ratios[name])
        print(f"{name} / kiln per round: {values} (median {statistics.median(ratios[name]):.2f}x)")


def main():
    args = parse_args()
    if args.side == "jax" and args.gemms:
        print(json.dumps(jax_gemms_side(args)))
    elif args.side == "jax":
        print(json.dumps(jax_side(args)))
    elif args.gemms:
        orchestrate_gemms(args)
    elif args.side == "torch":
        print(json.dumps(torch_side(args)))
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
