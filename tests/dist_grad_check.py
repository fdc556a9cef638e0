"""Run under `torchrun --nproc_per_node 2`: compares DDP gradients of EASTTrainer with single-process gradients.

Writes rank 0's findings as JSON to argv[1].
"""

import copy
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from helpers import PlainClassifier, TinyTabular, east_args  # noqa: E402

from east_hf import EASTTrainer  # noqa: E402


def main(out_path: str) -> None:
    result = {}
    for sync in (True, False):
        torch.manual_seed(0)
        model = PlainClassifier()
        reference = copy.deepcopy(model)
        data = TinyTabular(32)
        trainer = EASTTrainer(model=model, args=east_args(out_path + f".{sync}", east_sync_across_processes=sync))
        world, rank = trainer.accelerator.num_processes, trainer.accelerator.process_index
        ddp = trainer.accelerator.prepare_model(model)
        n = len(data) // world
        local = {"input_values": data.x[rank * n : (rank + 1) * n], "labels": data.y[rank * n : (rank + 1) * n]}
        trainer.compute_loss(ddp, local).backward()  # DDP averages gradients across processes here
        got = [p.grad.detach().clone() for p in model.parameters()]
        if rank == 0:
            if sync:  # single process on the concatenated global batch
                trainer.east_loss(reference(data.x), data.y).backward()
                expected = [p.grad for p in reference.parameters()]
            else:  # the mean of the per-process local surrogates' gradients
                expected = None
                for r in range(world):
                    reference.zero_grad()
                    sl = slice(r * n, (r + 1) * n)
                    trainer.east_loss(reference(data.x[sl]), data.y[sl]).backward()
                    grads = [p.grad.clone() / world for p in reference.parameters()]
                    expected = grads if expected is None else [a + b for a, b in zip(expected, grads)]
            diff = max((a - b).abs().max().item() for a, b in zip(got, expected))
            result[f"sync={sync}"] = {
                "world_size": world,
                "max_abs_diff": diff,
                "grad_norm": sum(g.norm().item() for g in got),
            }
        torch.distributed.barrier()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
