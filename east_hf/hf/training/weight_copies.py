"""Copies of a model's weights for the annealing callback (``east_hf.hf.training.callbacks``): a stage's best weights
on the CPU, the moving average swapped in and out of the model, and the copies a checkpoint carries, saved with their
SHA-256 and loaded back only where it matches."""

from __future__ import annotations

import contextlib
import os

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from east_hf.hf.data.fingerprint import file_sha256
from east_hf.hf.training.checkpoints import CHECKSUM_SUFFIX, checksum_problem

__all__ = [
    "CHECKSUM_SUFFIX",
    "checkpoint_folder",
    "cpu_state_dict",
    "load_trainable",
    "load_weights",
    "save_weights",
    "swap_weights",
    "trainable_state_dict",
]


def cpu_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s ``state_dict`` on the CPU."""
    return {name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()}


def trainable_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy on the CPU of what training changes in ``model``: the parameters that require a gradient and the buffers
    (BatchNorm's running statistics). Frozen parameters are left out: a LoRA model's base (``peft``) or a frozen
    backbone costs nothing here, and a full fine-tune keeps every tensor."""
    return {
        name: value.detach().to("cpu", copy=True)
        for name, value in model.state_dict(keep_vars=True).items()
        if not isinstance(value, torch.nn.Parameter) or value.requires_grad
    }


def load_trainable(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Load ``weights`` (``trainable_state_dict``'s, or a whole ``state_dict``) into ``model``; a ``ValueError`` where
    they name a tensor ``model`` lacks or lack one of its trainable parameters."""
    result = model.load_state_dict(weights, strict=False)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    missing = [name for name in result.missing_keys if name in trainable]
    if result.unexpected_keys or missing:
        raise ValueError(
            f"Expected the weights of {type(model).__name__}'s trainable parameters, got "
            f"{len(result.unexpected_keys)} unknown names ({', '.join(result.unexpected_keys[:3])}) and "
            f"{len(missing)} missing ({', '.join(missing[:3])})"
        )


@torch.no_grad()
def swap_weights(model: torch.nn.Module, other: torch.nn.Module) -> None:
    """Exchange the values of every parameter and buffer of two copies of one architecture, in place (a tensor
    shared by several names, e.g. tied embeddings, once)."""
    theirs = other.state_dict()
    seen = set()
    for name, mine in model.state_dict().items():
        if mine.data_ptr() in seen:
            continue
        seen.add(mine.data_ptr())
        kept = mine.clone()
        mine.copy_(theirs[name])
        theirs[name].copy_(kept)


def checkpoint_folder(args, step: int) -> str:
    """The checkpoint of ``step`` in ``args.output_dir``, where the Trainer saves it."""
    return os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")


def save_weights(weights: dict[str, torch.Tensor], path: str) -> None:
    """``torch.save(weights, path)``, and beside it ``path + CHECKSUM_SUFFIX``: the file's SHA-256 (``sha256sum -c``
    checks it too), which ``load_weights`` compares. An earlier record goes first, so a save cut off leaves no
    record vouching for other bytes."""
    record = path + CHECKSUM_SUFFIX
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record)
    torch.save(weights, path)
    tmp = f"{record}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{file_sha256(path)}  {os.path.basename(path)}\n")
    os.replace(tmp, record)


def load_weights(path: str, what: str, into: torch.nn.Module | None = None) -> dict[str, torch.Tensor]:
    """The ``state_dict`` saved in ``path`` (loaded ``into`` a module where given), or a one-line ``ValueError``
    naming ``what`` it should hold and the file: one that does not load, or whose bytes differ from the SHA-256
    ``save_weights`` recorded beside it."""
    problem = checksum_problem(path)
    if problem is not None:
        raise ValueError(f"Expected {what} in {path}, got {problem}; resume from another checkpoint")
    try:
        weights = torch.load(path, map_location="cpu", weights_only=True)
        if into is not None:
            into.load_state_dict(weights)
    except Exception as e:  # RuntimeError (PytorchStreamReader, another model's names), pickle's and zipfile's errors
        message = " ".join(str(e).split()) or type(e).__name__
        raise ValueError(
            f"Expected {what} in {path}, got a file that does not load ({message}); resume from another checkpoint"
        ) from None
    return weights
