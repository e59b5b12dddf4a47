"""The JAX side of kiln's training benchmarks: the recipe of
examples/fashion_mnist_{mlp,cnn}.toml written as a JAX user would write it, with Flax's
linen layers, `optax.adamw`, and one `jax.jit` of `value_and_grad` plus the update with
the parameters and optimizer state donated.

  mlp: Dense 784-512, relu, Dense 512-512, relu, Dense 512-10
  cnn: Conv 3x3 1->32 VALID, relu, max_pool 2, Conv 3x3 32->64 VALID, relu, max_pool 2,
       flatten (1600), Dense 128, relu, Dense 10
  adamw(lr 1e-3, weight_decay 0.01), batch 128, softmax cross-entropy, pixels / 255.

Images are NHWC, JAX's layout. A timed step = gather the batch on the host, run the jitted
step, and wait for the loss (block_until_ready), which is what a kiln step's timing covers.

  .venv/peers/bin/python bench/jax_fmnist.py --model mlp --steps 60 --json
  .venv/peers/bin/python bench/jax_fmnist.py --model mlp --steps 1 --warmup 0 --t0 $(date +%s.%N)

--threads 1 runs XLA on one thread (XLA_FLAGS); 0, the default, leaves XLA's own choice. Run by bench/vs_peers.py.

--private makes the step DP-SGD as a JAX user writes it (bench/dp_step_peers.py): per-example
gradients by jax.vmap of jax.grad over the batch, each clipped to L2 norm --clip, summed,
Gaussian noise of standard deviation --sigma x --clip added, divided by the batch size, then
the same optax.adamw update; all inside the one jitted step.
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
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--threads", type=int, choices=[0, 1], default=0,
                        help="0: XLA's own default (a thread per core); 1: one thread")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--t0", type=float, help="launch time ($(date +%%s.%%N)) for time to first step")
    parser.add_argument("--json", action="store_true", help="one JSON line at the end")
    parser.add_argument("--private", action="store_true", help="a DP-SGD step (see above)")
    parser.add_argument("--sigma", type=float, default=1.1, help="--private: noise multiplier")
    parser.add_argument("--clip", type=float, default=1.0, help="--private: per-example L2 clip")
    return parser.parse_args()




def build_model(nn, name):
    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(512)(x))
            x = nn.relu(nn.Dense(512)(x))
            return nn.Dense(10)(x)

    class Cnn(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(32, (3, 3), padding="VALID")(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = nn.relu(nn.Conv(64, (3, 3), padding="VALID")(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(128)(x))
            return nn.Dense(10)(x)

    return Mlp() if name == "mlp" else Cnn()


def main():
    args = parse_args()
    if args.threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import linen as nn

    images = read_idx(f"{DATA_DIR}/train-images-idx3-ubyte.gz")
    labels = read_idx(f"{DATA_DIR}/train-labels-idx1-ubyte.gz").astype(np.int32)
    x_all = (images.astype(np.float32) / 255.0)[..., None]  # N, 28, 28, 1
    n = x_all.shape[0]

    model = build_model(nn, args.model)
    params = model.init(jax.random.key(args.seed), jnp.zeros((1, 28, 28, 1), jnp.float32))
    optimizer = optax.adamw(1e-3, weight_decay=0.01)
    opt_state = optimizer.init(params)

    def loss_fn(params, x, y):
        logits = model.apply(params, x)
        return optax.losses.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def private_step(params, opt_state, x, y, key):
        def example_loss(params, xi, yi):
            return loss_fn(params, xi[None], yi[None])

        losses, grads = jax.vmap(jax.value_and_grad(example_loss), in_axes=(None, 0, 0))(
            params, x, y)
        leaves, tree = jax.tree_util.tree_flatten(grads)
        norms = jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in leaves))
        factor = 1.0 / jnp.maximum(1.0, norms / args.clip)
        keys = jax.random.split(key, len(leaves))
        noisy = [(jnp.tensordot(factor, g, axes=1) +
                  args.sigma * args.clip * jax.random.normal(k, g.shape[1:], g.dtype)) / x.shape[0]
                 for g, k in zip(leaves, keys)]
        updates, opt_state = optimizer.update(jax.tree_util.tree_unflatten(tree, noisy),
                                              opt_state, params)
        return optax.apply_updates(params, updates), opt_state, losses.mean()

    step = jax.jit(private_step if args.private else step, donate_argnums=(0, 1))

    order = np.random.default_rng(args.seed).permutation(n)
    result = {"model": args.model, "threads": args.threads, "jax": jax.__version__,
              "private": args.private}
    key = jax.random.key(args.seed + 1)
    times = []
    for i in range(args.warmup + args.steps):
        begin = (i * args.batch) % (n - args.batch)
        start = time.perf_counter()
        index = order[begin:begin + args.batch]
        if args.private:
            params, opt_state, loss = step(params, opt_state, x_all[index], labels[index],
                                           jax.random.fold_in(key, i))
        else:
            params, opt_state, loss = step(params, opt_state, x_all[index], labels[index])
        loss.block_until_ready()
        times.append(time.perf_counter() - start)
        if i == 0 and args.t0 is not None:
            result["first_step_seconds"] = time.time() - args.t0
    if not np.isfinite(float(loss)):
        sys.exit(f"non-finite loss {float(loss)}")
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
