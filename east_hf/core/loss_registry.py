"""Losses of a whole set: EASTLoss, 1 - M(C_T), and the paper's baselines, behind one interface and one registry.

Every loss is a ``SetLoss`` (``east_hf.core.set_loss``): additive statistics of a batch, summed over batches and
processes, and a loss of those statistics.

- ``EASTLoss`` (``east_hf.core.east_loss``): for the built-in metrics the (3, C) counts of the soft confusion matrix
  C_T (TP, support, predicted), for a metric callable C_T itself (C, C); the loss 1 - M(C_T).
- ``CrossEntropySetLoss`` (``east_hf.core.baselines``): (sum of cross-entropies, count); the loss is their ratio, the
  mean cross-entropy. With class weights it is ``wce`` (inverse training-class frequency), with logit adjustment
  ``la`` (Menon et al. 2021).
- ``SoftDiceLoss`` (``east_hf.core.baselines``): per class (sum p y, sum p^2, sum y); the loss 1 - mean_k Dice_k
  (Milletari et al., 2016).
- ``FocalLoss`` and ``LDAMLoss`` (``east_hf.core.long_tail_losses``): focal loss (Lin et al., 2017) and LDAM with
  deferred re-weighting (Cao et al., 2019), the mean of a per-sample loss as cross-entropy.
- ``MixedSetLoss`` (here): EAST plus a weighted cross-entropy (both statistics side by side), for an annealed
  cross-entropy weight; multiclass (``EASTLoss`` + ``CrossEntropySetLoss``) or multi-label (``MultiLabelEASTLoss``
  + ``BinaryCrossEntropySetLoss``).
- Multi-label (``east_hf.core.multilabel``, ``east_hf.core.multilabel_losses``): ``MultiLabelEASTLoss``,
  ``BinaryCrossEntropySetLoss`` (``ce``; ``wce`` with ``pos_weight``, ``la`` with a per-label logit adjustment) and
  ``AsymmetricLoss`` (``asl``, Ridnik et al., 2021), in the registry ``MULTILABEL_LOSSES``.

``build_loss(name, ...)`` makes one by its ``EASTConfig.east_loss`` name (the registry ``LOSSES``, or with
``multi_label=True`` ``MULTILABEL_LOSSES``). Pure torch: nothing from transformers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from east_hf.core.baselines import (
    CrossEntropySetLoss,
    PerSampleSetLoss,
    SoftDiceLoss,
    class_weights_from_counts,
    logit_adjustment_from_counts,
)
from east_hf.core.east_loss import EASTLoss, floored_beta
from east_hf.core.long_tail_losses import FocalLoss, LDAMLoss, effective_number_weights, ldam_margins
from east_hf.core.multilabel_losses import (
    AsymmetricLoss,
    BinaryCrossEntropySetLoss,
    MultiLabelEASTLoss,
    label_logit_adjustment,
    label_pos_weight,
)
from east_hf.core.set_loss import SetLoss
from east_hf.core.validation import check_choice, check_range

__all__ = [
    "LOSSES",
    "MULTILABEL_LOSSES",
    "MULTILABEL_PRIOR_LOSSES",
    "PRIOR_LOSSES",
    "AsymmetricLoss",
    "BinaryCrossEntropySetLoss",
    "CrossEntropySetLoss",
    "EASTLoss",
    "FocalLoss",
    "LDAMLoss",
    "LossSpec",
    "MixedSetLoss",
    "MultiLabelEASTLoss",
    "SecondStage",
    "SetLoss",
    "SoftDiceLoss",
    "build_loss",
    "class_weights_from_counts",
    "describe_losses",
    "floored_beta",
    "ldam_before_deferral",
    "logit_adjustment_from_counts",
    "loss_spec",
]


@dataclass(frozen=True)
class SecondStage:
    """How a loss trains as the second of two stages: the annealing callback trains ``first(loss)`` until its own
    early stopping, then the loss itself (LDAM-DRW: LDAM, then its deferred re-weighting)."""

    first: Callable[[SetLoss], SetLoss]  # the loss of the first stage, made from the built loss
    what: str  # what the second stage adds, in the config's errors: "its deferred re-weighting"
    first_description: str  # the first stage, in the model card's words


@dataclass(frozen=True)
class LossSpec:
    """One entry of the loss registry ``LOSSES``: how ``build_loss`` makes the loss, the one line that
    ``EASTConfig``'s help, east-compare and the model card describe it with (``{metric}``: the metric EAST trains),
    and the rules of training it, which the config, the builder and the card ask here:

    - ``needs_class_counts``: built from the training split's class counts (its priors).
    - ``anneals_temperature``: EAST's surrogate at a temperature the annealing lowers stage by stage; it takes the
      ``east_*`` surrogate settings, the annealed cross-entropy weight, the confusion memory and the learning rate's
      decay per stage. A loss without it reports no temperature and trains one stage of early stopping (after a
      warm start or a first stage, where the spec says).
    - ``warm_start``: trained after the configured cross-entropy warm start (``east_warm_start``, ``east_ce_loss``).
    - ``second_stage``: a ``SecondStage``, or None for a loss trained from the start.
    """

    name: str
    builder: Callable[..., SetLoss]  # (ignore_index, class_counts, **east_settings) -> the loss
    description: str
    needs_class_counts: bool = False
    anneals_temperature: bool = False
    warm_start: bool = False
    second_stage: SecondStage | None = None

    def describe(self, metric: str = "M") -> str:
        """The description, with ``metric`` for the metric trained (``describe("fbeta")``: 1 - soft fbeta)."""
        return self.description.format(metric=metric)


def _east(ignore_index: int | None, class_counts: Any = None, **east_settings: Any) -> SetLoss:
    return EASTLoss(ignore_index=ignore_index, **east_settings)


def _cross_entropy(name: str) -> Callable[..., SetLoss]:
    """The builder of ``ce``, ``wce`` (class weights from the counts) or ``la`` (logit adjustment from the counts)."""

    def build(ignore_index: int | None, class_counts: Any = None, **_: Any) -> SetLoss:
        loss = CrossEntropySetLoss(
            ignore_index=ignore_index,
            class_weight=class_weights_from_counts(class_counts) if name == "wce" else None,
            logit_adjustment=logit_adjustment_from_counts(class_counts) if name == "la" else None,
        )
        loss.name = name
        return loss

    return build


def _dice(ignore_index: int | None, class_counts: Any = None, **_: Any) -> SetLoss:
    return SoftDiceLoss(ignore_index=ignore_index)


def _focal(ignore_index: int | None, class_counts: Any = None, **_: Any) -> SetLoss:
    return FocalLoss(ignore_index=ignore_index)


def _ldam(ignore_index: int | None, class_counts: Any = None, **_: Any) -> SetLoss:
    """LDAM after its deferral: the margins and the re-weighting, both from the training split's class counts."""
    return LDAMLoss(ldam_margins(class_counts), ignore_index, class_weight=effective_number_weights(class_counts))


