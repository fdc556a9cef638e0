"""The builder: from an ``EASTConfig`` and the facts of the data, everything ``EASTTrainer`` trains with.

``EASTConfig`` is data (fields, their docs, their validation). This module turns it into objects, once, when the
trainer is made: the loss ``east_loss`` names, the cross-entropy of the warm start and of the annealed weight (and
EAST's mix with it), the ``AnnealingSchedule`` and its ``TemperatureAnnealingCallback``, and the hard metrics of
the configured target, which an evaluation reports (beside the keys of a ``compute_metrics`` the user passes). What the
config cannot know comes from the data: the number of classes and their names (the model's ``config``), the training
split's class counts (the priors of ``wce`` and ``la``), whether the training set is a stream, and the size of the
validation set (the default across-stage threshold). Control flows one way: trainer -> builder -> core; nothing here
calls back into the trainer.

Multi-label classification (the model's ``config.problem_type == "multi_label_classification"``, or training labels
that are multi-hot rows) gets the multi-label counterpart of every part under the same names: EAST's per-label
surrogate, binary cross-entropy for ``ce`` (``wce``: its ``pos_weight`` from each label's positive rate; ``la``: the
logits adjusted by each label's prior log-odds), ``asl``, and hard metrics over labels.

>>> from east_hf.hf.config.east_config import EASTConfig
>>> args = EASTConfig(output_dir="out", report_to="none")
>>> schedule = build_schedule(args, eval_size=400)
>>> schedule.temperature, schedule.warm_start, schedule.ce_weight, schedule.anneal_threshold
(0.2, 'ce', 1.0, 0.005)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from east_hf.core.annealing import AnnealingSchedule
from east_hf.core.classes import resolve_beta, resolve_class_priors
from east_hf.core.loss_registry import (
    MULTILABEL_LOSSES,
    PRIOR_LOSSES,
    MixedSetLoss,
    SetLoss,
    build_loss,
    loss_spec,
)
from east_hf.core.monitor_keys import monitor_mode
from east_hf.hf.config.east_config import EASTConfig
from east_hf.hf.config.fields import LOSS_FIELDS, SCHEDULE_FIELDS
from east_hf.hf.metrics.compute import ComputeMetrics
from east_hf.hf.metrics.multilabel import MultiLabelComputeMetrics
from east_hf.hf.training.callbacks import TemperatureAnnealingCallback
from east_hf.hf.training.dataset_stats import (
    absent_classes,
    column_class_counts,
    dataset_length,
    has_multi_hot_labels,
    labels_without_transforms,
    training_class_counts,
    training_label_counts,
    validation_size,
)

__all__ = [
    "EASTComponents",
    "anneal_threshold",
    "build_annealing_callback",
    "build_ce_loss",
    "build_components",
    "build_target_metrics",
    "build_east_loss",
    "build_schedule",
    "class_counts",
    "class_priors",
    "falls_back",
    "is_multi_label",
    "label_priors",
    "multi_hot_datasets",
    "needs_class_counts",
    "trains_cross_entropy",
]

logger = logging.getLogger(__name__)


@dataclass
class EASTComponents:
    """What ``build_components`` makes for one trainer.

    Attributes:
        loss: the loss ``east_loss`` names (``EASTLoss``, or a baseline ``SetLoss``).
        ce_loss: the cross-entropy of the warm start and of the annealed weight (``east_ce_loss``); for a loss
            trained in two stages (``LossSpec.second_stage``: ``ldam``), the first stage's loss.
        mixed_loss: EAST plus the annealed cross-entropy (``MixedSetLoss``), for the stages whose weight is > 0;
            None for the baselines.
        annealing: the ``TemperatureAnnealingCallback`` to install, or None (``east_annealing=False``, or the caller
            brings its own).
        compute_metrics: the hard metrics of the configured target, or None where the caller passed its own (or the
            number of classes is unknown until the first evaluation batch).
        num_classes: C (or L labels) from the model's ``config.num_labels``, or None.
        multi_label: whether the task is multi-label (``is_multi_label``).
        target_metrics: the hard metrics of the configured target whatever the caller passed (counted beside a
            ``compute_metrics`` of the user's), or None where the number of classes is unknown.
        fallback_loss, fallback_mixed_loss: what a run trains after falling back (``east_ce_fallback``): the plain
            cross-entropy and EAST's mix with it; where it cannot fall back, ``ce_loss`` and ``mixed_loss``.
    """

    loss: SetLoss
    ce_loss: SetLoss
    mixed_loss: MixedSetLoss | None
    annealing: TemperatureAnnealingCallback | None
    compute_metrics: ComputeMetrics | MultiLabelComputeMetrics | None
    num_classes: int | None
    multi_label: bool = False
    target_metrics: ComputeMetrics | MultiLabelComputeMetrics | None = None
    fallback_loss: SetLoss | None = None  # None: ce_loss
    fallback_mixed_loss: MixedSetLoss | None = None  # None: mixed_loss

    def __post_init__(self):
        self.fallback_loss = self.ce_loss if self.fallback_loss is None else self.fallback_loss
        self.fallback_mixed_loss = self.mixed_loss if self.fallback_mixed_loss is None else self.fallback_mixed_loss


def trains_cross_entropy(args: EASTConfig) -> bool:
    """Whether EAST's (or dice's) cross-entropy trains: in a warm start (``LossSpec.warm_start``), or as the
    annealed weight."""
    warm_start = args.east_annealing and args.east_warm_start != "none" and loss_spec(args.east_loss).warm_start
    return warm_start or args.resolved_ce_weight > 0


def needs_class_counts(args: EASTConfig) -> bool:
    """Whether the losses need class counts or priors (``wce`` or ``la``, as the loss or as the cross-entropy that
    trains beside EAST): ``east_class_priors``, else the training split's counts."""
    return args.east_loss in PRIOR_LOSSES or (trains_cross_entropy(args) and args.resolved_ce_loss in PRIOR_LOSSES)


