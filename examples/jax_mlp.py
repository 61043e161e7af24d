"""Data-parallel training of a small MLP with JAX and ringcc.

    ringrun -np 2 python examples/jax_mlp.py [--steps 50] [--out DIR]

Every rank holds a replica of the parameters and its own shard of a synthetic
regression data set. Each step computes the gradients on the local shard and
averages them over the ranks with ringcc.jax.allreduce inside the jitted
training step, so every replica applies the same update. Rank 0 broadcasts
its initial parameters first (ringcc.jax.broadcast), so the replicas start
equal even though each rank draws its own. At the end the ranks check that
their parameters are bit-identical (and write them to DIR/params_rank<R>.npz
with --out).
"""

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import ringcc
import ringcc.jax as rj

LAYERS = (8, 32, 32, 1)


def init_params(key):
    params = []
    for fan_in, fan_out in zip(LAYERS[:-1], LAYERS[1:]):
        key, wkey = jax.random.split(key)
        w = jax.random.normal(wkey, (fan_in, fan_out), jnp.float32) * jnp.sqrt(2.0 / fan_in)
        params.append({"w": w, "b": jnp.zeros((fan_out,), jnp.float32)})
    return params


def forward(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    last = params[-1]
    return (x @ last["w"] + last["b"])[:, 0]


def loss_fn(params, x, y):
    return jnp.mean((forward(params, x) - y) ** 2)


def make_data(rank, n_per_rank):
    """This rank's shard of y = sin(x . a) + 0.1 noise (a is shared by all ranks)."""
    a = np.random.default_rng(1234).normal(size=LAYERS[0]).astype(np.float32)
    rng = np.random.default_rng(100 + rank)
    x = rng.normal(size=(n_per_rank, LAYERS[0])).astype(np.float32)
    y = np.sin(x @ a) + 0.1 * rng.normal(size=n_per_rank).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y.astype(np.float32))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=256, help="examples per rank")
    parser.add_argument("--out", help="directory for params_rank<R>.npz")
    args = parser.parse_args(argv)

    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()

    # Each rank draws different parameters; rank 0's win.
    params = init_params(jax.random.PRNGKey(rank))
    params = jax.tree_util.tree_map(lambda p: rj.broadcast(p, root=0), params)
    x, y = make_data(rank, args.batch)

    @jax.jit
    def global_loss(params):
        return rj.allreduce(loss_fn(params, x, y), "average")

    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        # Average the gradients over the ranks (one allreduce per leaf; the
        # gradients are intermediates, so each is reduced in place).
        grads = jax.tree_util.tree_map(lambda g: rj.allreduce(g, "average"), grads)
        params = jax.tree_util.tree_map(lambda p, g: p - args.lr * g, params, grads)
        return params, rj.allreduce(loss, "average")

    # donate_argnums=0: the old parameters' buffers are reused for the new ones.
    train_step = jax.jit(train_step, donate_argnums=0)

    first = float(global_loss(params))
    for step in range(args.steps):
        params, loss = train_step(params, x, y)
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  mean loss over ranks {float(loss):.5f}", flush=True)
    last = float(global_loss(params))

    # Are the replicas identical? Gather every rank's flattened parameters.
    flat = jnp.concatenate([p.ravel() for p in jax.tree_util.tree_leaves(params)])
    gathered = np.asarray(rj.allgather(flat[None, :]))
    identical = all(np.array_equal(gathered[0], gathered[r]) for r in range(size))
    if rank == 0:
        print(
            f"loss {first:.5f} -> {last:.5f} over {args.steps} steps on {size} ranks; "
            f"parameters identical on all ranks: {identical}",
            flush=True,
        )
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        leaves = {f"leaf{i}": np.asarray(p) for i, p in enumerate(jax.tree_util.tree_leaves(params))}
        np.savez(
            os.path.join(args.out, f"params_rank{rank}.npz"),
            first_loss=first,
            last_loss=last,
            identical=identical,
            **leaves,
        )
    ok = identical and last < first
    jax.effects_barrier()  # every dispatched collective has run before leaving the job
    ringcc.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
