"""Whether a network's output has stopped depending on its input: the spread across validation rows of what its
classification head reads, against that spread at initialisation.

A network trained from scratch can lose the input in its first epoch: on long-tailed text whose batches hold many
identical short texts (grouped by length) every row's head input becomes the same vector, and the network predicts
one class whatever it reads. Plain cross-entropy recovers from that state; logit-adjusted cross-entropy does not,
because an input-independent network sits at its constant optimum (``softmax(f + log prior)`` equals the prior when
the logits f are equal), where it gets no coherent gradient. Predicting one class is not the sign: early training
does that too, with a head input that still varies from row to row and grows more varied. The sign is the spread
itself: the head input's standard deviation across rows, averaged over its features, falls far below the untrained
network's (to a tenth of it where the collapse was traced, while a network that learns keeps or grows it).
``COLLAPSE_RATIO`` is the line between them; ``EASTTrainer`` measures both spreads, and the annealing callback
restarts a collapsed warm start from the initial weights (``east_ce_fallback``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from east_hf.hf.models import classifier_head
from east_hf.hf.training.evaluation import split_inputs

__all__ = ["COLLAPSE_RATIO", "SPREAD_ROWS", "head_input_spread"]

# A warm start's head input whose spread fell below this fraction of the untrained network's spread has lost the input
# (traced: 0.07-0.15 collapsed, 1.5 or more learning).
COLLAPSE_RATIO = 0.25
# How many validation rows (all processes together) the spread is measured on: the same leading rows each time.
SPREAD_ROWS = 1024


def _head_input(head: nn.Module, inputs: tuple) -> torch.Tensor:
    """The head's input as (N, D): a 1x1 convolution's feature map averaged over its positions (which commutes with
    the convolution, as the global pool after it)."""
    x = inputs[0].detach()
    return x.flatten(2).mean(-1) if x.ndim > 2 else x.reshape(-1, x.shape[-1])


def head_input_spread(
    model: nn.Module, batches: Any, prepare: Callable[[dict], dict], accelerator: Any, rows: int = SPREAD_ROWS
) -> float | None:
    """The mean over features of the standard deviation across rows of the input of ``model``'s classification head
    (``east_hf.hf.models.classifier_head``), on the leading rows of ``batches`` (a prepared evaluation data loader:
    each process's own rows) until ``rows`` rows of all processes, in eval mode without gradients; the sums are added
    across processes, so every process returns the same value. None for a model without a head found there or a
    loader without rows. Every process runs the same number of batches (a sharded model's forward is collective)."""
    try:
        head = classifier_head(accelerator.unwrap_model(model))
    except ValueError:
        return None
    per_batch = max(1, getattr(batches, "total_batch_size", None) or getattr(batches, "batch_size", None) or 1)
    try:
        wanted = min(len(batches), math.ceil(rows / per_batch))
    except TypeError:  # a loader without a length
        wanted = math.ceil(rows / per_batch)
    sums: list[torch.Tensor] = []
    hook = head.register_forward_pre_hook(lambda _, inputs: sums.append(_sums(_head_input(head, inputs))))
    was_training = model.training
    model.eval()
    # A data loader's iterator draws its base seed from torch's generator: forked, so that measuring leaves training
    # on the random stream it would have had (a run that never falls back trains the same with the measurement).
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            for i, batch in enumerate(batches):
                if i >= wanted:
                    break
                model(**split_inputs(prepare(batch))[0])
    finally:
        hook.remove()
        model.train(was_training)
    if not sums:
        return None
    total = torch.stack(sums).sum(0)
    if accelerator.num_processes > 1:
        total = accelerator.reduce(total, "sum")
    n, first, second = total[0, 0], total[1], total[2]
    if n < 2:
        return None
    variance = (second / n - (first / n) ** 2).clamp_min(0) * n / (n - 1)
    return float(variance.sqrt().mean())


def _sums(x: torch.Tensor) -> torch.Tensor:
    """(3, D) float64: the row count (in every column), the sum and the sum of squares of ``x`` (N, D) over rows."""
    x = x.double()
    return torch.stack([torch.full_like(x[0], len(x)), x.sum(0), x.pow(2).sum(0)])
