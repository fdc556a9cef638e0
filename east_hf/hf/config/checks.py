"""The checks of ``EASTConfig``'s ``east_*`` fields, run once by ``EASTConfig.__post_init__`` when the config is made,
and the checks of the settings the annealing callback trains with, which ``TemperatureAnnealingCallback`` also runs
when it is made and when training begins (``check_ema_decay``, ``check_evaluates``).

The config's checks come in three kinds, in this order: the settings a loss takes, asked of its ``LossSpec``
(``east_hf.core.loss_registry``); the settings that need the annealing callback; and the settings of the core objects,
checked by making each object once with the fields' values (``EASTLoss`` through ``build_loss``, and the
``AnnealingSchedule``), its error naming the ``east_`` field (``east_hf.hf.config.fields.field_error``). A field given
in another form is replaced by its parsed value: ``east_beta``, ``east_class_priors`` (a file is read now, so the
arguments saved with a run hold its values) and ``east_ema_decay``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from east_hf.core.annealing import AnnealingSchedule
from east_hf.core.loss_registry import LOSSES, MULTILABEL_LOSSES, PRIOR_LOSSES, build_loss, loss_spec
from east_hf.core.monitor_keys import monitor_mode
from east_hf.core.validation import check_choice, parse_beta, parse_class_priors
from east_hf.hf.config.fields import LOSS_FIELDS, RESOLVED_SCHEDULE_FIELDS, SCHEDULE_FIELDS, field_error

__all__ = [
    "ANNEALING_FIELDS",
    "DEFAULT_EMA_DECAY",
    "MIX_FIELDS",
    "check_ema_decay",
    "check_evaluates",
    "check_loss_anneal_monitor",
    "fields_left_unused",
    "validate_east_fields",
]

DEFAULT_EMA_DECAY = 0.0  # no moving average of the weights, as the paper; the callback's and the config's default

MIX_FIELDS = {
    "east_ce_weight": "anneals_temperature",
    "east_confusion_memory": "anneals_temperature",
    "east_ce_loss": "warm_start",
}
"""The settings of EAST's cross-entropy mix -> the ``LossSpec`` flag a loss needs to take them: set for another loss,
the loss's checks refuse them."""
ANNEALING_FIELDS = (
    "east_ce_weight_decay",
    "east_decay",
    "east_stage_patience",
    "east_min_temperature",
    "east_max_stages",
)
"""The settings only an annealing reads: a loss without a temperature trains one stage of early stopping and leaves
them unused."""


def fields_left_unused(loss: str) -> set[str]:
    """The ``east_`` fields ``loss`` does not train with: the mix settings whose ``LossSpec`` flag it lacks
    (``MIX_FIELDS``) and, for a loss without a temperature, the annealing's (``ANNEALING_FIELDS``).

    >>> sorted(fields_left_unused("east"))
    []
    """
    spec = loss_spec(loss)
    unused = {name for name, flag in MIX_FIELDS.items() if not getattr(spec, flag)}
    return unused | (set(ANNEALING_FIELDS) if not spec.anneals_temperature else set())


def check_ema_decay(ema_decay: Any) -> float:
    """``ema_decay`` as a float in [0, 1) (0: no moving average), or a one-line ``ValueError``.

    >>> check_ema_decay(0.9)
    0.9
    """
    if isinstance(ema_decay, bool) or not isinstance(ema_decay, (int, float)) or not 0 <= ema_decay < 1:
        raise ValueError(f"Expected ema_decay in [0, 1) (0: no moving average of the weights), got {ema_decay!r}")
    return float(ema_decay)


def check_evaluates(eval_strategy: str) -> None:
    """Annealing ends its stages on validation results: refuse ``eval_strategy="no"``."""
    if eval_strategy == "no":
        raise ValueError(
            "Expected eval_strategy 'steps' or 'epoch' (and an eval_dataset) for temperature annealing, got 'no': "
            "the stages end on validation results; set east_annealing=False to train at a fixed temperature"
        )


def validate_east_fields(args: Any) -> None:
    """Parse and check every ``east_*`` field of ``args`` (an ``EASTConfig``), in place."""
    check_choice("east_loss", args.east_loss, tuple(dict.fromkeys([*LOSSES, *MULTILABEL_LOSSES])))
    args.east_beta = parse_beta(args.east_beta, "east_beta")
    if args.east_class_priors is not None:  # a file is read now: the arguments saved with a run hold its values
        args.east_class_priors = parse_class_priors(args.east_class_priors, "east_class_priors")
    _check_loss_settings(args)
    _check_annealing_settings(args)
    check_loss_anneal_monitor(args)
    _check_core_objects(args)


