"""Bytes the annealing keeps as each stage's best state (``trainable_state_dict``: the parameters that require a
gradient, and the buffers), for a full fine-tune and a LoRA fine-tune of the same checkpoint, against the model's size;
with ``--fsdp`` under torchrun, for the model sharded by torch's FSDP2 (``fully_shard`` on each layer), per process.

    python benchmarks/stage_state_memory.py runs/models/all-MiniLM-L6-v2 --num_labels 5 --lora_r 8
    torchrun --nproc_per_node 2 benchmarks/stage_state_memory.py runs/models/all-MiniLM-L6-v2 --num_labels 5 --fsdp

No training: the copy holds the same tensors at every stage, so its size is the model's and the adapter's. Prints a
Markdown table (the docs' "Large models" page cites it).
"""

from __future__ import annotations

import argparse

from transformers import AutoModelForSequenceClassification

from east_hf.hf.models.lora import lora_model
from east_hf.hf.training.weight_copies import trainable_state_dict


def _bytes(tensors) -> int:
    """Bytes this process holds of ``tensors`` (a DTensor's local shard)."""
    return sum(t.numel() * t.element_size() for t in (getattr(t, "to_local", lambda t=t: t)() for t in tensors))


def _fsdp(args) -> None:
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo")
    model = AutoModelForSequenceClassification.from_pretrained(args.checkpoint, num_labels=args.num_labels)
    total = _bytes(model.state_dict().values())
    for layer in model.base_model.encoder.layer:
        fully_shard(layer)
    fully_shard(model)
    kept = _bytes(trainable_state_dict(model).values())
    rank, world = dist.get_rank(), dist.get_world_size()
    for r in range(world):  # one row per process, in order
        if r == rank:
            print(
                f"| FSDP2, process {rank} of {world} | {total / 2**20:.1f} MiB | {kept / 2**20:.2f} MiB "
                f"| {kept / total:.2%} |"
            )
        dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--num_labels", type=int, default=5)
    parser.add_argument("--lora_r", type=int, default=8)
    parser.add_argument("--fsdp", action="store_true", help="under torchrun: the model sharded by FSDP2")
    args = parser.parse_args()
    if args.fsdp:
        return _fsdp(args)
    rows = []
    for name, lora in (("full fine-tune", False), (f"LoRA r={args.lora_r}", True)):
        model = AutoModelForSequenceClassification.from_pretrained(args.checkpoint, num_labels=args.num_labels)
        if lora:
            model = lora_model(model, r=args.lora_r, alpha=2 * args.lora_r, dropout=0.05, text=True)
        kept = _bytes(trainable_state_dict(model).values())
        total = _bytes(model.state_dict().values())
        rows.append(f"| {name} | {total / 2**20:.1f} MiB | {kept / 2**20:.2f} MiB | {kept / total:.2%} |")
    print("| run | model state | kept per stage best | share |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