def ldam_before_deferral(loss: LDAMLoss) -> LDAMLoss:
    """The LDAM of the stage before LDAM-DRW's deferred re-weighting: ``loss``'s margins, without class weights."""
    return LDAMLoss(loss.margins, loss.ignore_index, loss.scale)


LOSSES: dict[str, LossSpec] = {
    spec.name: spec
    for spec in (
        LossSpec("east", _east, "EAST surrogate, 1 - soft {metric}", anneals_temperature=True, warm_start=True),
        LossSpec("ce", _cross_entropy("ce"), "cross-entropy (baseline)"),
        LossSpec(
            "wce",
            _cross_entropy("wce"),
            "class-weighted cross-entropy, inverse training-class frequency (baseline)",
            needs_class_counts=True,
        ),
        LossSpec(
            "la",
            _cross_entropy("la"),
            "logit-adjusted cross-entropy, tau = 1 (Menon et al., 2021; baseline)",
            needs_class_counts=True,
        ),
        LossSpec("dice", _dice, "soft Dice (baseline)", warm_start=True),
        LossSpec("focal", _focal, "focal loss, gamma = 2 (Lin et al., 2017; baseline)"),
        LossSpec(
            "ldam",
            _ldam,
            "LDAM-DRW: LDAM until its early stopping, then re-weighted by effective numbers (Cao et al., 2019; "
            "baseline)",
            needs_class_counts=True,
            second_stage=SecondStage(
                ldam_before_deferral,
                "its deferred re-weighting",
                "LDAM without re-weighting until its own early stopping (the deferral of LDAM-DRW)",
            ),
        ),
    )
}
"""The loss registry, by ``EASTConfig.east_loss`` name: EAST and the paper's baselines."""
PRIOR_LOSSES = tuple(name for name, spec in LOSSES.items() if spec.needs_class_counts)


