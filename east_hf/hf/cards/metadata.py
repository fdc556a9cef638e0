"""A model card's YAML metadata: the Hub's ``model-index`` results, license, tags, task and, for a text model, the
inference widget's examples.

``card_metadata`` builds the ``huggingface_hub.ModelCardData`` that ``east_hf.hf.cards.model_card.write_model_card``
renders above the card's text. The widget's examples are a few validation texts (``widget_examples``): a text model's
card shows them in the Hub's inference widget.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCardData

__all__ = [
    "HUB_LICENSES",
    "HUB_METRICS",
    "card_metadata",
    "check_license",
    "is_hub_id",
    "is_multi_label",
    "model_task",
    "text_columns",
    "widget_examples",
]

# hard-metric key -> (metric_type for the Hub's model-index, as the `evaluate` metric of that name, human label)
HUB_METRICS = {
    "fbeta": ("fbeta", "F-beta"),
    "accuracy": ("accuracy", "Accuracy"),
    "mcc": ("matthews_correlation", "MCC"),
    "precision": ("precision", "Precision"),
    "recall": ("recall", "Recall"),
}
_MULTI_LABEL_NAMES = {"mcc": "MCC (macro over labels)", "accuracy": "Subset accuracy"}  # a multi-label card's names
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
# The license ids the Hub takes in a card's `license`, as listed at
# https://huggingface.co/docs/hub/repositories-licenses (the table of github.com/huggingface/hub-docs,
# docs/hub/repositories-licenses.md, 2026-08); huggingface_hub has no list of them.
HUB_LICENSES = frozenset(
    """
    apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0 bigcode-openrail-m
    afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc cc0-1.0 cc-by-2.0 cc-by-2.5
    cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0
    cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0 cdla-permissive-1.0
    cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0
    lgpl lgpl-2.1 lgpl-3.0 isc h-research intel-research lppl-1.3c ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl
    openmdw-1.0 openmdw-1.1 openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr deepfloyd-if-license
    fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 llama3.3 llama4 grok2-community gemma unknown
    other
    """.split()
)
WIDGET_EXAMPLES = 3  # validation texts in the widget
WIDGET_CHARACTERS = 300  # a longer text is cut at a word boundary before this many characters


def check_license(license: str | None) -> str | None:
    """``license`` when it is one of the Hub's license ids (``HUB_LICENSES``: ``apache-2.0``, ``mit``, ``cc-by-4.0``,
    ``other``, ...), else a ``ValueError``: the Hub refuses a card whose ``license`` is not one of its ids, which
    would fail the push after training.

    >>> check_license("apache-2.0"), check_license(None)
    ('apache-2.0', None)
    """
    if license is None or license in HUB_LICENSES:
        return license
    spelt = re.sub(r"[^a-z0-9.+]+", "-", str(license).lower()).strip("-")  # "Apache 2.0" -> apache-2.0
    spelt = re.sub(r"-?\blicen[cs]e\b-?", "", spelt)  # "MIT License" -> mit
    close = difflib.get_close_matches(spelt, sorted(HUB_LICENSES), n=1, cutoff=0.8)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"Expected a Hub license id (e.g. apache-2.0, mit, cc-by-4.0; other for a license the Hub does not list; "
        f"https://huggingface.co/docs/hub/repositories-licenses), got {license!r}{hint}"
    )


def is_hub_id(name: str | None) -> bool:
    """True for a Hub repository id (``owner/name``) that is not a local path: a card's ``base_model`` must be one.

    >>> is_hub_id("timm/resnet18.a1_in1k"), is_hub_id("/tmp/my-checkpoint"), is_hub_id(None)
    (True, False, False)
    """
    return bool(name) and _HUB_ID.fullmatch(str(name)) is not None and not Path(str(name)).exists()


def is_multi_label(trainer) -> bool:
    """Whether the trainer's task is multi-label: its own flag, or the model's ``config.problem_type``."""
    config = getattr(trainer.model, "config", None)
    return getattr(trainer, "multi_label", False) or (
        getattr(config, "problem_type", None) == "multi_label_classification"
    )


def model_task(model) -> str:
    """The Hub's pipeline tag of ``model``, read from its main input: pixels, token ids or table rows."""
    main_input = getattr(model, "main_input_name", None)
    return {"pixel_values": "image-classification", "input_ids": "text-classification"}.get(
        main_input, "tabular-classification"
    )


