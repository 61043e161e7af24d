"""The Horovod PyTorch recipe with one line changed: the import.

    import ringcc.torch as hvd        # was: import horovod.torch as hvd

Everything else is the recipe users run with Horovod: hvd.init(), a
DistributedSampler(num_replicas=hvd.size(), rank=hvd.rank()), the learning
rate scaled by hvd.size(), hvd.DistributedOptimizer(named_parameters=...),
hvd.broadcast_parameters() and hvd.broadcast_optimizer_state() from rank 0,
hvd.allreduce() to average the metrics, and (with --checkpoint PATH) a
checkpoint saved on rank 0 only; without it nothing is written. The data are
synthetic, MNIST-shaped (1x28x28 images, 10 classes, made from a fixed seed,
so no download); the GPU lines run only where CUDA is.

    ringrun -np 2 python examples/pytorch_mnist_style.py
    torchrun --nproc-per-node 2 examples/pytorch_mnist_style.py --checkpoint /tmp/mnist.pth
    python examples/pytorch_mnist_style.py --epochs 1 --fp16-allreduce
"""

import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import ringcc.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch MNIST-style example (synthetic data)")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size for training")
parser.add_argument("--test-batch-size", type=int, default=100, help="input batch size for testing")
parser.add_argument("--epochs", type=int, default=3, help="number of epochs to train")
parser.add_argument("--lr", type=float, default=0.05, help="learning rate")
parser.add_argument("--momentum", type=float, default=0.5, help="SGD momentum")
parser.add_argument("--samples", type=int, default=512, help="training samples (synthetic)")
parser.add_argument("--seed", type=int, default=42, help="random seed")
parser.add_argument(
    "--fp16-allreduce", action="store_true", default=False, help="use fp16 compression during allreduce"
)
parser.add_argument("--use-adasum", action="store_true", default=False, help="use adasum algorithm to do reduction")
parser.add_argument(
    "--gradient-predivide-factor",
    type=float,
    default=1.0,
    help="apply gradient predivide factor in optimizer (default: 1.0)",
)
parser.add_argument(
    "--checkpoint", default=None, help="where rank 0 saves the model at the end (default: no checkpoint)"
)
parser.add_argument("--no-cuda", action="store_true", default=False, help="disables CUDA training")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def synthetic_mnist(samples, seed):
    """MNIST-shaped data whose labels a small net can learn: each class has
    a bright 7x7 patch at a place of its own, plus noise."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (samples,), generator=g)
    images = torch.randn(samples, 1, 28, 28, generator=g) * 0.3
    for i, label in enumerate(labels.tolist()):
        row, col = divmod(label, 4)
        images[i, 0, 2 + 7 * row : 9 + 7 * row, 1 + 7 * col : 8 + 7 * col] += 1.0
    return torch.utils.data.TensorDataset(images, labels)


def metric_average(val, name):
    tensor = torch.tensor(val)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


def main():
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    # Horovod: initialize library.
    hvd.init()
    torch.manual_seed(args.seed)

    if args.cuda:
        # Horovod: pin GPU to local rank.
        torch.cuda.set_device(hvd.local_rank())
        torch.cuda.manual_seed(args.seed)

    # Horovod: limit # of CPU threads to be used per worker.
    torch.set_num_threads(1)

    train_dataset = synthetic_mnist(args.samples, args.seed)
    test_dataset = synthetic_mnist(args.samples // 4, args.seed + 1)
    # Horovod: use DistributedSampler to partition the training data.
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=hvd.size(), rank=hvd.rank()
    )
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_dataset, num_replicas=hvd.size(), rank=hvd.rank()
    )
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.test_batch_size, sampler=test_sampler)

    model = Net()

    # By default, Adasum doesn't need scaling up learning rate.
    lr_scaler = hvd.size() if not args.use_adasum else 1

    if args.cuda:
        # Move model to GPU.
        model.cuda()

    # Horovod: scale learning rate by lr_scaler.
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)

    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Horovod: (optional) compression algorithm.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    # Horovod: wrap optimizer with DistributedOptimizer.
    optimizer = hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=compression,
        op=hvd.Adasum if args.use_adasum else hvd.Average,
        gradient_predivide_factor=args.gradient_predivide_factor,
    )

    def train(epoch):
        model.train()
        # Horovod: set epoch to sampler for shuffling.
        train_sampler.set_epoch(epoch)
        for batch_idx, (data, target) in enumerate(train_loader):
            if args.cuda:
                data, target = data.cuda(), target.cuda()
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            if batch_idx % 4 == 0 and hvd.rank() == 0:
                print(
                    f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_sampler)}]\tLoss: {loss.item():.6f}",
                    flush=True,
                )

    def test():
        model.eval()
        test_loss = 0.0
        test_accuracy = 0.0
        with torch.no_grad():
            for data, target in test_loader:
                if args.cuda:
                    data, target = data.cuda(), target.cuda()
                output = model(data)
                # sum up batch loss
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                # get the index of the max log-probability
                pred = output.data.max(1, keepdim=True)[1]
                test_accuracy += pred.eq(target.data.view_as(pred)).cpu().float().sum().item()

        # Horovod: use test_sampler to determine the number of examples in
        # this worker's partition.
        test_loss /= len(test_sampler)
        test_accuracy /= len(test_sampler)

        # Horovod: average metric values across workers.
        test_loss = metric_average(test_loss, "avg_loss")
        test_accuracy = metric_average(test_accuracy, "avg_accuracy")

        # Horovod: print output only on first rank.
        if hvd.rank() == 0:
            print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {100.0 * test_accuracy:.2f}%\n", flush=True)
        return test_loss, test_accuracy

    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test_loss, test_accuracy = test()

    # Horovod: save the checkpoint on the first rank only.
    if hvd.rank() == 0 and args.checkpoint:
        torch.save(
            {"model": model.state_dict(), "test_loss": test_loss, "test_accuracy": test_accuracy, "size": hvd.size()},
            args.checkpoint,
        )
        print(f"saved {os.path.abspath(args.checkpoint)}", flush=True)


if __name__ == "__main__":
    main()
