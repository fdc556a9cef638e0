"""The tables and the figure of an ``east-compare``: ``results.json``, ``results.md`` and ``results.png``.

``results.md`` holds the mean ± sample std over seeds of each variant's test metrics (the layout of the paper's Table
1), then each variant's difference from the reference variant, paired by seed: mean ± standard error, wins / ties /
losses, and its training wall-clock against the reference's (the median of the seeds' ratios), so that the cost of
a variant stands beside its score. ``results.png`` shows the target metric per variant on an axis from 0.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from east_hf.hf.secret_masking import mask_secrets
from east_hf.scripts.compare_plan import unpaired_variants

__all__ = [
    "comparison_figure",
    "earlier_command",
    "markdown_table",
    "paired_differences",
    "paired_table",
    "paired_time_ratios",
    "save_figure",
    "summarize",
    "write_results",
]

LABELS = {"fbeta": "F-beta", "accuracy": "Accuracy", "mcc": "MCC"}
"""The table's columns after the target metric, in order (the paper's Table 1), and their names."""
TRAIN_SECONDS = "train_seconds"
"""A run's training wall-clock in seconds, beside its test metrics (the Trainer's ``train_runtime``)."""


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """{variant: {metric: (mean, sample std, n)}} over the seeds of each variant."""
    table: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        row = table.setdefault(run["variant"], {})
        for key, value in run["metrics"].items():
            if isinstance(value, (int, float)) and value is not None:
                row.setdefault(key, []).append(float(value))
    return {
        variant: {k: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v)) for k, v in row.items()}
        for variant, row in table.items()
    }


def paired_differences(
    runs: list[dict[str, Any]], metric: str, reference: str
) -> dict[str, tuple[float, float, int, int, int, int]]:
    """{variant: (mean, standard error, wins, ties, losses, n)} of ``metric(variant) - metric(reference)`` over the
    seeds both have. Pairing by seed removes what a seed shares across variants (the initial weights, the batch order,
    with ``--vary_split`` the test set), so the difference is measured more tightly than by comparing two means.

    >>> runs = [{"variant": v, "seed": s, "metrics": {"f1": m}}
    ...         for v, ms in (("ce", [0.8, 0.9, 0.7]), ("east", [0.85, 0.9, 0.8])) for s, m in enumerate(ms)]
    >>> {k: tuple(round(x, 4) for x in v) for k, v in paired_differences(runs, "f1", "ce").items()}
    {'east': (0.05, 0.0289, 2, 1, 0, 3)}
    """
    by_variant: dict[str, dict[int, float]] = {}
    for run in runs:
        value = run["metrics"].get(metric)
        if isinstance(value, (int, float)):
            by_variant.setdefault(run["variant"], {})[run["seed"]] = float(value)
    base = by_variant.get(reference, {})
    out = {}
    for variant, values in by_variant.items():
        seeds = sorted(set(values) & set(base))
        if variant == reference or not seeds:
            continue
        diffs = [values[s] - base[s] for s in seeds]
        se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else 0.0
        wins = sum(d > 1e-12 for d in diffs)
        losses = sum(d < -1e-12 for d in diffs)
        out[variant] = (statistics.fmean(diffs), se, wins, len(diffs) - wins - losses, losses, len(diffs))
    return out


def paired_time_ratios(runs: list[dict[str, Any]], reference: str) -> dict[str, tuple[float, int]]:
    """{variant: (median, n)} of ``train_seconds(variant) / train_seconds(reference)`` over the seeds both have: the
    training wall-clock of each variant against the reference's, paired by seed (runs of one seed share the machine's
    state of the moment, and the median ignores a run slowed by something else on the machine). A ``+tuned`` variant
    costs its model's training.

    >>> runs = [{"variant": v, "seed": s, "metrics": {"train_seconds": t}}
    ...         for v, ts in (("ce", [10, 20, 10]), ("east", [15, 50, 12])) for s, t in enumerate(ts)]
    >>> paired_time_ratios(runs, "ce")
    {'east': (1.5, 3)}
    """
    seconds: dict[str, dict[int, float]] = {}
    for run in runs:
        value = run["metrics"].get(TRAIN_SECONDS)
        if isinstance(value, (int, float)) and value > 0:
            seconds.setdefault(run["variant"], {})[run["seed"]] = float(value)
    base = seconds.get(reference, {})
    out = {}
    for variant, values in seconds.items():
        seeds = sorted(set(values) & set(base))
        if variant != reference and seeds:
            out[variant] = (statistics.median(values[s] / base[s] for s in seeds), len(seeds))
    return out


def _label(key: str) -> str:
    """A column's name: ``fbeta`` -> ``F-beta``, ``fbeta_positive`` -> ``F-beta positive``,
    ``recall`` -> ``Recall``."""
    name, _, cls = key.partition("_")
    names = {**LABELS, "precision": "Precision", "recall": "Recall"}
    return f"{names[name]} {cls}".strip() if name in names else key.replace("_", " ")


def paired_table(
    pairs: dict[str, tuple], metric: str, reference: str, time_ratios: Mapping[str, tuple[float, int]] | None = None
) -> str:
    """The paired table: each variant's difference from ``reference`` (``paired_differences``), one row each, and its
    training wall-clock against the reference's (``paired_time_ratios``; a blank cell where a run did not record
    it)."""
    label, ratios = _label(metric), time_ratios or {}
    lines = [
        f"| variant | {label} − {reference} (paired, mean ± s.e.) | wins / ties / losses | seeds "
        f"| training time × {reference} (median, paired) |",
        "|---|---|---|---|---|",
    ]
    for variant, (mean, se, wins, ties, losses, n) in pairs.items():
        spread = f" ± {se:.4f}" if n > 1 else ""  # one seed has no spread to show
        ratio = f"{ratios[variant][0]:.2f}" if variant in ratios else ""
        lines.append(f"| {variant} | {mean:+.4f}{spread} | {wins} / {ties} / {losses} | {n} | {ratio} |")
    return "\n".join(lines)


def _columns(summary: dict[str, dict[str, tuple]], metric: str) -> list[str]:
    keys = list(dict.fromkeys([metric, *LABELS]))
    per_class = sorted(
        {k for row in summary.values() for k in row if k.startswith(("precision_", "recall_"))},
        key=lambda k: (k.split("_", 1)[1], k),
    )
    # a binary run reports precision and recall of the positive class once, averaged keys without a class suffix
    rates = [] if per_class else ["precision", "recall"]
    return [k for k in [*keys, *rates] if any(k in row for row in summary.values())] + per_class


def markdown_table(summary: dict[str, dict[str, tuple]], metric: str = "fbeta") -> str:
    """Rows: variants; columns: target metric, F-beta, accuracy, MCC, per-class precision/recall; mean ± std."""
    columns = _columns(summary, metric)
    header = ["variant", "n"] + [_label(c) + (" *" if c == metric else "") for c in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant, row in summary.items():
        n = max((v[2] for v in row.values()), default=0)
        cells = [
            (f"{row[c][0]:.4f} ± {row[c][1]:.4f}" if row[c][2] > 1 else f"{row[c][0]:.4f}") if c in row else ""
            for c in columns
        ]
        lines.append("| " + " | ".join([variant, str(n), *cells]) + " |")
    return "\n".join(lines)


def comparison_figure(summary: dict[str, dict[str, tuple]], metric: str):
    """The bar chart of ``metric`` per variant (mean ± std over seeds), a matplotlib ``Figure``, or ``None`` when no
    variant has it. The y-axis starts at 0 (below it only for a metric that goes negative, such as MCC), so bar
    heights compare as the scores do; each bar carries its mean, which shows the gaps a full axis makes small."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [v for v in summary if metric in summary[v]]
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(names)), 3.2), dpi=100)
    means = [summary[v][metric][0] for v in names]
    stds = [summary[v][metric][1] for v in names]
    bars = ax.bar(names, means, yerr=stds, capsize=4, color="tab:blue", alpha=0.8)
    ax.bar_label(bars, fmt="%.3f", fontsize=8, label_type="center", color="white")
    low, high = min(m - s for m, s in zip(means, stds)), max(m + s for m, s in zip(means, stds))
    ax.set_ylim(min(0.0, low - 0.05), max(min(1.0, high + 0.03), 0.05))
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_ylabel(f"test {metric} (mean ± std)")
    ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    return fig