def text_columns(model) -> list[str]:
    """The text column and, for a text-pair model, the pair column a text run trained on (``config.json``'s
    ``east_text_columns``, which ``east-train`` writes); ``[]`` where the config does not say."""
    from east_hf.hf.predict.predictor import TEXT_COLUMNS_KEY

    return [c for c in getattr(getattr(model, "config", None), TEXT_COLUMNS_KEY, None) or [] if c]


def _metric_identity(key: str, args, id2label: dict) -> tuple[str, str, dict[str, Any] | None]:
    """(model-index type, name, args) of a hard metric key for the configured average and beta."""
    metric_type, label = HUB_METRICS.get(key, (key, key))
    if key not in ("fbeta", "precision", "recall"):
        return metric_type, label, None
    beta = args.east_beta
    plain_f1 = key == "fbeta" and (beta == 1 or beta == 1.0)
    if plain_f1:
        metric_type, label = "f1", "F1"
    metric_args: dict[str, Any] = {"average": args.east_average}
    if args.east_average == "binary":
        positive = id2label.get(args.east_pos_label, id2label.get(str(args.east_pos_label), args.east_pos_label))
        metric_args["pos_label"] = args.east_pos_label
        name = f"{label} (binary, positive class {positive})"
    else:
        name = f"{label} ({args.east_average})"
    if key == "fbeta" and not plain_f1:
        metric_args["beta"] = beta
    return metric_type, name, metric_args


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
    license: str | None = None,
    language: str | list[str] | None = None,
    widget: list[dict[str, str]] | None = None,
) -> ModelCardData:
    """The card's YAML metadata: name, license, language, tags, base model (Hub ids only), data set, ``metrics`` and a
    ``model-index`` with one ``EvalResult`` for each of the target metric, F-beta, MCC and accuracy found in
    ``test_metrics`` (keys like ``test_fbeta``), typed for the configured average (binary F1 is ``f1`` with
    ``average: binary``, not a macro score); for a text model a ``widget`` (``widget``, default
    ``widget_examples(trainer)``; ``[]`` for none)."""
    args, model = trainer.args, trainer.model
    config = getattr(model, "config", None)
    id2label = {int(k): v for k, v in (getattr(config, "id2label", None) or {}).items()}
    task = model_task(model)
    dataset_name = dataset_name or "custom"
    eval_results = [
        EvalResult(
            task_type=task,
            dataset_type=dataset_name,
            dataset_name=dataset_name,
            dataset_split=dataset_split,
            metric_type=metric_type,
            metric_name=name,
            metric_value=value,
            metric_args=metric_args,
        )
        for metric_type, name, value, metric_args in _results(trainer, test_metrics or {}, metric_prefix, id2label)
    ]
    metric_tag = _metric_identity(args.east_target_key, args, id2label)[0]
    is_timm = getattr(config, "model_type", None) in ("timm_wrapper", "east_darknet")  # east_darknet: a TimmWrapper
    all_tags = ["east", "east_hf", metric_tag, "generated_from_trainer"] + (["timm"] if is_timm else [])
    all_tags += ["multi-label"] if is_multi_label(trainer) else []
    widget = widget_examples(trainer) if widget is None else widget
    return ModelCardData(
        model_name=model_name,
        license=check_license(license),
        language=language,
        library_name="peft" if type(model).__module__.startswith("peft.") else "transformers",
        tags=list(dict.fromkeys(all_tags + list(tags or []))),
        base_model=base_model if is_hub_id(base_model) else None,
        datasets=[dataset_name] if dataset_name != "custom" else None,
        metrics=list(dict.fromkeys(r.metric_type for r in eval_results)) or None,
        pipeline_tag=task,
        eval_results=eval_results or None,
        **({"widget": widget} if widget else {}),
    )