def class_priors(args: EASTConfig, num_classes: int | None = None, class_names: Any = None) -> list[float] | None:
    """``east_class_priors`` as one value per class (``class_names``, a list or an ``id2label`` mapping, resolves a
    mapping by class name), or None when they are to be counted from the training split."""
    if args.east_class_priors is None:
        return None
    return resolve_class_priors(args.east_class_priors, class_names, num_classes, "east_class_priors")


def class_counts(
    args: EASTConfig, train_dataset: Any, num_classes: int | None = None, class_names: Any = None
) -> list[float] | None:
    """The class counts (or priors) the losses are built from: ``east_class_priors`` resolved by class name
    (``class_names``, a list or an ``id2label`` mapping), else the training split's counts; None where no loss needs
    them, or where only EAST's cross-entropy does and the training set cannot be counted (a stream, or none): that
    cross-entropy falls back to the plain one (``build_ce_loss``). A baseline that needs them on such a set is a
    one-line error naming ``east_class_priors``."""
    if not needs_class_counts(args):
        return None
    if args.east_class_priors is not None:
        return class_priors(args, num_classes, class_names)
    uncountable = train_dataset is None or dataset_length(train_dataset) is None
    if uncountable and args.east_loss not in PRIOR_LOSSES:
        if train_dataset is not None and args.east_ce_loss in PRIOR_LOSSES and trains_cross_entropy(args):
            raise ValueError(
                f"Expected east_class_priors for east_ce_loss={args.east_ce_loss!r} on a training set without a "
                f"length ({type(train_dataset).__name__}: its classes cannot be counted), got none; pass "
                "east_class_priors, or leave east_ce_loss unset for the plain cross-entropy on such a set"
            )
        return None
    counts = training_class_counts(train_dataset, num_classes)
    names = class_names if isinstance(class_names, Mapping) else None
    absent = [] if num_classes is None else absent_classes(counts, num_classes, names)  # C unknown: the counts' width
    if absent:
        logger.warning(
            f"{len(absent)} class(es) without a training sample ({', '.join(absent[:10])}"
            f"{', ...' if len(absent) > 10 else ''}): the model has no sample to learn them from"
        )
    return counts


