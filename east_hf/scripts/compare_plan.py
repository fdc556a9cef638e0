"""What an ``east-compare`` compares: its variants (each a set of ``east-train`` flags), the test metric the runs are
compared on, and the reference variant the others are paired against.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from east_hf.core import target_metric_key
from east_hf.core.loss_registry import LOSSES, MULTILABEL_LOSSES
from east_hf.core.monitor_keys import anneal_key, monitor_mode

__all__ = [
    "DEFAULT_LOSSES",
    "MULTILABEL_DEFAULT_LOSSES",
    "default_losses",
    "parse_variants",
    "recipe_metric",
    "redefining_flags",
    "reference_variant",
    "unpaired_variants",
    "variant_rows",
]

DEFAULT_LOSSES = "east,ce,la,focal,ldam"
"""EAST and the baselines to beat on single-label data: cross-entropy, logit-adjusted cross-entropy, and the
strongest in the project's results, focal loss and LDAM-DRW (docs/results/finetune.md, quality.md); with
``--tuned``, each also tuned. ``--losses all`` runs every baseline of the registry."""
MULTILABEL_DEFAULT_LOSSES = "east,ce,wce,la,asl"
"""EAST and the multi-label baselines of the project's results (docs/results/multilabel.md): binary cross-entropy,
with ``pos_weight``, logit-adjusted, and the asymmetric loss."""
TARGET_FLAGS = {"--east_beta", "--beta", "--east_metric", "--metric", "--east_average", "--east_pos_label"}
AVERAGE_FLAGS = {"--east_average", "--east_pos_label"}


def default_losses(multi_label: bool = False) -> str:
    """The losses compared when neither ``--losses`` nor ``--variants`` is given, for the kind of task.

    >>> default_losses(), default_losses(multi_label=True)
    ('east,ce,la,focal,ldam', 'east,ce,wce,la,asl')
    """
    return MULTILABEL_DEFAULT_LOSSES if multi_label else DEFAULT_LOSSES


def parse_variants(
    losses: str | None, variants: Sequence[str] | None, multi_label: bool = False
) -> dict[str, list[str]]:
    """``--losses east,ce`` and ``--variants NAME:FLAGS`` -> {name: east-train flags}, in the order given.
    ``--losses all``: every loss of the registry of the task (``multi_label``: ``MULTILABEL_LOSSES``, and a
    single-label loss is refused before any run trains).

    >>> list(parse_variants("all", None))
    ['east', 'ce', 'wce', 'la', 'dice', 'focal', 'ldam']
    """
    out: dict[str, list[str]] = {}
    if (losses or "").strip() == "all":
        losses = ",".join(MULTILABEL_LOSSES if multi_label else LOSSES)
    for loss in [x.strip() for x in (losses or "").split(",") if x.strip()]:
        if loss not in LOSSES and loss not in MULTILABEL_LOSSES:
            raise ValueError(f"Expected losses among {sorted({*LOSSES, *MULTILABEL_LOSSES})}, got {loss!r}")
        if multi_label and loss not in MULTILABEL_LOSSES:
            raise ValueError(
                f"Expected multi-label losses among {list(MULTILABEL_LOSSES)} for multi-label data, got {loss!r} "
                "(single-label only)"
            )
        out[loss] = ["--east_loss", loss]
    for spec in variants or []:
        name, sep, flags = spec.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"Expected a variant as NAME:FLAGS (e.g. 'warm:--east_warm_start ce'), got {spec!r}")
        if name.strip() in out:
            raise ValueError(f"Expected distinct variant names, got {name.strip()!r} twice")
        out[name.strip()] = shlex.split(flags)
        loss = _variant_loss(out[name.strip()])
        if multi_label and loss is not None and loss not in MULTILABEL_LOSSES:
            raise ValueError(
                f"Expected multi-label losses among {list(MULTILABEL_LOSSES)} for multi-label data, got {loss!r} in "
                f"variant {name.strip()!r} (single-label only)"
            )
    if not out:
        raise ValueError("Expected at least one variant: pass --losses and/or --variants")
    return out


def _variant_loss(flags: Sequence[str]) -> str | None:
    """The loss a variant's flags set (``--east_loss`` or its alias ``--loss``, the last one given), or None.

    >>> _variant_loss(["--loss", "dice"]), _variant_loss(["--east_loss=ce", "--lr", "0.1"]), _variant_loss([])
    ('dice', 'ce', None)
    """
    loss = None
    for i, flag in enumerate(flags):
        name, eq, value = flag.partition("=")
        if name in ("--east_loss", "--loss"):
            loss = value if eq else (flags[i + 1] if i + 1 < len(flags) else None)
    return loss


def variant_rows(variants: Mapping[str, list[str]], tuned: bool) -> list[str]:
    """The rows of the comparison: each variant, followed by ``<name>+tuned`` (its decision rule tuned) if ``tuned``.

    >>> variant_rows({"east": [], "ce": []}, tuned=True)
    ['east', 'east+tuned', 'ce', 'ce+tuned']
    """
    return [row for n in variants for row in ([n, f"{n}+tuned"] if tuned else [n])]


def recipe_metric(recipe: Mapping[str, Any]) -> str:
    """The test metric a recipe's runs are compared on: the key of the anneal monitor (what the runs are judged by
    across stages and their best checkpoint kept by) without ``eval_``, or the target metric where that monitor is a
    loss. Aliases (``metric:``) are resolved and ``EASTConfig``'s defaults fill what the recipe leaves out.

    >>> recipe_metric({"metric": "mcc"}), recipe_metric({}), recipe_metric({"east_anneal_monitor": "eval_loss"})
    ('mcc', 'fbeta', 'fbeta')
    """
    from east_hf.hf.config.east_config import EASTConfig
    from east_hf.scripts.arguments import ALIASES

    fields = {ALIASES.get(key, key): value for key, value in recipe.items()}
    metric = fields.get("east_metric", EASTConfig.east_metric)
    key = anneal_key(metric, fields.get("east_anneal_monitor", EASTConfig.east_anneal_monitor))
    return key.removeprefix("eval_") if monitor_mode(key) == "max" else target_metric_key(metric)


def reference_variant(args: argparse.Namespace) -> str:
    """The variant the others are paired against: ``--reference``, else cross-entropy with its decision rule tuned
    (``ce+tuned``), the strongest simple baseline, or plain ``ce`` when the rules are not tuned."""
    return args.reference or ("ce+tuned" if args.tuned else "ce")


def redefining_flags(metric: str) -> set[str]:
    """The flags that make a variant's ``metric`` another quantity than the reference's, so it is not paired.

    An averaged key (``fbeta``) changes with the average; a per-class key (``fbeta_positive``) names its class and
    does not, so a variant that trains another average can still be paired on it.

    >>> sorted(redefining_flags("fbeta_positive"))
    ['--beta', '--east_beta', '--east_metric', '--metric']
    """
    per_class = metric.startswith(("fbeta_", "precision_", "recall_"))
    return TARGET_FLAGS - AVERAGE_FLAGS if per_class else TARGET_FLAGS


def unpaired_variants(variants: Mapping[str, list[str]], metric: str) -> set[str]:
    """The rows left out of the paired table: variants that redefine the target (another beta, metric or average)
    score a different F-beta, and so do their ``+tuned`` rows.

    >>> sorted(unpaired_variants({"east": ["--east_loss", "east"], "b2": ["--east_beta=2"]}, "fbeta"))
    ['b2', 'b2+tuned']
    """
    flags_that_redefine = redefining_flags(metric)
    redefines = {n for n, f in variants.items() if any(x.split("=")[0] in flags_that_redefine for x in f)}
    return redefines | {f"{n}+tuned" for n in redefines}
