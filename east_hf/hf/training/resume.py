"""Checks before ``EASTTrainer.train`` runs a step: the checkpoint to resume from, its saved annealing schedule, and
one collated mini-batch of the training data.

``resume_from_checkpoint=True`` (or ``"true"`` / ``"last"``) resumes from the last *complete* checkpoint of
``output_dir`` (``east_hf.hf.training.checkpoints``), skipping each one whose save was cut off or whose files (the
weights, the Trainer's state, the optimizer, scheduler and RNG state, the annealing callback's ``east_stage_best.pt``)
are missing, truncated or corrupt; a path to such a checkpoint is refused in one line naming the file. A complete
checkpoint whose weights hold NaN or inf (valid files of bad values: resuming it would stop at its first step) is
refused in one line naming it, the weight, and the complete checkpoint before it to resume from instead.

``load_renamed_weights`` loads a checkpoint whose weight names differ from the model's own: transformers'
``save_pretrained`` writes some architectures' weights under their original names (its conversion mapping: ViT, DeiT,
BEiT, Swin, ...), while the Trainer's resume and its best-model load read a checkpoint with ``load_state_dict`` on the
file's names, so those weights keep their current values (with a "missing keys" warning) and the model is a mix of two
states. ``from_pretrained`` maps the names; the trainer loads such checkpoints through it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers.trainer import TRAINER_STATE_NAME

from east_hf.hf.training.callbacks import TemperatureAnnealingCallback
from east_hf.hf.training.checkpoints import (
    checkpoint_problem,
    complete_checkpoints,
    last_complete_checkpoint,
    nonfinite_weight,
)
from east_hf.hf.training.evaluation import logits_of, split_inputs

__all__ = ["check_saved_schedule", "first_batch_logits", "load_renamed_weights", "resolve_checkpoint"]

logger = logging.getLogger(__name__)


def resolve_checkpoint(resume: str | bool | None, output_dir: str) -> str | None:
    """The checkpoint ``resume_from_checkpoint`` names: None (start afresh), the last complete checkpoint of
    ``output_dir`` (True, ``"true"``, ``"last"``), or a path, checked to be complete."""
    if isinstance(resume, str) and resume.strip().lower() in ("true", "last", "false", "none", ""):
        resume = resume.strip().lower() in ("true", "last")
    if resume is False or resume is None:
        return None
    if resume is True:
        checkpoint = last_complete_checkpoint(output_dir)
        if checkpoint is None:
            raise ValueError(f"Expected a complete checkpoint-* folder in {output_dir} to resume from, got none")
        _check_finite_weights(checkpoint)
        logger.warning(f"resuming from {checkpoint}")
        return str(checkpoint)
    problem = checkpoint_problem(resume)
    if problem is not None:
        raise ValueError(
            f"Expected resume_from_checkpoint to be a complete checkpoint, got {str(resume)!r}: {problem}; pass "
            "'true' to resume from the last complete one"
        )
    _check_finite_weights(resume)
    return str(resume)


def _check_finite_weights(checkpoint: str | Path) -> None:
    """Refuse a checkpoint whose weights hold NaN or inf, naming the weight and the complete checkpoint before it."""
    bad = nonfinite_weight(checkpoint)
    if bad is None:
        return
    folder = Path(checkpoint)
    earlier = [p for p in complete_checkpoints(folder.parent) if _step(p) < _step(folder)]
    then = (
        f"resume from the checkpoint before it with resume_from_checkpoint={earlier[-1]} "
        f"(east-train: --resume_from_checkpoint {earlier[-1]})"
        if earlier
        else "no complete checkpoint precedes it: train anew (east-train: --overwrite_output_dir true)"
    )
    raise ValueError(f"Expected finite weights in {folder} to resume from, got NaN or inf in {bad}: {then}")


def _step(folder: Path) -> int:
    tail = folder.name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1


def check_saved_schedule(checkpoint: str, annealing: TemperatureAnnealingCallback | None, restores: bool) -> None:
    """Refuse a checkpoint whose saved annealing schedule does not record the cross-entropy weight this run anneals
    (``annealing``; ``restores``: the callback's state is restored from checkpoints): resuming it would restore a
    schedule without the weight and train EAST alone."""
    if annealing is None or annealing.schedule.ce_weight0 == 0 or not restores:
        return
    file = Path(checkpoint) / TRAINER_STATE_NAME
    try:
        state = json.loads(file.read_text())
    except (OSError, ValueError) as e:  # ValueError: JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"Expected a readable JSON {file}, got {type(e).__name__}: {e}") from None
    callbacks = state.get("stateful_callbacks") if isinstance(state, dict) else None
    saved = callbacks.get(type(annealing).__name__) if isinstance(callbacks, dict) else None
    for entry in saved if isinstance(saved, list) else [saved]:
        saved_args = entry.get("args") if isinstance(entry, dict) else None
        schedule = saved_args.get("schedule") if isinstance(saved_args, dict) else None
        if entry and not (isinstance(schedule, dict) and "ce_weight" in schedule):
            raise ValueError(
                f"Expected a checkpoint whose annealing schedule records the cross-entropy weight, got {checkpoint} "
                f"without it (an older east_hf): resume it with east_ce_weight 0, or train anew"
            )


def first_batch_logits(
    model: Any, dataset: Any, collate: Callable[[list], dict], prepare: Callable[[dict], dict]
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The logits and labels of one mini-batch of the training ``dataset`` (two rows, put together by ``collate`` and
    moved to the model's device by ``prepare``: the trainer's data collator and input preparation), computed in eval
    mode without gradients; None for a training set that cannot be indexed. Refuses a batch without labels and
    non-finite logits."""
    if (
        dataset is None
        or isinstance(dataset, torch.utils.data.IterableDataset)  # a stream, even one with a length
        or not hasattr(dataset, "__getitem__")
        or not hasattr(dataset, "__len__")
        or len(dataset) == 0
    ):
        return None
    batch = collate([dataset[i] for i in range(min(2, len(dataset)))])
    if "labels" not in batch:
        raise ValueError(f"Expected a 'labels' column in the training data, got columns {sorted(batch)}")
    inputs, labels = split_inputs(prepare(batch))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = logits_of(model(**inputs))
    finally:
        model.train(was_training)
    if not bool(torch.isfinite(logits).all()):
        raise ValueError(
            "Expected finite logits on the first training batch, got NaN or inf: check the inputs for NaN or inf"
        )
    return logits, labels


def _saved_weight_names(folder: Path) -> set[str] | None:
    """The weight names of a checkpoint's safetensors (one file, or a sharded index); None without them."""
    single, index = folder / "model.safetensors", folder / "model.safetensors.index.json"
    if single.is_file():
        from safetensors import safe_open

        with safe_open(str(single), "pt") as f:
            return set(f.keys())
    if index.is_file():
        return set(json.loads(index.read_text()).get("weight_map", {}))
    return None


def load_renamed_weights(model: Any, checkpoint: str | Path) -> bool:
    """Load ``checkpoint`` into ``model`` through ``type(model).from_pretrained`` where its weight names differ from
    the model's ``state_dict`` names (see the module docstring); returns whether it did. A checkpoint whose names match
    (the Trainer loads it whole), a model without ``from_pretrained`` or a folder without safetensors: nothing done."""
    names = _saved_weight_names(Path(checkpoint))
    own = set(model.state_dict())
    if names is None or names == own or not hasattr(type(model), "from_pretrained"):
        return False
    loaded = type(model).from_pretrained(str(checkpoint))
    model.load_state_dict(loaded.state_dict())
    logger.info(f"loaded {checkpoint} through from_pretrained: its weight names differ from the model's")
    return True
