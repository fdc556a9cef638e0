"""Run under `torchrun --nproc_per_node N` with argv[1] "ddp", "fsdp" (FSDP2) or "fsdp1" (any + "_norestore":
without the per-stage restore): EASTTrainer with annealing on N processes, the FSDP ones asking for the Trainer's
FSDP settings; rank 0 writes the final evaluation, the wrapper class and the annealing's last stage as JSON to argv[2].
On CPU processes (gloo) by default, as tests/test_sharding.py runs it; with ``EAST_DIST_CHECK_GPU=1`` each rank on
its own GPU (tests/test_gpu.py)."""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from helpers import PlainClassifier, annealer, blobs, east_args  # noqa: E402

from east_hf import EASTTrainer  # noqa: E402
from east_hf.scripts.launch_exit import end_launched_process  # noqa: E402

GPU = os.environ.get("EAST_DIST_CHECK_GPU") == "1"


def main(mode: str, out_path: str) -> None:
    torch.manual_seed(0)
    version = {"fsdp_version": 1} if "fsdp1" in mode else {"fsdp_version": 2}
    fsdp = {"fsdp": "full_shard", "fsdp_config": {**version, "min_num_params": 0}} if "fsdp" in mode else {}
    args = east_args(
        out_path + ".run", east_annealing=True, eval_strategy="steps", eval_steps=4, save_strategy="no", max_steps=60,
        learning_rate=3e-2, east_patience=1, east_warm_start="none", use_cpu=not GPU,
        east_restore_best_per_stage="norestore" not in mode, **fsdp,
    )  # fmt: skip
    trainer = EASTTrainer(PlainClassifier(), args, train_dataset=blobs(96, 0), eval_dataset=blobs(48, 1))
    trainer.train()
    metrics = trainer.evaluate()
    if trainer.is_world_process_zero():
        result = {
            "metrics": {k: v for k, v in metrics.items() if k in ("eval_loss", "eval_fbeta", "eval_mcc")},
            "wrapper": type(trainer.model_wrapped).__name__,
            "world_size": trainer.accelerator.num_processes,
            "stage": annealer(trainer).schedule.stage,
        }
        with open(out_path, "w") as f:
            json.dump(result, f)
    end_launched_process(0)  # the launch's exit, as east-train's


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
