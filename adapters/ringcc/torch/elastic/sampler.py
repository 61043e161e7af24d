"""ElasticSampler: Horovod's sampler that re-partitions the samples a
membership change left unprocessed."""

from __future__ import annotations

import math
import random

import torch.utils.data

from ringcc.torch import horovod as _hvd


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions a dataset across ranks, and again after every reset.

    Like `DistributedSampler`, but it records how many samples the job has
    processed this epoch (`record_batch`); when tracked by a `TorchState`,
    it is committed and restored with the rest of the state, and after a
    reset the samples not yet processed are partitioned among the new set of
    workers.

    1. Put it in the `TorchState`.
    2. Call `record_batch(batch_idx, batch_size)` after each batch.
    3. Call `set_epoch(epoch)` at the end of each epoch (not the beginning:
       a partly done epoch must not start over).

    Args:
        dataset: the dataset (of constant size).
        shuffle: shuffle the indices (default True), the same way on every rank.
        seed: the shuffle's seed, the same on every rank (default 0).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        """Sets the epoch (the shuffle's) and forgets the processed samples."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records that every rank processed `batch_size` more samples."""
        self.processed_num += batch_size * self.num_replicas

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def state_dict(self):
        return dict(epoch=self.epoch, processed_num=self.processed_num)

    def reset(self):
        self.num_replicas = _hvd.size()
        self.rank = _hvd.rank()
        # The samples of this epoch not processed yet.
        all_indices = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(all_indices)
        self.remaining_indices = all_indices[self.processed_num :]
        self.num_samples = int(math.ceil(len(self.remaining_indices) * 1.0 / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        self.indices = self.remaining_indices[:]
        # Padded to a multiple of the number of replicas.
        self.indices += self.indices[: (self.total_size - len(self.indices))]
        assert len(self.indices) == self.total_size
        self.indices = self.indices[self.rank : self.total_size : self.num_replicas]
        assert len(self.indices) == self.num_samples
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