def _multilabel_east(ignore_index: int | None, label_priors: Any = None, **east_settings: Any) -> SetLoss:
    if "num_classes" in east_settings:  # the multiclass name of L
        east_settings["num_labels"] = east_settings.pop("num_classes")
    return MultiLabelEASTLoss(ignore_index=ignore_index, **east_settings)


def _bce(name: str):
    """The builder of ``ce``, ``wce`` (pos_weight from the priors) or ``la`` (logit adjustment from the priors)."""

    def build(ignore_index: int | None, label_priors: Any = None, **_: Any) -> SetLoss:
        loss = BinaryCrossEntropySetLoss(
            ignore_index=ignore_index,
            pos_weight=label_pos_weight(label_priors) if name == "wce" else None,
            logit_adjustment=label_logit_adjustment(label_priors) if name == "la" else None,
        )
        loss.name = name
        return loss

    return build


def _asl(ignore_index: int | None, label_priors: Any = None, **_: Any) -> SetLoss:
    return AsymmetricLoss(ignore_index=ignore_index)


def _binary_focal(ignore_index: int | None, label_priors: Any = None, **_: Any) -> SetLoss:
    """Focal loss per label: the asymmetric loss with both gammas 2 and no clip is binary focal loss (no alpha)."""
    loss = AsymmetricLoss(ignore_index=ignore_index, gamma_neg=2.0, gamma_pos=2.0, clip=0.0)
    loss.name = "focal"
    return loss


MULTILABEL_LOSSES: dict[str, LossSpec] = {
    spec.name: spec
    for spec in (
        LossSpec(
            "east",
            _multilabel_east,
            "EAST surrogate, 1 - soft {metric} of per-label soft predictions",
            anneals_temperature=True,
            warm_start=True,
        ),
        LossSpec("ce", _bce("ce"), "binary cross-entropy (baseline)"),
        LossSpec(
            "wce",
            _bce("wce"),
            "binary cross-entropy with pos_weight = neg / pos of each label in training (baseline)",
            needs_class_counts=True,
        ),
        LossSpec(
            "la",
            _bce("la"),
            "logit-adjusted binary cross-entropy, log(pi / (1 - pi)) per label (Menon et al., 2021; baseline)",
            needs_class_counts=True,
        ),
        LossSpec("asl", _asl, "asymmetric loss, gamma_neg 4, gamma_pos 0, clip 0.05 (Ridnik et al., 2021; baseline)"),
        LossSpec("focal", _binary_focal, "binary focal loss per label, gamma = 2 (Lin et al., 2017; baseline)"),
    )
}
"""The multi-label loss registry, by the multiclass registry's names (``focal``: per label) plus ``asl``
(``needs_class_counts``: built from the training split's ``label_priors``)."""
MULTILABEL_PRIOR_LOSSES = tuple(name for name, spec in MULTILABEL_LOSSES.items() if spec.needs_class_counts)


def loss_spec(name: str, multi_label: bool = False) -> LossSpec:
    """The registry entry of the loss ``name``: ``LOSSES``'s, or ``MULTILABEL_LOSSES``'s for ``multi_label`` or a
    name only that registry has. A name in both follows the same rules in both (the fields other than ``builder``
    and ``description`` agree), so where the task is not known yet (``EASTConfig``) either entry answers.

    >>> loss_spec("east").anneals_temperature, loss_spec("dice").warm_start, loss_spec("asl").warm_start
    (True, True, False)
    """
    registry = MULTILABEL_LOSSES if (multi_label and name in MULTILABEL_LOSSES) or name not in LOSSES else LOSSES
    return registry[check_choice("a loss", name, tuple(dict.fromkeys([*LOSSES, *MULTILABEL_LOSSES])))]


def describe_losses(metric: str = "M") -> str:
    """Every loss name with its description, on one line (the help of ``east_loss``).

    >>> describe_losses().split("; ")[:2]
    ['east: EAST surrogate, 1 - soft M', 'ce: cross-entropy (baseline)']
    """
    return "; ".join(f"{name}: {spec.describe(metric)}" for name, spec in LOSSES.items())


