"""Run by ``accelerate launch --config_file`` (accelerate's FSDP config: ``fsdp_version: 2``,
``cpu_ram_efficient_loading: true``) on two CPU processes: an EASTConfig, then a fine-tune's model loaded as
east-train loads it (a headless checkpoint, argv[1], whose new classification head is initialised), then a few
EASTTrainer steps. Rank 0 writes the meta parameters each process held and the final evaluation as JSON to argv[2]."""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from helpers import east_args  # noqa: E402

from east_hf import EASTTrainer  # noqa: E402
from east_hf.scripts.launch_exit import end_launched_process  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    """The class is the first token (ids 1..3) of an 8-token sequence."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 3, (n,), generator=g)
        self.ids = torch.randint(4, 50, (n, 8), generator=g)
        self.ids[:, 0] = self.labels + 1

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(8, dtype=torch.long), "labels": self.labels[i]}


def main(checkpoint: str, out_path: str) -> None:
    from transformers import AutoModelForSequenceClassification

    args = east_args(out_path + ".run", max_steps=4, ddp_find_unused_parameters=False)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint, num_labels=3)
    meta = [name for name, p in model.named_parameters() if p.is_meta]
    trainer = EASTTrainer(model, args, train_dataset=Tokens(64, 0), eval_dataset=Tokens(32, 1))
    trainer.train()
    metrics = trainer.evaluate()
    every_meta = [None] * trainer.accelerator.num_processes
    torch.distributed.all_gather_object(every_meta, meta)
    if trainer.is_world_process_zero():
        with open(out_path, "w") as f:
            json.dump({"meta": every_meta, "eval_loss": metrics["eval_loss"]}, f)
    end_launched_process(0)  # the launch's exit, as east-train's


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