def _results(
    trainer, test_metrics: dict[str, float], metric_prefix: str, id2label: dict
) -> list[tuple[str, str, float, dict[str, Any] | None]]:
    """(model-index type, name, value, args) of each of the target metric, F-beta, MCC and accuracy in
    ``test_metrics``."""
    args, multi_label = trainer.args, is_multi_label(trainer)
    out = []
    for key in dict.fromkeys([args.east_target_key, "fbeta", "mcc", "accuracy"]):
        value = test_metrics.get(f"{metric_prefix}_{key}")
        if value is None:
            continue
        metric_type, name, metric_args = _metric_identity(key, args, id2label)
        if multi_label and key in _MULTI_LABEL_NAMES:  # averaged over labels, or over rows
            name = _MULTI_LABEL_NAMES[key]
        out.append((metric_type, name, float(value), metric_args))
    return out


def widget_examples(trainer, n: int = WIDGET_EXAMPLES) -> list[dict[str, str]]:
    """The Hub widget's examples for a text model: the first validation text of each of up to ``n`` classes, titled
    with its class (multi-label: the first ``n`` texts), as ``{"text": ...}``. A text pair is one text with the
    tokenizer's separator between the two parts (``"premise [SEP] hypothesis"``), the form the Hub's widget takes
    for pair models. The texts are the evaluation set's own columns where it keeps them, else its ``input_ids``
    decoded (a normalising tokenizer's form of them: lower case for an uncased one). ``[]`` for a model that does
    not take text, or an evaluation set that is not a ``datasets.Dataset`` of texts."""
    dataset, tokenizer = trainer.eval_dataset, getattr(trainer, "processing_class", None)
    if model_task(trainer.model) != "text-classification" or tokenizer is None:
        return []
    names = getattr(dataset, "column_names", None) or []
    columns = text_columns(trainer.model)
    raw = bool(columns) and all(c in names for c in columns)
    if not raw and "input_ids" not in names:
        return []
    rows, titles = _example_rows(trainer, dataset, n)
    examples = []
    for row, title in zip(rows, titles):
        item = dataset.with_format(None)[row]
        parts = [item[c] for c in columns] if raw else _decoded(tokenizer, item["input_ids"])
        parts = [_shortened(str(p)) for p in parts if isinstance(p, str) and p.strip()]
        if parts:
            examples.append({"text": _separator(tokenizer).join(parts), **({"example_title": title} if title else {})})
    return examples


def _example_rows(trainer, dataset, n: int) -> tuple[list[int], list[str | None]]:
    """The rows of the widget's examples and their titles: the first row of each of the first ``n`` classes in
    ``dataset``'s label column (titled with the class name), else its first ``n`` rows (untitled)."""
    column = next((c for c in ("labels", "label") if c in dataset.column_names), None)
    id2label = getattr(getattr(trainer.model, "config", None), "id2label", None) or {}
    if column is None or is_multi_label(trainer):
        rows = list(range(min(n, len(dataset))))
        return rows, [None] * len(rows)
    first: dict[int, int] = {}
    for row, label in enumerate(dataset.with_format(None)[column]):
        if isinstance(label, int) and label >= 0 and label not in first:
            first[label] = row
            if len(first) == n:
                break
    rows = sorted(first.values())
    by_row = {row: label for label, row in first.items()}
    return rows, [str(id2label.get(by_row[r], by_row[r])) for r in rows]


def _decoded(tokenizer, ids: list[int]) -> list[str]:
    """The text(s) of one row's ``input_ids``: the part before the first separator token and the part after it (empty
    for a single text), each without special tokens."""
    sep = tokenizer.sep_token_id
    cut = ids.index(sep) if sep is not None and sep in ids else len(ids)
    return [tokenizer.decode(part, skip_special_tokens=True).strip() for part in (ids[:cut], ids[cut:])]


def _separator(tokenizer) -> str:
    """What joins a pair's two texts into the widget's one: the separator tokens the tokenizer puts between them (one
    ``[SEP]`` for BERT, ``</s></s>`` for RoBERTa), with a space on either side."""
    sep = tokenizer.sep_token
    if not sep:
        return " "
    between = tokenizer.num_special_tokens_to_add(pair=True) - tokenizer.num_special_tokens_to_add(pair=False)
    return f" {sep * max(1, between)} "


def _shortened(text: str) -> str:
    """``text`` in one line, cut at a word boundary before ``WIDGET_CHARACTERS`` characters where it is longer."""
    text = " ".join(text.split())
    if len(text) <= WIDGET_CHARACTERS:
        return text
    return text[:WIDGET_CHARACTERS].rsplit(" ", 1)[0] + " ..."