def build_loss(
    name: str,
    ignore_index: int | None = -100,
    class_counts: Sequence[int] | torch.Tensor | None = None,
    *,
    multi_label: bool = False,
    label_priors: Sequence[float] | torch.Tensor | None = None,
    **east_settings: Any,
) -> SetLoss:
    """The loss named ``name`` (``LOSSES``, or ``MULTILABEL_LOSSES`` with ``multi_label=True``). ``east_settings``
    (``metric``, ``beta``, ...) go to ``EASTLoss`` (``MultiLabelEASTLoss``, which takes ``num_classes`` as
    ``num_labels``); ``wce`` and ``la`` need the training split's ``class_counts`` (or class priors: any scale gives
    the same loss), or for multi-label its ``label_priors`` (L,), each label's positive rate.

    - ``wce``: cross-entropy weighted by ``class_weights_from_counts(class_counts)``; multi-label: binary
      cross-entropy with ``pos_weight`` = neg_k / pos_k (``label_pos_weight``).
    - ``la``: cross-entropy of ``logits + log(prior)`` (``logit_adjustment_from_counts``, tau = 1); predictions
      stay the argmax of the model's logits, which is the logit-adjusted loss's Bayes-optimal balanced rule;
      multi-label: binary cross-entropy of ``logits + log(pi_k / (1 - pi_k))`` (``label_logit_adjustment``).
    - ``asl`` (multi-label only): ``AsymmetricLoss`` with the paper's defaults; ``dice`` and ``ldam`` are multiclass
      only.
    - ``focal``: ``FocalLoss`` (gamma 2); multi-label: binary focal loss per label.
    - ``ldam``: ``LDAMLoss`` with ``ldam_margins(class_counts)`` and the deferred re-weighting
      (``effective_number_weights``); the stage before the deferral trains ``ldam_before_deferral`` of it.

    >>> build_loss("ce")
    CrossEntropySetLoss()
    >>> [round(w, 4) for w in build_loss("wce", class_counts=[90, 10]).class_weight.tolist()]
    [0.5556, 5.0]
    >>> build_loss("wce", multi_label=True, label_priors=[0.2, 0.5]).pos_weight.tolist()
    [4.0, 1.0]
    """
    if multi_label:
        if name in LOSSES and name not in MULTILABEL_LOSSES:
            raise ValueError(
                f"Expected a multi-label loss in {tuple(MULTILABEL_LOSSES)}, got {name!r} (multiclass only)"
            )
        spec = MULTILABEL_LOSSES[check_choice("a multi-label loss", name, tuple(MULTILABEL_LOSSES))]
        if spec.needs_class_counts and label_priors is None:
            raise ValueError(
                f"Expected the training split's label_priors (L,) for multi-label loss {name!r}, got None"
            )
        return spec.builder(ignore_index, label_priors, **east_settings)
    if name == "asl":
        raise ValueError(f"Expected a loss in {tuple(LOSSES)}, got 'asl' (the asymmetric loss is multi-label only)")
    spec = LOSSES[check_choice("a loss", name, tuple(LOSSES))]
    if spec.needs_class_counts and class_counts is None:
        raise ValueError(f"Expected the training split's class_counts for loss {name!r}, got None")
    return spec.builder(ignore_index, class_counts, **east_settings)