def is_multi_label(model: Any, train_dataset: Any = None, eval_dataset: Any = None) -> bool:
    """Whether the task is multi-label: the model's ``config.problem_type`` is ``"multi_label_classification"``, or
    (where the config does not say) the training labels are multi-hot rows. A config that says single-label beside
    multi-hot labels is a one-line error. Without a training set, the evaluation set's labels tell."""
    problem_type = getattr(getattr(model, "config", None), "problem_type", None)
    if problem_type == "multi_label_classification":
        return True
    multi_hot = has_multi_hot_labels(train_dataset if train_dataset is not None else eval_dataset)
    if multi_hot and problem_type == "single_label_classification":
        raise ValueError(
            "Expected class ids for a model with config.problem_type='single_label_classification', got multi-hot "
            "training labels; set config.problem_type='multi_label_classification' for multi-label classification"
        )
    return multi_hot


def label_priors(
    args: EASTConfig, train_dataset: Any, num_labels: int | None = None, label_names: Any = None
) -> list[float] | None:
    """Each label's positive rate, the prior of the multi-label ``wce`` and ``la``: ``east_class_priors`` (one rate
    in (0, 1) per label, or a {label name: rate} mapping), else counted on the training split, where a loss needs them
    (``needs_class_counts``). Where the training labels can be read (a label column, or rows when the priors are
    needed), a label never positive or never negative in training gets one warning line: nothing trains its
    predictions apart from the other side (a never-positive label's logit is not pushed below 0 by the adjusted or
    re-weighted losses, so the model may predict it), and its F1 is 0 in a split without positives of it."""
    needed = needs_class_counts(args)
    if needed and args.east_class_priors is not None:
        priors = resolve_class_priors(args.east_class_priors, label_names, num_labels, "east_class_priors")
        if any(not 0 < p < 1 for p in priors):
            raise ValueError(
                f"Expected east_class_priors as each label's positive rate in (0, 1) for multi-label, got {priors}"
            )
        return priors
    if train_dataset is None or dataset_length(train_dataset) is None:
        return None
    if not needed and not labels_without_transforms(train_dataset):
        return None  # only row by row (transforms run), and no loss needs the counts: no check
    positives, labelled = training_label_counts(train_dataset, num_labels)
    names = {int(k): str(v) for k, v in (label_names or {}).items()} if isinstance(label_names, Mapping) else {}
    never = [names.get(k, str(k)) for k, (p, n) in enumerate(zip(positives, labelled)) if p == 0 or p == n]
    if never:
        logger.warning(
            f"{len(never)} label(s) never positive or never negative in training ({', '.join(never[:10])}"
            f"{', ...' if len(never) > 10 else ''}): the model has nothing to tell their rows apart from, so its "
            "predictions of them are untrained (a label never positive can still be predicted present); drop them, "
            "or add rows of the other side"
        )
    if not needed:
        return None
    # a rate of 0 or 1 has no finite log-odds: a label seen on one side only is clipped half a sample inside
    return [min(max(p, 0.5), n - 0.5) / n if n else 0.5 for p, n in zip(positives, labelled)]


def warn_absent_validation_classes(eval_dataset: Any, num_classes: int | None, id2label: Any = None) -> None:
    """One warning naming the classes of ``num_classes`` that have no validation sample, where the validation labels
    can be read without running transforms: their F-beta can only be 0, which caps a macro average."""
    counts = column_class_counts(eval_dataset, num_classes) if num_classes is not None else None
    absent = [] if counts is None else absent_classes(counts, num_classes, id2label)
    if absent:
        logger.warning(
            f"{len(absent)} class(es) without a validation sample ({', '.join(absent[:10])}"
            f"{', ...' if len(absent) > 10 else ''}): their F-beta can only be 0, so the macro average the annealing "
            "and the best model read is capped; stratify the split or drop the class"
        )


def _priors(counts: Sequence[float] | None, multi_label: bool) -> dict[str, Any]:
    """``build_loss``'s keyword for the priors: class counts (multi-class) or each label's positive rate."""
    return {"multi_label": True, "label_priors": counts} if multi_label else {"class_counts": counts}


