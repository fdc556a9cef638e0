"""Run under `torchrun --nproc_per_node 2` (CPU, gloo): a model sharded with torch's FSDP2 (``fully_shard``), the
annealing's per-stage copy of it (``trainable_state_dict``) and its restore (``load_trainable``). Rank 0 writes, as
JSON to argv[1], each rank's kept elements against the model's, and whether a restore after an optimiser step gives
back the forward pass of the copied weights."""

import json
import sys

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

from east_hf.hf.training.weight_copies import load_trainable, trainable_state_dict
from east_hf.scripts.launch_exit import end_launched_process


def main(out_path: str) -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    total = sum(p.numel() for p in model.parameters())
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    kept = trainable_state_dict(model)
    x = torch.randn(8, 16)
    before = model(x).detach()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(x).square().sum().backward()
    optimizer.step()
    moved = (model(x).detach() - before).abs().max().item()
    load_trainable(model, kept)
    restored = (model(x).detach() - before).abs().max().item()
    local = torch.tensor([sum(v.to_local().numel() for v in kept.values())])
    gathered = [torch.zeros_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, local)
    if dist.get_rank() == 0:
        result = {
            "total": total,
            "kept_per_rank": [int(t) for t in gathered],
            "types": sorted({type(v).__name__ for v in kept.values()}),
            "moved": moved,
            "restored": restored,
        }
        with open(out_path, "w") as f:
            json.dump(result, f)
    end_launched_process(0)  # the launch's exit, as east-train's


if __name__ == "__main__":
    main(sys.argv[1])