def save_figure(summary: dict[str, dict[str, tuple]], metric: str, path: Path) -> None:
    """``comparison_figure`` saved as a PNG at ``path``; nothing when no variant has ``metric``."""
    fig = comparison_figure(summary, metric)
    if fig is not None:
        import matplotlib.pyplot as plt

        fig.savefig(path)
        plt.close(fig)


def _footnote(variants: Mapping[str, list[str]], tuned: bool) -> str:
    """What the table's marks and rows mean: the target metric, each variant's flags, the ``+tuned`` rows."""
    flags = "; ".join(f"{n}: `{' '.join(mask_secrets(f)) or '(recipe)'}`" for n, f in variants.items())
    rule = (
        ". `+tuned`: the same models with per-class logit offsets (multi-label: per-label thresholds) tuned on the "
        "validation split for the target metric (`--tune_decision_rule true`)"
        if tuned
        else ""
    )
    return f"* the target metric. Variant flags: {flags}{rule}"


def earlier_command(out_dir: Path) -> str | None:
    """The command whose table ``out_dir`` holds (``results.json``'s ``command``): None where there is no table,
    ``"an earlier east-compare"`` where its ``results.json`` does not read back."""
    table, results = out_dir / "results.md", out_dir / "results.json"
    if not table.is_file() and not results.is_file():
        return None
    try:
        command = json.loads(results.read_text()).get("command")
    except (OSError, ValueError, AttributeError):  # missing, truncated, not an object
        command = None
    return command if isinstance(command, str) else "an earlier east-compare"