def build_east_loss(
    args: EASTConfig,
    num_classes: int | None = None,
    class_names: Any = None,
    counts: Sequence[float] | None = None,
    multi_label: bool = False,
) -> SetLoss:
    """The loss ``east_loss`` names, with the surrogate's settings where it anneals a temperature (``EASTLoss``, or
    its multi-label counterpart) or none (the baselines).

    ``class_names`` (a list or an ``id2label`` mapping) resolves an ``east_beta`` given by class name; ``counts``
    (training samples per class; multi-label: each label's positive rate, ``label_priors``) are the priors of ``wce``
    and ``la``."""
    if not loss_spec(args.east_loss).anneals_temperature:
        return build_loss(args.east_loss, **_priors(counts, multi_label))
    settings = {param: getattr(args, name) for name, param in LOSS_FIELDS.items()}
    if multi_label:
        settings.pop("pos_label"), settings.pop("threshold_grad")  # multi-class settings (a fixed 0.5 threshold)
        if isinstance(settings["beta"], (str, Mapping)):  # beta by label name: one value per label
            settings["beta"] = resolve_beta(settings["beta"], class_names, num_classes)
        return build_loss(args.east_loss, num_classes=num_classes, multi_label=True, **settings)
    return build_loss(args.east_loss, num_classes=num_classes, class_names=class_names, **settings)


def build_ce_loss(
    args: EASTConfig, counts: Sequence[float] | None = None, warn: bool = True, multi_label: bool = False
) -> SetLoss:
    """The cross-entropy of the warm start and of the annealed weight (``east_ce_loss``; multi-label: binary
    cross-entropy, the logit-adjusted one in place of the multiclass-only ``ldam``, with a warning). Without ``counts``
    a ``wce`` / ``la`` / ``ldam`` falls back to the plain cross-entropy, with a warning (``warn``) where it trains: the
    default trains on any data set, a stream without ``east_class_priors`` included."""
    name = args.resolved_ce_loss
    if multi_label and name not in MULTILABEL_LOSSES:  # ldam: margins between classes, none between labels
        if warn and trains_cross_entropy(args):
            logger.warning(
                f"east_ce_loss={name!r} is multiclass only: multi-label EAST's cross-entropy is the logit-adjusted "
                "binary one ('la')"
            )
        name = "la"
    if counts is None and name in PRIOR_LOSSES:
        if warn and trains_cross_entropy(args):
            logger.warning(
                f"east_ce_loss={name!r} without class priors (a training set that cannot be counted and "
                "no east_class_priors): EAST's cross-entropy is the plain one ('ce'); pass east_class_priors to "
                "adjust it"
            )
        return build_loss("ce", **_priors(None, multi_label))
    return build_loss(name, **_priors(counts, multi_label))


def anneal_threshold(args: EASTConfig, eval_size: int | None = None) -> float:
    """The minimum across-stage improvement: ``east_anneal_threshold``, or by default 2 / ``eval_size`` (two
    validation samples' worth) when the anneal monitor is maximised (a hard metric), and 0 when it is minimised (a
    loss, the paper's letter) or the validation set's size is unknown (None, or an iterable dataset)."""
    if args.east_anneal_threshold is not None:
        return float(args.east_anneal_threshold)
    if monitor_mode(args.east_anneal_key) == "min" or not eval_size:
        return 0.0
    return 2.0 / eval_size