class MixedSetLoss(SetLoss):
    """``EASTLoss`` plus ``weight`` times mean cross-entropy: the loss of an annealed cross-entropy weight.
    ``cross_entropy``: plain by default, or a class-weighted or logit-adjusted one (``build_loss("la", ...)``), or any
    other mean of per-sample losses (``PerSampleSetLoss``: ``build_loss("ldam", ...)``, LDAM re-weighted).
    Multi-label: ``MultiLabelEASTLoss`` plus a ``BinaryCrossEntropySetLoss`` (plain by default, or ``wce`` / ``la``
    from ``build_loss(..., multi_label=True)``), its statistics (4, L + 1) with the same extra row.

    Statistics: EAST's (its (3, C) counts or (C, C) matrix) with one more row, the cross-entropy's (sum, count) padded
    with zeros to C; both additive, so the set's loss is exact across batches and processes as for the two losses
    alone. ``set_stage`` takes each stage's weight from the annealing schedule (``AnnealingSchedule.ce_weight``:
    w_k = w0 * d^k), so early stages keep cross-entropy's per-sample gradients and late ones train the metric alone.
    ``weight = 0`` is EAST.

    >>> east = EASTLoss("fbeta", temperature=0.2)
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5]]), torch.tensor([0, 1, 1])
    >>> mixed = MixedSetLoss(east, weight=0.5)
    >>> torch.isclose(mixed(logits, labels), east(logits, labels) + 0.5 * F.cross_entropy(logits, labels)).item()
    True
    """

    name = "east"

    def __init__(
        self,
        east: EASTLoss | MultiLabelEASTLoss,
        weight: float = 1.0,
        cross_entropy: PerSampleSetLoss | BinaryCrossEntropySetLoss | None = None,
    ):
        super().__init__(east.ignore_index)
        if not isinstance(east, (EASTLoss, MultiLabelEASTLoss)):
            raise TypeError(f"Expected east as an EASTLoss or a MultiLabelEASTLoss, got {type(east).__name__}")
        multi_label = isinstance(east, MultiLabelEASTLoss)
        kind = BinaryCrossEntropySetLoss if multi_label else PerSampleSetLoss
        if cross_entropy is not None and not isinstance(cross_entropy, kind):
            raise TypeError(
                f"Expected cross_entropy as a {kind.__name__} beside a {type(east).__name__}, got "
                f"{type(cross_entropy).__name__}"
            )
        self.east = east
        default = BinaryCrossEntropySetLoss if multi_label else CrossEntropySetLoss
        self.cross_entropy = cross_entropy or default(ignore_index=east.ignore_index)
        self.weight = weight

    @property
    def weight(self) -> float:
        return self._weight

    @weight.setter
    def weight(self, value: float) -> None:
        self._weight = check_range("ce_weight", value, 0, math.inf)

    def extra_repr(self) -> str:
        return f"weight={self._weight:.4g}"

    @property
    def soft_metric_key(self) -> str:
        return self.east.soft_metric_key

    def set_stage(self, temperature: float, ce_weight: float = 0.0) -> None:
        self.east.set_stage(temperature)
        self.weight = ce_weight

    def statistics(self, logits, labels, sample_weight=None, *, validate_args=True):
        east = self.east.statistics(logits, labels, sample_weight, validate_args=validate_args)
        ce = self.cross_entropy.statistics(logits, labels, sample_weight, validate_args=validate_args)
        ce = F.pad(ce.to(east.dtype), (0, east.shape[-1] - 2)).unsqueeze(0)  # (1, C): (sum, count, 0, ...)
        return torch.cat([east, ce])  # (4, C) or (C + 1, C); multi-label (5, L + 1)

    @property
    def label_fault(self) -> torch.Tensor | None:
        """EAST's recorded label fault (the cross-entropy sees the same labels)."""
        return self.east.label_fault

    def raise_if_label_fault(self, fault: int | torch.Tensor | None = None) -> None:
        self.east.raise_if_label_fault(fault)

    def _split(self, stats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(EAST's statistics, the cross-entropy's (sum, count)) of the statistics."""
        return stats[:-1], stats[-1, :2]

    def with_memory(self, stats: torch.Tensor) -> torch.Tensor:
        """EAST's memory added to EAST's statistics; the cross-entropy's sum and count stay the batch's."""
        east, ce = self._split(stats)
        return torch.cat([self.east.with_memory(east), stats[-1:]])

    def loss_and_soft_metric(self, stats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss and the soft metric of the EAST part alone (1 - its loss, without the cross-entropy)."""
        confmat, ce = self._split(stats)
        east = self.east.loss_from_statistics(confmat)
        loss = east if self._weight == 0 else east + self._weight * self.cross_entropy.loss_from_statistics(ce)
        return loss, 1.0 - east.detach()

    def loss_from_statistics(self, stats):
        return self.loss_and_soft_metric(stats)[0]

    def is_empty(self, stats):
        confmat, ce = self._split(stats)
        return self.east.is_empty(confmat) & self.cross_entropy.is_empty(ce)
