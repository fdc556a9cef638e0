"""Model cards for EAST models: ``model-index`` metadata, the annealing trajectory (table and PNG), per-class results.

Rendered with ``huggingface_hub.ModelCard.from_template`` from the template in ``east_hf/hub_cards/`` (the
top-level ``hub_cards/`` folder of the repository, installed as package data). Written on the main process only.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import logging
import re
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import EvalResult, ModelCard, ModelCardData

__all__ = [
    "CITATION",
    "TEMPLATE_PATH",
    "annealing_trajectory",
    "card_context",
    "card_metadata",
    "hub_preflight",
    "plot_annealing",
    "write_model_card",
]

logger = logging.getLogger(__name__)

TEMPLATE_PATH = Path(str(importlib.resources.files("east_hf.hub_cards") / "east_model_card.md"))
PLOT_FILE = "annealing.png"

CITATION = """@article{li2025east,
  title   = {Aligning Multiclass Neural Network Classifier Criterion with Task Performance Metrics},
  author  = {Li, Deyuan and Lee, Taesoo Daniel and V{\\'a}zquez, Marynel and Tsoi, Nathan},
  journal = {arXiv preprint},
  year    = {2025}
}"""

# hard-metric key -> (metric_type for the Hub's model-index, human label)
_HUB_METRICS = {
    "fbeta": ("macro_fbeta", "F-beta"),
    "accuracy": ("accuracy", "Accuracy"),
    "mcc": ("mcc", "MCC"),
    "precision": ("precision", "Precision"),
    "recall": ("recall", "Recall"),
}
_SECRET = re.compile(r"token|password|secret", re.IGNORECASE)


def hub_preflight(args) -> None:
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


def annealing_trajectory(log_history: list[dict[str, Any]], target_key: str) -> list[dict[str, Any]]:
    """One row per evaluation: step, stage, temperature, validation surrogate loss and validation target metric.

    Evaluations of a cross-entropy warm start (stage -1) have the stage ``"CE warm start"``, no temperature, and the
    cross-entropy validation loss in the loss column.
    """
    rows = []
    for entry in log_history:
        if "eval_loss" not in entry:
            continue
        stage = entry.get("eval_east_stage", entry.get("east_stage", ""))
        rows.append(
            {
                "step": entry.get("step"),
                "stage": "CE warm start" if stage == -1 else stage,
                "temperature": None
                if stage == -1
                else entry.get("eval_east_temperature", entry.get("east_temperature")),
                "loss": entry.get("eval_loss"),
                "metric": entry.get(f"eval_{target_key}"),
            }
        )
    return rows


def plot_annealing(rows: list[dict[str, Any]], path: str | Path, target_key: str) -> Path | None:
    """Temperature and validation metric against step, stage boundaries marked, saved as PNG."""
    rows = [r for r in rows if r["step"] is not None and r["temperature"] is not None]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    fig, ax_t = plt.subplots(figsize=(7, 3.5), dpi=100)
    ax_t.step(steps, [r["temperature"] for r in rows], where="post", color="tab:red", label="temperature")
    ax_t.set_xlabel("step")
    ax_t.set_ylabel("temperature T", color="tab:red")
    ax_m = ax_t.twinx()
    metric = [r["metric"] if r["metric"] is not None else float("nan") for r in rows]
    ax_m.plot(steps, metric, marker="o", ms=3, color="tab:blue", label=f"validation {target_key}")
    ax_m.plot(steps, [r["loss"] for r in rows], ls="--", color="tab:gray", label="validation surrogate loss")
    ax_m.set_ylabel(f"validation {target_key} / loss")
    for prev, row in zip(rows, rows[1:]):
        if row["stage"] != prev["stage"]:
            ax_t.axvline(row["step"], color="k", alpha=0.25, lw=1)
    handles = ax_t.get_legend_handles_labels()[0] + ax_m.get_legend_handles_labels()[0]
    ax_m.legend(handles=handles, loc="best", fontsize=8)
    ax_t.set_title("EAST annealing (vertical lines: temperature decreases)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def _versions() -> list[tuple[str, str]]:
    out = []
    for name in ("east_hf", "torch", "transformers", "timm", "datasets", "evaluate", "huggingface_hub"):
        try:
            out.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _fmt(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _clean_recipe(recipe: dict[str, Any] | None) -> str | None:
    if not recipe:
        return None
    safe = {k: v for k, v in recipe.items() if not _SECRET.search(str(k))}  # never leak a token into the card
    return yaml.safe_dump(safe, sort_keys=False).strip()


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


def card_metadata(
    trainer,
    *,
    test_metrics: dict[str, float] | None = None,
    metric_prefix: str = "test",
    dataset_name: str | None = None,
    dataset_split: str = "test",
    base_model: str | None = None,
    model_name: str | None = None,
    tags: list[str] | None = None,
) -> ModelCardData:
    """The card's YAML metadata: name, tags, base model, data set, and a ``model-index`` with one ``EvalResult`` for
    each of the target metric, F-beta, MCC and accuracy found in ``test_metrics`` (keys like ``test_fbeta``)."""
    args, model = trainer.args, trainer.model
    config = getattr(model, "config", None)
    target_key = args.east_target_key
    image_model = getattr(model, "main_input_name", None) == "pixel_values"
    test_metrics = test_metrics or {}
    dataset_name = dataset_name or "custom"
    eval_results = []
    for key in dict.fromkeys([target_key, "fbeta", "mcc", "accuracy"]):
        value = test_metrics.get(f"{metric_prefix}_{key}")
        if value is None:
            continue
        metric_type, label = _HUB_METRICS.get(key, (key, key))
        eval_results.append(
            EvalResult(
                task_type="image-classification" if image_model else "tabular-classification",
                dataset_type=dataset_name,
                dataset_name=dataset_name,
                dataset_split=dataset_split,
                metric_type=metric_type,
                metric_name=f"{label} ({args.east_average})" if key in ("fbeta", "precision", "recall") else label,
                metric_value=float(value),
            )
        )
    metric_tag = {"fbeta": "f1" if args.east_beta == 1.0 else "fbeta"}.get(target_key, target_key)
    is_timm = getattr(config, "model_type", None) == "timm_wrapper"
    all_tags = ["east", "east_hf", metric_tag] + (["timm"] if is_timm else []) + list(tags or [])
    return ModelCardData(
        model_name=model_name,
        library_name="transformers",
        tags=list(dict.fromkeys(all_tags)),
        base_model=base_model,
        datasets=[dataset_name] if dataset_name != "custom" else None,
        pipeline_tag="image-classification" if image_model else "tabular-classification",
        eval_results=eval_results or None,
    )


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
    """The values the card's template (``hub_cards/east_model_card.md``) renders: the loss, the annealing and its
    trajectory (plotted into ``output_dir / annealing.png``), the results, how to load the model, the recipe."""
    args, model = trainer.args, trainer.model
    config = getattr(model, "config", None)
    target_key = args.east_target_key
    image_model = getattr(model, "main_input_name", None) == "pixel_values"
    architecture = getattr(config, "architecture", None) or type(model).__name__
    is_timm = getattr(config, "model_type", None) == "timm_wrapper"
    test_metrics = test_metrics or {}
    rows = annealing_trajectory(trainer.state.log_history, target_key)
    plot = plot_annealing(rows, output_dir / PLOT_FILE, target_key)
    loss_fn = getattr(trainer, "east_loss", None)
    id2label = getattr(config, "id2label", None) or {}
    beta = getattr(loss_fn, "beta", args.east_beta)
    betas = [(id2label.get(i, str(i)), b) for i, b in enumerate(beta)] if isinstance(beta, (list, tuple)) else None
    loss_description = {
        "east": f"EAST surrogate, 1 - soft {target_key}",
        "ce": "cross-entropy (baseline)",
        "wce": "class-weighted cross-entropy, inverse training-class frequency (baseline)",
        "la": "logit-adjusted cross-entropy, tau = 1 (Menon et al., 2021; baseline)",
        "dice": "soft Dice (baseline)",
    }[args.east_loss]
    warm_start = "none"
    if args.east_annealing and args.annealing_schedule().has_warm_start:
        steps, epochs = args.east_warm_start_steps, args.east_warm_start_epochs
        warm_start = "cross-entropy for " + (
            f"{steps} steps" if steps else f"{epochs:g} epochs" if epochs > 0 else "until its own early stopping"
        )
    summary = ("accuracy", "fbeta", "mcc", "precision", "recall", "loss")
    results = [
        (name, _fmt(test_metrics[f"{metric_prefix}_{name}"]))
        for name in summary
        if f"{metric_prefix}_{name}" in test_metrics
    ]
    temperatures = [r["temperature"] for r in rows if r["temperature"] is not None]
    return dict(
        model_name=model_name,
        task_description="an image classifier" if image_model else "a tabular classifier",
        target_metric_label=f"{_HUB_METRICS.get(target_key, (None, target_key))[1]}"
        + (f" (beta={args.east_beta})" if target_key == "fbeta" and not betas else ""),
        target_key=target_key,
        average=args.east_average,
        loss_description=loss_description,
        warm_start=warm_start,
        initial_temperature=args.east_temperature,
        decay=args.east_decay,
        final_temperature=_fmt(temperatures[-1]) if temperatures else args.east_temperature,
        num_stages=len({r["stage"] for r in rows if isinstance(r["stage"], int)}) or 1,
        betas=betas,
        results=results,
        per_class=_per_class(test_metrics, metric_prefix),
        plot_file=plot.name if plot else None,
        trajectory=[{k: _fmt(v) for k, v in r.items()} for r in rows],
        base_model=base_model,
        dataset_name=dataset_name or "custom",
        dataset_split=dataset_split,
        auto_class="AutoModelForImageClassification" if image_model else "AutoModelForSequenceClassification",
        repo_id=args.hub_model_id or str(output_dir),
        needs_east_import=is_timm and str(architecture).startswith("darknet"),
        architecture=architecture,
        recipe=_clean_recipe(recipe),
        decision_rule=decision_rule,
        versions=_versions(),
        citation=CITATION,
    )


def write_model_card(
    trainer,
    output_dir: str | Path | None = None,
    *,
    test_metrics: dict[str, float] | None = None,
    metric_prefix: str = "test",
    dataset_name: str | None = None,
    dataset_split: str = "test",
    recipe: dict[str, Any] | None = None,
    base_model: str | None = None,
    model_name: str | None = None,
    tags: list[str] | None = None,
    decision_rule: dict[str, Any] | None = None,
) -> Path | None:
    """Write ``README.md`` (the model card: ``card_metadata`` + the template filled with ``card_context``) and
    ``annealing.png`` into ``output_dir``; main process only."""
    if not trainer.is_world_process_zero():
        return None
    output_dir = Path(output_dir or trainer.args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model_name = model_name or (trainer.args.hub_model_id or output_dir.name).split("/")[-1]
    shared = dict(
        test_metrics=test_metrics,
        metric_prefix=metric_prefix,
        dataset_name=dataset_name,
        dataset_split=dataset_split,
        base_model=base_model,
        model_name=model_name,
    )
    metadata = card_metadata(trainer, tags=tags, **shared)
    context = card_context(trainer, output_dir, recipe=recipe, decision_rule=decision_rule, **shared)
    card = ModelCard.from_template(metadata, template_path=str(TEMPLATE_PATH), **context)
    path = output_dir / "README.md"
    card.save(path)
    logger.info("Model card written to %s", path)
    return path
