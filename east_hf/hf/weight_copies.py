"""Copies of a model's weights for the annealing callback (``east_hf.hf.callbacks``): a stage's best weights on the
CPU, the moving average swapped in and out of the model, and the copies a checkpoint carries, loaded back."""

from __future__ import annotations

import os

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

__all__ = ["checkpoint_folder", "cpu_state_dict", "load_weights", "swap_weights"]


def cpu_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s ``state_dict`` on the CPU."""
    return {name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()}


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


def load_weights(path: str, what: str, into: torch.nn.Module | None = None) -> dict[str, torch.Tensor]:
    """The ``state_dict`` saved in ``path`` (loaded ``into`` a module where given), or a one-line ``ValueError``
    naming ``what`` it should hold and the file."""
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
