"""The decision rule ``EASTTrainer.tune_decision_rule`` tunes from validation logits: per-class logit offsets for the
configured metric (multi-label: one offset per label), at the beta the surrogate trains (``east_beta_floor``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from east_hf.core import decision, resolve_beta
from east_hf.core.decision import DecisionRule
from east_hf.core.decision_logits import LogitsFile
from east_hf.core.decision_multilabel import tune_label_offsets
from east_hf.core.loss_registry import SetLoss, floored_beta

__all__ = ["tune_rule"]


def tune_rule(
    logits: LogitsFile | torch.Tensor,
    labels: torch.Tensor,
    args: Any,
    loss: SetLoss,
    id2label: Mapping[int, str] | None = None,
    multi_label: bool = False,
) -> tuple[Any, DecisionRule]:
    """(the beta tuned for, the rule) of ``logits`` (N, C) (a ``LogitsFile``, read a block or a column at a time; a
    multi-label rule reads the whole (N, L) back into memory) and ``labels`` for ``args``' ``east_metric``,
    ``east_beta`` (``loss``'s resolved beta where it has one; by class name through ``id2label``), ``east_average``
    and ``east_pos_label``; a precision-leaning beta is floored at ``east_beta_floor``, as the surrogate trains it."""
    beta = getattr(loss, "beta", None)
    if beta is None:  # a baseline: resolve the configured beta as EASTLoss would
        beta = resolve_beta(args.east_beta, id2label, logits.shape[1])
    beta = floored_beta(beta.tolist() if isinstance(beta, torch.Tensor) else beta, args.east_beta_floor)
    if multi_label:  # one offset per label, tuned on the (N, L) logits in memory
        scores = logits.block(0, logits.shape[0]) if isinstance(logits, LogitsFile) else logits
        settings = dict(beta=beta, average=args.east_average, zero_division=getattr(loss, "zero_division", 0.0))
        return beta, tune_label_offsets(scores, labels, args.east_metric, **settings)
    rule = decision.tune_logit_offsets(
        logits, labels, args.east_metric, beta=beta, average=args.east_average, pos_label=args.east_pos_label
    )
    return beta, rule