def build_schedule(args: EASTConfig, eval_size: int | None = None, streamed: bool = False) -> AnnealingSchedule:
    """The ``AnnealingSchedule`` of the ``east_*`` fields, for a validation set of ``eval_size`` samples (the default
    across-stage threshold, ``anneal_threshold``). The loss's ``LossSpec`` decides: a loss without a temperature
    (a baseline) gets one stage (its early stopping, with the same patience), and one without ``warm_start`` (``ce``,
    ``wce``, ``la``, ``focal``) no warm start. ``streamed``: the training set
    has no length (an ``IterableDataset``), so a warm start measured in epochs runs until its own early stopping
    instead, with a warning (``east_warm_start_steps`` sets its length). A loss with a ``second_stage`` (``ldam``,
    LDAM-DRW, defers its re-weighting) trains its first stage with the same machinery: stage -1 trains LDAM without
    class weights until its own early stopping (or ``east_warm_start_steps``), stage 0 the re-weighted LDAM (Cao et
    al. defer at a fixed epoch instead)."""
    settings = {param: getattr(args, name) for name, param in SCHEDULE_FIELDS.items()}
    spec = loss_spec(args.east_loss)
    warm_start = args.east_warm_start if spec.warm_start else "none"
    epochs = args.east_warm_start_epochs
    if spec.second_stage is not None:  # the first stage is stage -1, until its own early stopping
        warm_start, epochs = "ce", -1
    if streamed and warm_start != "none" and args.east_warm_start_steps is None and epochs != -1:
        logger.warning(
            f"east_warm_start_epochs={epochs:g} on a training set without a length: the warm start runs until its "
            "own early stopping (east_warm_start_epochs=-1); set east_warm_start_steps to give it a length"
        )
        epochs = -1
    if not spec.anneals_temperature:
        settings["max_stages"] = 1
    return AnnealingSchedule(
        **settings,
        anneal_threshold=anneal_threshold(args, eval_size),
        stage_mode=monitor_mode(args.east_stage_monitor),
        anneal_mode=monitor_mode(args.east_anneal_key),
        warm_start=warm_start,
        warm_start_epochs=None if epochs == -1 else epochs,  # -1: the warm start's own early stopping
        ce_weight=args.resolved_ce_weight,
        lr_decay=args.resolved_lr_decay,
    )


def build_annealing_callback(
    args: EASTConfig, eval_size: int | None = None, streamed: bool = False, multi_label: bool = False
) -> TemperatureAnnealingCallback:
    """The ``TemperatureAnnealingCallback`` of ``build_schedule(args, eval_size, streamed)``; it reports a
    temperature where the loss anneals one (``LossSpec.anneals_temperature``) and falls back to plain cross-entropy
    where ``falls_back``."""
    return TemperatureAnnealingCallback(
        build_schedule(args, eval_size, streamed),
        stage_monitor=args.east_stage_monitor,
        anneal_monitor=args.east_anneal_key,
        selection_key=args.east_selection_key,
        restore_best_per_stage=args.east_restore_best_per_stage,
        ema_decay=args.east_ema_decay,
        reports_temperature=loss_spec(args.east_loss).anneals_temperature,
        ce_fallback=falls_back(args, multi_label),
    )


def build_target_metrics(
    args: EASTConfig, num_classes: int, id2label: Mapping[int, str] | None = None, multi_label: bool = False
) -> ComputeMetrics | MultiLabelComputeMetrics:
    """The hard metrics of the configured target (``east_beta``, ``east_average``, ``east_pos_label``):
    ``accuracy``, ``fbeta``, ``mcc``, ``precision``, ``recall`` and the per-class keys of
    ``east_hf.hf.metrics.build_compute_metrics``'s default, scored from the evaluation's counts; for ``multi_label``
    the same keys over labels (``MultiLabelComputeMetrics``: subset accuracy, per-label MCC averaged, ``jaccard``)."""
    if multi_label:
        return MultiLabelComputeMetrics(num_classes, beta=args.east_beta, average=args.east_average, id2label=id2label)
    return ComputeMetrics(
        num_classes, beta=args.east_beta, average=args.east_average, pos_label=args.east_pos_label, id2label=id2label
    )