def write_results(
    out_dir: Path,
    runs: list[dict[str, Any]],
    *,
    command: str,
    recipe: Mapping[str, Any],
    title: str,
    variants: Mapping[str, list[str]],
    metric: str,
    reference: str,
    seeds: int,
    tuned: bool,
    vary_split: bool,
) -> str:
    """Write ``results.json`` (the command, the recipe, every run, the summary and the paired differences),
    ``results.md`` and ``results.png`` into ``out_dir``; returns the tables of ``results.md``. The recipe and the
    variants' flags are written with their secrets masked; ``command`` and ``runs`` as they are given (masked by their
    makers).

    Variants that redefine the target (``unpaired_variants``) are left out of the paired differences, and all of them
    when ``reference`` has no runs."""
    summary = summarize(runs)
    unpaired = unpaired_variants(variants, metric)
    paired_runs = [r for r in runs if r["variant"] not in unpaired]
    names = {r["variant"] for r in runs}
    pairs = paired_differences(paired_runs, metric, reference) if reference in names else {}
    time_ratios = paired_time_ratios(runs, reference)
    results = {
        "command": command,
        "recipe": mask_secrets(recipe),
        "metric": metric,
        "runs": runs,
        "summary": summary,
        "paired": {"reference": reference, "differences": pairs, "time_ratios": time_ratios},
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
    table = markdown_table(summary, metric)
    paired = f"\n\n{paired_table(pairs, metric, reference, time_ratios)}" if pairs else ""
    split = "each seed with its own data split" if vary_split else "one data split"
    (out_dir / "results.md").write_text(
        f"# {title}: test metrics, mean ± std over {seeds} seeds ({split})\n\n"
        f"Command: `{command}`\n\n{table}{paired}\n\n{_footnote(variants, tuned)}\n"
    )
    save_figure(summary, metric, out_dir / "results.png")
    return table + paired
