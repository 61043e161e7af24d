"""Data-parallel training of a small Gluon MLP with ringcc's MXNet kvstore.

    ringrun -np 2 python examples/mxnet_gluon.py [--steps 30] [--mode kvstore|string|trainer]
        [--out DIR]

(in the MXNet virtual environment: see docs/mxnet.md). Every rank draws its
own shard of a synthetic classification problem; the gradients are summed over
the ranks at each step, so all ranks keep identical parameters.

  --mode kvstore   gluon.Trainer(..., kvstore=mx.kv.create("ring"))   (the default)
  --mode string    gluon.Trainer(..., kvstore="ring")
  --mode trainer   ringcc.mxnet.DistributedTrainer (Horovod style) + broadcast_parameters

With the kvstore, pushpull sums the gradients, so Trainer.step takes the
global batch size; DistributedTrainer averages them and takes the local one.
"""

import argparse
import os

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import ringcc
import ringcc.mxnet as rmx  # registers the kvstore "ring"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32, help="rows per rank and step")
    parser.add_argument("--mode", choices=("kvstore", "string", "trainer"), default="kvstore")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--out", default=None, help="directory for params_rank<R>.npz")
    args = parser.parse_args()

    rmx.init()
    rank, size = rmx.rank(), rmx.size()

    # Different initial parameters on every rank on purpose: the kvstore's
    # broadcast (or broadcast_parameters) makes them rank 0's.
    mx.random.seed(42 + rank)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(4))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.zeros((1, 20)))  # runs the deferred initialisation

    params = net.collect_params()
    optimizer_params = {"learning_rate": args.lr, "momentum": 0.9}
    if args.mode == "kvstore":
        trainer = gluon.Trainer(params, "sgd", optimizer_params, kvstore=mx.kv.create("ring"))
        step_size = args.batch * size  # pushpull sums the gradients of all ranks
    elif args.mode == "string":
        trainer = gluon.Trainer(params, "sgd", optimizer_params, kvstore="ring")
        step_size = args.batch * size
    else:
        rmx.broadcast_parameters(params, root_rank=0)
        trainer = rmx.DistributedTrainer(params, "sgd", optimizer_params)
        step_size = args.batch  # DistributedTrainer averages

    # A fixed random teacher labels the data; each rank draws its own rows.
    teacher = np.random.default_rng(0).normal(size=(20, 4))
    rng = np.random.default_rng(1000 + rank)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for step in range(args.steps):
        x = rng.normal(size=(args.batch, 20)).astype(np.float32)
        y = np.argmax(x @ teacher, axis=1).astype(np.float32)
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x)), mx.nd.array(y))
        loss.backward()
        trainer.step(step_size)
        # The mean loss over all ranks (ringcc.mxnet.allreduce averages by default).
        losses.append(float(rmx.allreduce(loss.mean(), name=f"loss.{step}").asscalar()))
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {losses[-1]:.4f}", flush=True)

    values = [p.data().asnumpy() for p in params.values()]
    flat = np.concatenate([v.ravel() for v in values])[None]
    gathered = ringcc.allgather(flat)
    identical = bool(all(np.array_equal(gathered[0], gathered[r]) for r in range(size)))
    if rank == 0:
        print(f"first loss {losses[0]:.4f}, last loss {losses[-1]:.4f}")
        print(f"parameters identical on all ranks: {identical}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        np.savez(
            os.path.join(args.out, f"params_rank{rank}.npz"),
            first_loss=losses[0],
            last_loss=losses[-1],
            **{f"param{i}": v for i, v in enumerate(values)},
        )
    rmx.wait_all()
    rmx.shutdown()


if __name__ == "__main__":
    main()