def _check_loss_settings(args: Any) -> None:
    """The settings that only some losses take, asked of the loss's ``LossSpec``."""
    spec, name = loss_spec(args.east_loss), args.east_loss
    unused = fields_left_unused(name)
    if "east_ce_weight" in unused and args.east_ce_weight is not None and args.east_ce_weight > 0:
        raise ValueError(f"Expected east_ce_weight 0 for east_loss={name!r} (it mixes into EAST only)")
    if args.east_ce_loss is not None:
        check_choice("east_ce_loss", args.east_ce_loss, ("ce", *PRIOR_LOSSES))
    if "east_ce_loss" in unused and args.east_ce_loss not in (None, "ce"):
        raise ValueError(f"Expected east_ce_loss 'ce' for east_loss={name!r} (it is EAST's and Dice's)")
    memory = args.east_confusion_memory
    if "east_confusion_memory" in unused and isinstance(memory, (int, float)) and memory > 0:
        raise ValueError(f"Expected east_confusion_memory 0 for east_loss={name!r} (it is EAST's)")
    if spec.second_stage is not None and not args.east_annealing:
        raise ValueError(
            f"Expected east_annealing=True for east_loss={name!r}: {spec.second_stage.what} is a second stage that "
            "the annealing callback starts, got east_annealing=False"
        )


def _check_annealing_settings(args: Any) -> None:
    """The settings the annealing callback carries out: they need ``east_annealing`` (and an evaluation)."""
    if args.east_select_window != 1 and not args.east_annealing:
        raise ValueError(
            f"Expected east_annealing=True for east_select_window={args.east_select_window!r} (the annealing "
            "callback writes the mean the best model is chosen by), got east_annealing=False"
        )
    try:
        args.east_ema_decay = check_ema_decay(args.east_ema_decay)
    except ValueError as e:
        raise field_error(e, {"east_ema_decay": "ema_decay"}) from None
    if args.east_ema_decay > 0 and not args.east_annealing:
        raise ValueError(
            f"Expected east_annealing=True for east_ema_decay={args.east_ema_decay!r} (the annealing callback "
            "keeps the moving average), got east_annealing=False"
        )
    if not (args.east_warm_start_epochs == -1 or isinstance(args.east_warm_start_epochs, (int, float))):
        raise ValueError(f"Expected east_warm_start_epochs > 0 or -1, got {args.east_warm_start_epochs!r}")
    if args.east_annealing:
        check_evaluates(args.eval_strategy)


def check_loss_anneal_monitor(args: Any) -> None:
    """An anneal monitor that is the validation loss compares the loss of different stages, so every stage must
    train the same kind of loss: not after a cross-entropy warm start (its loss is cross-entropy, far below any
    surrogate, so it would be the best "stage" and the model kept), nor with a cross-entropy weight that changes
    from stage to stage. The paper's letter (``east_warm_start none``, ``east_ce_weight 0``) passes, and so do the
    baselines without a warm start (one loss throughout) and runs without annealing."""
    if (
        not args.east_annealing
        or not loss_spec(args.east_loss).warm_start
        or monitor_mode(args.east_anneal_key) != "min"
    ):
        return
    if args.east_warm_start != "none":
        raise ValueError(
            f"Expected east_warm_start 'none' with east_anneal_monitor={args.east_anneal_key!r} (the warm start's "
            "cross-entropy would be compared with EAST's surrogate and kept as the best stage), got "
            f"east_warm_start={args.east_warm_start!r}; or watch a hard metric across stages (the default)"
        )
    if args.resolved_ce_weight > 0:
        raise ValueError(
            f"Expected east_ce_weight 0 with east_anneal_monitor={args.east_anneal_key!r} (the loss changes with "
            f"the weight from stage to stage), got {args.resolved_ce_weight:g}; or watch a hard metric across "
            "stages (the default)"
        )


def _check_core_objects(args: Any) -> None:
    """The checks are the core objects' own: each is made once with the fields' values (class names are not known
    yet, so a beta mapping is checked for its values; the trainer resolves its names against the model's
    ``id2label``). Nothing made here is kept: the builder (``east_hf.hf.config.build``) makes what the trainer uses."""
    loss_settings = {param: getattr(args, name) for name, param in LOSS_FIELDS.items()}
    if isinstance(args.east_beta, Mapping):
        loss_settings["beta"] = list(args.east_beta.values())
    if args.east_average == "samples" or args.east_metric == "jaccard" or args.east_loss not in LOSSES:
        # settings of multi-label classification alone: checked by its loss, without the multiclass settings
        loss_settings = {k: v for k, v in loss_settings.items() if k not in ("pos_label", "threshold_grad")}
        loss_settings["multi_label"] = True
    try:
        build_loss("east", **loss_settings)
    except (ValueError, TypeError) as e:
        raise field_error(e, LOSS_FIELDS) from None
    epochs = args.east_warm_start_epochs
    try:
        AnnealingSchedule(
            **{param: getattr(args, name) for name, param in SCHEDULE_FIELDS.items()},
            anneal_threshold=args.east_anneal_threshold or 0.0,
            stage_mode=monitor_mode(args.east_stage_monitor),
            anneal_mode=monitor_mode(args.east_anneal_key),
            warm_start=args.east_warm_start,
            warm_start_epochs=None if epochs == -1 else epochs,
            ce_weight=args.resolved_ce_weight,
            lr_decay=args.resolved_lr_decay,
        )
    except (ValueError, TypeError) as e:
        raise field_error(e, {**SCHEDULE_FIELDS, **RESOLVED_SCHEDULE_FIELDS}) from None
