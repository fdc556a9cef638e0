"""Run under `torchrun --nproc_per_node 2`: compares DDP gradients of EASTTrainer with single-process gradients, for
a multiclass and a multi-label task.

Writes rank 0's findings as JSON to argv[1]. On CPU (gloo) by default, as tests/test_distributed.py runs it; with
``EAST_DIST_CHECK_GPU=1`` on a machine with 2 GPUs, each rank on its own GPU over NCCL (the README's GPU check).
"""

import atexit
import copy
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from helpers import PlainClassifier, TinyTabular, east_args  # noqa: E402

from east_hf import EASTTrainer  # noqa: E402
from east_hf.scripts.launch_exit import end_launched_process  # noqa: E402

GPU = os.environ.get("EAST_DIST_CHECK_GPU") == "1"


class MultiHot(TinyTabular):
    """TinyTabular with three multi-hot labels per row (the signs of its first three inputs, plus a fixed flip)."""

    def __init__(self, n: int):
        super().__init__(n)
        self.y = (self.x[:, :3] + 0.3 * torch.randn(n, 3, generator=torch.Generator().manual_seed(1)) > 0).float()


def main(out_path: str) -> None:
    result = {}
    for task, sync in ((t, s) for t in ("multiclass", "multilabel") for s in (True, False)):
        torch.manual_seed(0)
        model = PlainClassifier()
        reference = copy.deepcopy(model)
        data = TinyTabular(32) if task == "multiclass" else MultiHot(32)
        args = east_args(out_path + f".{task}.{sync}", east_sync_across_processes=sync, use_cpu=not GPU)
        # multi-hot labels in the training set make the trainer multi-label (its per-label surrogate)
        trainer = EASTTrainer(model=model, args=args, train_dataset=data if task == "multilabel" else None)
        assert trainer.multi_label == (task == "multilabel")
        world, rank = trainer.accelerator.num_processes, trainer.accelerator.process_index
        ddp = trainer.accelerator.prepare_model(model)
        device = trainer.args.device
        x, y = data.x.to(device), data.y.to(device)
        reference.to(device)
        result["backend"] = torch.distributed.get_backend()
        n = len(data) // world
        local = {"input_values": x[rank * n : (rank + 1) * n], "labels": y[rank * n : (rank + 1) * n]}
        trainer.compute_loss(ddp, local).backward()  # DDP averages gradients across processes here
        got = [p.grad.detach().clone() for p in model.parameters()]
        if rank == 0:
            if sync:  # single process on the concatenated global batch
                trainer.east_loss(reference(x), y).backward()
                expected = [p.grad for p in reference.parameters()]
            else:  # the mean of the per-process local surrogates' gradients
                expected = None
                for r in range(world):
                    reference.zero_grad()
                    sl = slice(r * n, (r + 1) * n)
                    trainer.east_loss(reference(x[sl]), y[sl]).backward()
                    grads = [p.grad.clone() / world for p in reference.parameters()]
                    expected = grads if expected is None else [a + b for a, b in zip(expected, grads)]
            diff = max((a - b).abs().max().item() for a, b in zip(got, expected))
            result[f"{task} sync={sync}"] = {
                "world_size": world,
                "max_abs_diff": diff,
                "grad_norm": sum(g.norm().item() for g in got),
            }
        torch.distributed.barrier()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(result, f)
    # a handler the run registers (as a Trainer integration or a user does) runs before the process ends
    atexit.register(lambda: open(f"{out_path}.exit-{rank}", "w").close())
    end_launched_process(0)  # the launch's exit, as east-train's


if __name__ == "__main__":
    main(sys.argv[1])