def build_components(
    args: EASTConfig,
    model: Any = None,
    train_dataset: Any = None,
    eval_dataset: Any = None,
    callbacks: Sequence[Any] = (),
    compute_metrics: Any = None,
) -> EASTComponents:
    """Everything a trainer of ``model`` on ``train_dataset`` / ``eval_dataset`` trains and evaluates with, built
    once. The annealing callback is built unless ``callbacks`` holds one; the hard metrics unless
    ``compute_metrics`` is given."""
    config = getattr(model, "config", None)
    num_classes, id2label = getattr(config, "num_labels", None), getattr(config, "id2label", None)
    if (
        num_classes is None
        and isinstance(args.east_beta, Mapping)
        and not all(str(k).isdigit() for k in args.east_beta)
    ):
        raise ValueError(
            "Expected a model with config.id2label to resolve east_beta class names, got a model without config"
        )
    multi_label = is_multi_label(model, train_dataset, eval_dataset)
    if multi_label:
        counts = label_priors(args, train_dataset, num_classes, id2label)
    else:
        counts = class_counts(args, train_dataset, num_classes, id2label)
        warn_absent_validation_classes(eval_dataset, num_classes, id2label)
    loss = build_east_loss(args, num_classes, id2label, counts, multi_label)
    spec = loss_spec(args.east_loss, multi_label)
    if spec.second_stage is not None:  # the first stage's loss (stage -1 of build_schedule)
        ce_loss = spec.second_stage.first(loss)
    else:
        ce_loss = build_ce_loss(args, counts, train_dataset is not None, multi_label)  # no training set: none trains
    mixed = MixedSetLoss(loss, weight=0.0, cross_entropy=ce_loss) if spec.anneals_temperature else None
    fallback = fallback_mixed = None  # EASTComponents then uses ce_loss and mixed
    if falls_back(args, multi_label) and ce_loss.name != "ce":
        fallback = build_loss("ce", **_priors(None, multi_label))
        fallback_mixed = MixedSetLoss(loss, weight=0.0, cross_entropy=fallback)
    annealing = None
    if args.east_annealing and not any(isinstance(c, TemperatureAnnealingCallback) for c in callbacks):
        streamed = train_dataset is not None and dataset_length(train_dataset) is None
        eval_size = validation_size(eval_dataset, args.east_anneal_key)
        annealing = build_annealing_callback(args, eval_size, streamed, multi_label)
    target = None if num_classes is None else build_target_metrics(args, num_classes, id2label, multi_label)
    return EASTComponents(
        loss=loss,
        ce_loss=ce_loss,
        mixed_loss=mixed,
        annealing=annealing,
        compute_metrics=target if compute_metrics is None else None,  # the trainer's own where the user gave none
        num_classes=num_classes,
        multi_label=multi_label,
        target_metrics=target,
        fallback_loss=fallback,
        fallback_mixed_loss=fallback_mixed,
    )


def falls_back(args: EASTConfig, multi_label: bool = False) -> bool:
    """Whether a run of ``args`` may fall back to plain cross-entropy when its model has told no classes apart
    (``east_ce_fallback``, ``TemperatureAnnealingCallback.ce_fallback``): single-label EAST. Whether its schedule
    can (a warm start to go back to, not used yet) is the schedule's ``can_fall_back``."""
    spec = loss_spec(args.east_loss, multi_label)
    return bool(args.east_ce_fallback) and not multi_label and spec.anneals_temperature


def multi_hot_datasets(model: Any, sets: Mapping[str, Any]) -> dict[str, Any]:
    """The ``train_dataset`` and ``eval_dataset`` of ``sets`` (a trainer's arguments) whose label column holds a list
    of label ids per row (``Sequence(ClassLabel(...))``, go_emotions' layout, or ``Sequence(Value("int64"))``), as
    multi-hot float rows of the model's ``config.num_labels`` labels (``east_hf.hf.data.multi_hot.multi_hot_labels``);
    a mapping of evaluation sets set by set. Sets of any other layout are left out: they are used as they are."""
    from east_hf.hf.data.multi_hot import holds_label_ids, multi_hot_labels

    num_labels = getattr(getattr(model, "config", None), "num_labels", None)
    converted = {}
    for name in ("train_dataset", "eval_dataset"):
        data = sets.get(name)
        parts = data if isinstance(data, Mapping) else {None: data}
        if any(holds_label_ids(part) for part in parts.values()):
            parts = {k: multi_hot_labels(v, num_labels) if holds_label_ids(v) else v for k, v in parts.items()}
            converted[name] = parts if isinstance(data, Mapping) else parts[None]
    return converted
