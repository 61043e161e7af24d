"""A training script that never imports ringcc: backend "ring" must come from
torch's `torch.backends` entry point (installed with ringcc).

    torchrun --nproc-per-node 2 tests/frameworks/torch/torch_entry.py --out DIR

Writes OUT/rank<R>.json: whether the entry point ran at `import torch`,
whether it kept the backend module unloaded until the group was made, and an
all_reduce's result.
"""

import argparse
import json
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import torch
    import torch.distributed as dist

    record = {
        "entry_point_loaded": "ringcc.torch_entry_point" in sys.modules,
        "backend_loaded_at_import": "ringcc.torch.backend" in sys.modules,
        "registered_at_import": "RING" in getattr(dist.Backend, "_plugins", {}),
    }
    dist.init_process_group(backend="ring")
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t)
    record.update(
        rank=rank, size=size, backend=dist.get_backend(), result=t.tolist(), group_type=type(dist.group.WORLD).__name__
    )
    dist.destroy_process_group()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
