"""Model cards for EAST models: ``model-index`` metadata and a text model's widget (``east_hf.hf.cards.metadata``), the
annealing trajectory (table and PNG), per-class results, the tuned decision rule, how to load the model.

Rendered with ``huggingface_hub.ModelCard.from_template`` from the template in ``hub_cards/`` (the repository's
top-level folder, installed as ``east_hf.hub_cards``; ``east_hf.hf.package_data`` finds it either way). Written on
the main process only. No secret reaches a card: ``mask_secrets`` (``east_hf.hf.secret_masking``, re-exported
here) masks the recipe.

A card ends in a signature line, an HTML comment the Hub does not show holding the SHA-256 of the text above it
(``east_hf.hf.cards.files``: ``is_unchanged_card``). A ``README.md`` without a valid one (the user wrote it, or edited
the card east_hf wrote) is never replaced: the card goes beside it as ``README.east_hf.md``, and one warning line says
so.
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from huggingface_hub import ModelCard

from east_hf.core.loss_registry import LossSpec, loss_spec
from east_hf.hf.cards.files import CARD_BESIDE_README, card_path, is_unchanged_card, signed
from east_hf.hf.cards.metadata import (
    HUB_METRICS,
    card_metadata,
    check_license,
    is_hub_id,
    is_multi_label,
    model_task,
    text_columns,
    widget_examples,
)
from east_hf.hf.cards.plot import annealing_trajectory, plot_annealing, write_atomically
from east_hf.hf.metrics.compute import SUMMARY_KEYS
from east_hf.hf.package_data import package_folder
from east_hf.hf.secret_masking import is_secret, mask_secrets
from east_hf.hf.training.ending import plural, training_ended

__all__ = [
    "CARD_BESIDE_README",
    "CITATION",
    "TEMPLATE_PATH",
    "annealing_trajectory",
    "card_context",
    "card_metadata",
    "check_license",
    "check_hub_push",
    "is_secret",
    "is_unchanged_card",
    "mask_secrets",
    "plot_annealing",
    "widget_examples",
    "write_model_card",
]

logger = logging.getLogger(__name__)

TEMPLATE_PATH = package_folder("hub_cards") / "east_model_card.md"
WARM_START_WORDS = {
    "ce": "cross-entropy",
    "la": "logit-adjusted cross-entropy",
    "wce": "class-weighted cross-entropy",
    "ldam": "LDAM re-weighted by effective numbers",
}
"""The warm start's loss (``EASTTrainer.warm_start_loss.name``) in the card's words."""
LDAM_TERM = "LDAM, margins n^(-1/4) and re-weighted by effective numbers (Cao et al., 2019)"
"""LDAM as EAST's cross-entropy term: the re-weighted loss from the start (the registry's ``ldam`` defers it)."""
PLOT_FILE = "annealing.png"

CITATION = """@article{li2025east,
  title   = {Aligning Multiclass Neural Network Classifier Criterion with Task Performance Metrics},
  author  = {Li, Deyuan and Lee, Taesoo Daniel and V{\\'a}zquez, Marynel and Tsoi, Nathan},
  journal = {arXiv preprint},
  year    = {2025}
}"""


def check_hub_push(args) -> None:
    """Fail before training when ``push_to_hub`` cannot work: offline, or no token. Never prints the token."""
    if not getattr(args, "push_to_hub", False):
        return
    from huggingface_hub import HfApi, constants, get_token

    if constants.HF_HUB_OFFLINE:
        raise ValueError(
            "Expected network access for push_to_hub=True, got HF_HUB_OFFLINE=1: unset it or set push_to_hub false."
        )
    token = args.hub_token or get_token()
    if not token:
        raise ValueError(
            "Expected a Hugging Face token for push_to_hub=True, found none: run `hf auth login` or set HF_TOKEN."
        )
    try:
        HfApi().whoami(token=token)
    except Exception as e:  # noqa: BLE001 - any failure here means the push would fail after training
        raise ValueError(
            f"Expected a valid Hugging Face token and a reachable Hub for push_to_hub=True, got {type(e).__name__}"
        ) from None


def _versions() -> list[tuple[str, str]]:
    out = []
    for name in ("east_hf", "torch", "transformers", "timm", "datasets", "evaluate", "huggingface_hub"):
        try:
            out.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _fmt(value: Any) -> Any:
    """A number as prose and tables give it: a float to 4 decimals; None (no value, e.g. a warm start's temperature)
    as a dash."""
    if value is None:
        return "-"
    return round(value, 4) if isinstance(value, float) else value


def _clean_recipe(recipe: dict[str, Any] | None) -> str | None:
    if not recipe:
        return None
    return yaml.safe_dump(mask_secrets(dict(recipe)), sort_keys=False).strip()  # never leak a token into the card


def _without_baseline(description: str) -> str:
    """A loss's registry description as a part of EAST's loss: ``(baseline)`` / ``; baseline)`` left out."""
    return description.removesuffix(" (baseline)").replace("; baseline)", ")")


def _per_class(metrics: dict[str, float], prefix: str) -> list[dict[str, Any]]:
    names = [k[len(f"{prefix}_precision_") :] for k in metrics if k.startswith(f"{prefix}_precision_")]
    return [
        {
            "name": name,
            "precision": _fmt(metrics.get(f"{prefix}_precision_{name}")),
            "recall": _fmt(metrics.get(f"{prefix}_recall_{name}")),
            "fbeta": _fmt(metrics.get(f"{prefix}_fbeta_{name}", "")),
        }
        for name in names
    ]


def card_context(
    trainer,
    output_dir: Path,
    *,
    test_metrics: dict[str, float] | None = None,
    metric_prefix: str = "test",
    dataset_name: str | None = None,
    dataset_split: str = "test",
    recipe: dict[str, Any] | None = None,
    base_model: str | None = None,
    model_name: str | None = None,
    decision_rule: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The values the card's template (``hub_cards/east_model_card.md``) renders: the task, the loss, the annealing
    and its trajectory (plotted into ``output_dir / annealing.png``), the results, how to load the model, the
    recipe."""
    args, target_key = trainer.args, trainer.args.east_target_key
    test_metrics = test_metrics or {}
    rows = annealing_trajectory(trainer.state.log_history, target_key)
    plot = plot_annealing(rows, output_dir / PLOT_FILE, target_key)
    results = [
        (name, _fmt(test_metrics[f"{metric_prefix}_{name}"]))
        for name in SUMMARY_KEYS
        if f"{metric_prefix}_{name}" in test_metrics
    ]
    repo_id = args.hub_model_id or str(output_dir)
    return dict(
        model_name=model_name,
        **_task_context(trainer),
        **_usage_context(trainer, repo_id),
        **_training_context(trainer, rows),
        results=results,
        per_class=_per_class(test_metrics, metric_prefix),
        plot_file=plot.name if plot else None,
        trajectory=[{k: _fmt(v) for k, v in r.items()} for r in rows],
        base_model=base_model if is_hub_id(base_model) else None,
        local_base_model=None if is_hub_id(base_model) else base_model,
        dataset_name=dataset_name or "custom",
        dataset_split=dataset_split,
        repo_id=repo_id,
        recipe=_clean_recipe(recipe),
        decision_rule={k: _fmt(v) for k, v in decision_rule.items()} if decision_rule else None,
        thresholds=_thresholds(trainer, decision_rule) if decision_rule and is_multi_label(trainer) else None,
        versions=_versions(),
        citation=CITATION,
    )


def _task_context(trainer) -> dict[str, Any]:
    """The card's values about the task and the model: what it classifies, how it decides, how to load it."""
    model = trainer.model
    multi_label = is_multi_label(trainer)
    task_description = {
        "image-classification": "an image classifier",
        "text-classification": "a text classifier",
    }.get(model_task(model), "a tabular classifier")
    if multi_label:
        task_description = task_description.replace("classifier", "multi-label classifier")
    image_model = getattr(model, "main_input_name", None) == "pixel_values"
    return dict(
        task_description=task_description,
        multi_label=multi_label,
        unit="label" if multi_label else "class",
        decides="`sigmoid(logits) > 0.5` for each label" if multi_label else "`argmax` of its logits",
        text_model=model_task(model) == "text-classification",
        auto_class="AutoModelForImageClassification" if image_model else "AutoModelForSequenceClassification",
        remote_code=getattr(model, "_auto_class", None) is not None,  # save_pretrained copied the model's code
        architecture=getattr(getattr(model, "config", None), "architecture", None) or type(model).__name__,
        **_peft_context(model),
    )


def _peft_context(model) -> dict[str, Any]:
    """The card's values for a LoRA run: peft's Auto class, the base checkpoint and the head's keyword arguments."""
    from transformers import AutoConfig

    from east_hf.hf.models.lora import classifier_config, is_peft_model, loading_kwargs

    if not is_peft_model(model):
        return {"peft": False}
    base = model.peft_config[model.active_adapter].base_model_name_or_path
    try:
        base_config = AutoConfig.from_pretrained(base)
    except OSError:  # out of reach here: the labels alone
        base_config = None
    kwargs = loading_kwargs(classifier_config(model), base_config)
    text = model_task(model) == "text-classification"
    return {
        "peft": True,
        "peft_auto_class": "AutoPeftModelForSequenceClassification" if text else "AutoPeftModel",
        "peft_base": base,
        "classifier_kwargs": ",\n    ".join(f"{k}={v!r}" for k, v in kwargs.items()),
        "peft_preprocessing": None if text else _timm_preprocessing(model.config),
    }


def _timm_preprocessing(config) -> str | None:
    """A timm model's evaluation transform in words, from its data config (``config.pretrained_cfg``, which the
    adapter's ``preprocessor_config.json`` holds); None for any other model."""
    pretrained_cfg = getattr(config, "pretrained_cfg", None)
    if getattr(config, "model_type", None) != "timm_wrapper" or not isinstance(pretrained_cfg, dict):
        return None
    import timm.data

    data = timm.data.resolve_data_config(pretrained_cfg=dict(pretrained_cfg))
    _, height, width = data["input_size"]

    def numbers(values) -> str:
        return "(" + ", ".join(f"{float(v):.4g}" for v in values) + ")"

    return (
        f"timm's evaluation transform: {height}x{width} input, {data['interpolation']} interpolation, "
        f"{data.get('crop_mode', 'center')} crop (crop_pct {data['crop_pct']}), mean {numbers(data['mean'])}, "
        f"std {numbers(data['std'])}"
    )


def _usage_context(trainer, repo_id: str) -> dict[str, Any]:
    """The card's values for its usage snippets: a text model's example input (a text, or a text pair as the
    pipeline takes it) and the longest input its tokenizer keeps (``model_max_length``: the pipeline's
    ``truncation=True`` cuts a longer text there, as training did); a darknet19 model's name for
    ``timm.create_model`` and where its ``darknet.py`` is (saved beside the weights: importing it registers
    darknet19 with timm where east_hf is not installed)."""
    model = trainer.model
    config = getattr(model, "config", None)
    pair = len(text_columns(model)) == 2
    longest = getattr(getattr(trainer, "processing_class", None), "model_max_length", None)
    return dict(
        text_pair=pair,
        example='{"text": "a first text", "text_pair": "a second text"}' if pair else '"a text to classify"',
        max_length=longest if isinstance(longest, int) and 0 < longest < 1_000_000 else None,
        darknet=getattr(config, "model_type", None) == "east_darknet",
        timm_name=f"hf-hub:{repo_id}" if is_hub_id(repo_id) else f"local-dir:{repo_id}",
        hub=is_hub_id(repo_id),
        darknet_file=str(Path(repo_id) / "darknet.py"),
    )


def _thresholds(trainer, decision_rule: dict[str, Any]) -> list[dict[str, Any]]:
    """A tuned multi-label rule as the card gives it: per label, the probability threshold the offset folded into the
    bias amounts to (label k is predicted where z_k + b_k > 0, i.e. sigmoid(z_k) > sigmoid(-b_k), with z_k the
    as-trained model's logit) and the label's positives in the validation split the rule was tuned on."""
    support = _validation_support(trainer)
    return [
        {
            "name": name,
            "threshold": round(1.0 / (1.0 + math.exp(float(offset))), 4),  # sigmoid(-offset)
            "support": support[k] if support is not None and k < len(support) else "",
        }
        for k, (name, offset) in enumerate(decision_rule.get("offsets", {}).items())
    ]


def _validation_support(trainer) -> list[int] | None:
    """Each label's positives in the trainer's evaluation set (its ``labels`` column of (L,) multi-hot rows; an
    entry of -100 does not count), or None where that set has no such column."""
    dataset = trainer.eval_dataset
    column = next((c for c in ("labels", "label") if c in (getattr(dataset, "column_names", None) or [])), None)
    if column is None:
        return None
    try:
        labels = np.asarray(dataset.with_format("numpy")[column], dtype=float)  # (N, L)
    except (TypeError, ValueError):
        return None
    return (labels == 1).sum(axis=0).astype(int).tolist() if labels.ndim == 2 else None


def _training_context(trainer, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The card's values about training: the target, the loss and its rules (``LossSpec``), the warm start, the
    annealing's temperatures and stages (``rows``: ``annealing_trajectory``), the weights kept."""
    args, target_key = trainer.args, trainer.args.east_target_key
    id2label = getattr(getattr(trainer.model, "config", None), "id2label", None) or {}
    beta = getattr(getattr(trainer, "east_loss", None), "beta", args.east_beta)
    betas = [(id2label.get(i, str(i)), b) for i, b in enumerate(beta)] if isinstance(beta, (list, tuple)) else None
    multi_label = is_multi_label(trainer)
    spec = loss_spec(args.east_loss, multi_label)
    annealing = getattr(trainer, "annealing", None)  # the schedule the run trained with
    ema_decay = annealing.ema_decay if annealing is not None else 0.0
    temperatures = [r["temperature"] for r in rows if r["temperature"] is not None]
    return dict(
        east=spec.anneals_temperature,  # a baseline's card has no temperature, stages or surrogate
        target_metric_label=f"{HUB_METRICS.get(target_key, (None, target_key))[1]}"
        + (f" (beta={args.east_beta})" if target_key == "fbeta" and not betas else ""),
        target_key=target_key,
        average=args.east_average,
        loss_description=_loss_description(trainer, multi_label),
        warm_start=_warm_start_description(trainer, spec, annealing),
        weights_kept=f"a moving average of the weights (decay {ema_decay:g} per step), evaluated and selected"
        if ema_decay > 0
        else "the training weights",
        initial_temperature=args.east_temperature,
        decay=args.east_decay,
        lr_decay=args.resolved_lr_decay,
        final_temperature=_fmt(temperatures[-1]) if temperatures else args.east_temperature,
        num_stages=len({r["stage"] for r in rows if isinstance(r["stage"], int)}) or 1,
        betas=betas,
        training_ended=training_ended(trainer.state, args, annealing),  # east-train prints the same
    )


def _loss_description(trainer, multi_label: bool) -> str:
    """The loss trained, in the registry's words: ``east_loss``'s, with the annealed cross-entropy where it has a
    weight (the cross-entropy the trainer trained; after a fallback to plain cross-entropy, that one, with the one
    before it named)."""
    args, target_key = trainer.args, trainer.args.east_target_key
    description = loss_spec(args.east_loss, multi_label).describe(target_key)
    ce_weight = args.resolved_ce_weight
    if ce_weight > 0:
        ce_name = getattr(getattr(trainer, "warm_start_loss", None), "name", args.resolved_ce_loss)
        if ce_name == "ldam":  # re-weighted from the start, not the registry's LDAM-DRW
            ce = LDAM_TERM
        else:
            ce = _without_baseline(loss_spec(ce_name, multi_label).describe(target_key))
        before = ""
        if _fell_back(trainer) and ce_name != "ce":  # the fallback's term is the plain cross-entropy
            ce, before = _without_baseline(loss_spec("ce", multi_label).describe(target_key)), ce
        description += f" + {ce_weight:g} x {ce}, its weight x{args.east_ce_weight_decay:g} at every stage"
        if before:
            description += f"; before the fallback to plain cross-entropy, {before}"
    return description


def _fell_back(trainer) -> bool:
    """Whether the run fell back to plain cross-entropy (``east_ce_fallback``; ``AnnealingSchedule.fell_back``)."""
    annealing = getattr(trainer, "annealing", None)
    return annealing is not None and annealing.schedule.fell_back


def _warm_start_description(trainer, spec: LossSpec, annealing) -> str:
    """The stage before the loss's own, in words: a second stage's first (``LossSpec.second_stage``), the
    cross-entropy warm start the run trained (``annealing``: its callback) and its length, or ``"none"``."""
    if spec.second_stage is not None:
        return spec.second_stage.first_description
    if annealing is None or not annealing.schedule.has_warm_start:
        return "none"
    args = trainer.args
    steps, epochs = args.east_warm_start_steps, args.east_warm_start_epochs
    ce = getattr(getattr(trainer, "warm_start_loss", None), "name", "ce")
    description = f"{WARM_START_WORDS.get(ce, ce)} for " + (
        plural(steps, "step") if steps else plural(epochs, "epoch") if epochs > 0 else "until its own early stopping"
    )
    if annealing.schedule.fell_back and annealing.restarted_at is not None:  # started over from the initial weights
        description += (
            f"; then, the warm start having ended predicting one class from a network that lost its input, from the "
            f"initial weights again at step {annealing.restarted_at}: plain cross-entropy until its own early "
            "stopping (east_ce_fallback) and EAST from T0"
        )
    elif annealing.schedule.fell_back:  # a second warm start, of plain cross-entropy, then EAST again from T0
        description += (
            "; then, the run having predicted one class at every evaluation, plain cross-entropy until its own early "
            "stopping (east_ce_fallback) and EAST again from T0"
        )
    return description


def write_model_card(
    trainer,
    output_dir: str | Path | None = None,
    *,
    recipe: dict[str, Any] | None = None,
    decision_rule: dict[str, Any] | None = None,
    tags: list[str] | None = None,
    license: str | None = None,
    language: str | list[str] | None = None,
    widget: list[dict[str, str]] | None = None,
    **shared: Any,
) -> Path | None:
    """Write ``README.md`` (the model card: ``card_metadata`` + the template filled with ``card_context``, signed)
    and ``annealing.png`` into ``output_dir``; main process only; returns the card's path. A ``README.md`` that is
    not an unchanged card of east_hf's stays as it is: the card goes to ``CARD_BESIDE_README`` (``card_path``),
    with one warning line naming both unless that file already holds the card (written again, as ``push_to_hub``
    does).
    ``widget``: the Hub widget's examples of a text model (default: a few validation texts, ``widget_examples``;
    ``[]`` for none). ``shared`` (``test_metrics``, ``metric_prefix``, ``dataset_name``, ``dataset_split``,
    ``base_model``, ``model_name``) go to both."""
    if not trainer.is_world_process_zero():
        return None
    output_dir = Path(output_dir or trainer.args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    shared["model_name"] = shared.get("model_name") or (trainer.args.hub_model_id or output_dir.name).split("/")[-1]
    metadata = card_metadata(trainer, tags=tags, license=license, language=language, widget=widget, **shared)
    context = card_context(trainer, output_dir, recipe=recipe, decision_rule=decision_rule, **shared)
    card = ModelCard.from_template(metadata, template_path=str(TEMPLATE_PATH), **context)
    text = signed(str(card)).encode("utf-8")
    path = card_path(output_dir)
    if path.name != "README.md" and not (path.is_file() and path.read_bytes() == text):  # else the same card again
        logger.warning(
            f"{output_dir / 'README.md'} was written or edited by hand (it is not the card east_hf wrote): it stays "
            f"as it is, and the model card is written to {path}"
        )
    path = write_atomically(path, lambda tmp: tmp.write_bytes(text))
    logger.info("Model card written to %s", path)
    return path
