"""east-compare: train EAST and its baselines with identical settings and seeds, and tabulate the test metrics.

    east-compare demo --seeds 1                        # a packaged recipe by name, as east-train takes it
    east-compare recipes/digits_longtail_f1.yaml --losses east,ce,dice --tuned false --reference ce
    east-compare RECIPE.yaml --variants "cold:--east_loss east" "warm:--east_loss east --east_warm_start ce" --seeds 3

By default it is the comparison a sceptical reader asks for: EAST against the strongest baselines, cross-entropy
(``ce``) and logit-adjusted cross-entropy (``la``), each model scored both as trained and with its decision rule
tuned on validation (``+tuned``), every variant paired against ``ce+tuned``. ``--tuned false`` (``--no_tuned``)
scores the models as trained only, against ``ce``.

Every (variant, seed) is one ``east-train RECIPE.yaml --seed s --output_dir DIR/variant/seed-s [variant flags]``
run, in this process, so everything ``east-train`` accepts works here too. Seeds vary the weight initialisation
and the batch order only; the data split (``split_seed``) is the recipe's, the same for every run (the paper's
protocol: repeated trials over random initialisations). ``--vary_split`` also passes ``--split_seed s``, so each
seed draws its own split (and long-tail subsample): the mean is then over test sets too, which matters when the
test split is small. A run whose ``test_results.json`` exists is skipped, and
one that was interrupted resumes from its last complete checkpoint, so the command can be re-run until it completes.
Each run's record (``east_hf.scripts.east_train.run_record``: every setting that affects training, defaults included,
the east_hf version and a fingerprint of the data) is kept in its folder as ``run_settings.json`` and in
``results.json``; a run whose record changed since (an edited recipe, other flags, a changed default, a data file
edited in place, another east_hf version) is trained again from scratch, with a message naming what changed, never
reused. Each run starts with a line on stderr, ``[k/n] VARIANT seed S: training (elapsed m:ss, ETA ~m:ss)``, the
ETA from the mean time of the runs trained so far. Secrets (``--hub_token``, ``HF_TOKEN``'s value) are masked in
every file written here.

Writes ``DIR/results.json`` (every run's test metrics), ``DIR/results.md`` (mean ± sample std over seeds, the layout
of the paper's Table 1, then each variant's difference from a reference variant, ``ce+tuned`` by default (``ce``
with ``--tuned false``), paired by seed: mean ± standard error and wins / ties / losses; variants that change the
target's beta, metric or average are left out of it, their F-beta being another metric; with a per-class
``--metric`` such as ``fbeta_positive`` only a change of beta or metric is) and ``DIR/results.png`` (the target
metric per variant, on an axis from 0). ``DIR`` is ``runs/compare-<recipe name>`` unless ``--output_dir`` says
otherwise: never ``runs/<recipe name>``, east-train's folder for the same recipe.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from east_hf.core import target_metric_key
from east_hf.core.annealing import anneal_key, monitor_mode
from east_hf.core.loss import LOSSES

__all__ = [
    "main",
    "comparison_figure",
    "summarize",
    "markdown_table",
    "paired_differences",
    "parse_variants",
    "recipe_metric",
    "record_changes",
    "redefining_flags",
    "reference_variant",
    "settings_changes",
]

logger = logging.getLogger(__name__)

LABELS = {"fbeta": "F-beta", "accuracy": "Accuracy", "mcc": "MCC"}
"""The table's columns after the target metric, in order (the paper's Table 1), and their names."""
DEFAULT_LOSSES = "east,ce,la"
"""EAST and the strongest baselines: cross-entropy and logit-adjusted cross-entropy (with ``--tuned``, each tuned)."""
TARGET_FLAGS = {"--east_beta", "--beta", "--east_metric", "--metric", "--east_average", "--east_pos_label"}
AVERAGE_FLAGS = {"--east_average", "--east_pos_label"}


def redefining_flags(metric: str) -> set[str]:
    """The flags that make a variant's ``metric`` another quantity than the reference's, so it is not paired.

    An averaged key (``fbeta``) changes with the average; a per-class key (``fbeta_positive``) names its class and
    does not, so a variant that trains another average can still be paired on it.

    >>> sorted(redefining_flags("fbeta_positive"))
    ['--beta', '--east_beta', '--east_metric', '--metric']
    """
    per_class = metric.startswith(("fbeta_", "precision_", "recall_"))
    return TARGET_FLAGS - AVERAGE_FLAGS if per_class else TARGET_FLAGS


def parse_variants(losses: str | None, variants: Sequence[str] | None) -> dict[str, list[str]]:
    """``--losses east,ce`` and ``--variants NAME:FLAGS`` -> {name: east-train flags}, in the order given."""
    out: dict[str, list[str]] = {}
    for loss in [x.strip() for x in (losses or "").split(",") if x.strip()]:
        if loss not in LOSSES:
            raise ValueError(f"Expected losses among {sorted(LOSSES)}, got {loss!r}")
        out[loss] = ["--east_loss", loss]
    for spec in variants or []:
        name, sep, flags = spec.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"Expected a variant as NAME:FLAGS (e.g. 'warm:--east_warm_start ce'), got {spec!r}")
        if name.strip() in out:
            raise ValueError(f"Expected distinct variant names, got {name.strip()!r} twice")
        out[name.strip()] = shlex.split(flags)
    if not out:
        raise ValueError("Expected at least one variant: pass --losses and/or --variants")
    return out


def recipe_metric(recipe: Mapping[str, Any]) -> str:
    """The test metric a recipe's runs are compared on: the key of the anneal monitor (what the runs are judged by
    across stages and their best checkpoint kept by) without ``eval_``, or the target metric where that monitor is a
    loss. Aliases (``metric:``) are resolved and ``EASTConfig``'s defaults fill what the recipe leaves out.

    >>> recipe_metric({"metric": "mcc"}), recipe_metric({}), recipe_metric({"east_anneal_monitor": "eval_loss"})
    ('mcc', 'fbeta', 'fbeta')
    """
    from east_hf.hf.config import EASTConfig
    from east_hf.scripts.arguments import ALIASES

    fields = {ALIASES.get(key, key): value for key, value in recipe.items()}
    metric = fields.get("east_metric", EASTConfig.east_metric)
    key = anneal_key(metric, fields.get("east_anneal_monitor", EASTConfig.east_anneal_monitor))
    return key.removeprefix("eval_") if monitor_mode(key) == "max" else target_metric_key(metric)


SETTINGS_NAME = "run_settings.json"
SETTINGS_GROUPS = ("script", "data", "model", "training")
"""The groups of settings in a run record; beside them it holds ``east_hf_version`` and ``data_fingerprint``."""


def _run_argv(
    recipe: str, run_dir: Path, seed: int, flags: list[str], extra: list[str], vary_split: bool = False
) -> list[str]:
    argv = [recipe, "--seed", str(seed), "--output_dir", str(run_dir), "--report_to", "none", *flags, *extra]
    return argv + (["--split_seed", str(seed)] if vary_split else [])


def run_settings(argv: list[str]) -> dict[str, Any]:
    """The record of an ``east-train`` command line (``east_train.run_record``: every setting that affects training,
    the east_hf version, the data's fingerprint), in its JSON form."""
    from east_hf.scripts.arguments import EASTArgumentParser
    from east_hf.scripts.east_train import run_record

    return json.loads(json.dumps(run_record(EASTArgumentParser().parse(argv)), default=str, sort_keys=True))


def settings_changes(old: dict[str, Any], new: dict[str, Any], defaults: dict[str, Any] | None = None) -> list[str]:
    """``key: old -> new`` for every setting that differs. A record written before records were complete lists only
    the fields that differed from the defaults of its day, so a field missing from one side has its value in
    ``defaults`` (today's), where given. Settings that do not affect training (``RECORD_LEAVES_OUT``) are not
    compared: older records hold some of them.

    >>> settings_changes({"training": {"learning_rate": 0.001}}, {"training": {"learning_rate": 0.01}})
    ['learning_rate: 0.001 -> 0.01']
    >>> settings_changes({"training": {"optim": "adamw_torch"}}, {"training": {}}, {"training": {"optim": "adamw_torch"}})
    []
    """
    from east_hf.scripts.east_train import RECORD_LEAVES_OUT

    out = []
    for group in [g for g in SETTINGS_GROUPS if g in old or g in new]:
        a, b, default = old.get(group, {}), new.get(group, {}), (defaults or {}).get(group, {})
        for k in sorted((set(a) | set(b)) - RECORD_LEAVES_OUT):
            before, after = a.get(k, default.get(k, "(default)")), b.get(k, default.get(k, "(default)"))
            if before != after:
                out.append(f"{k}: {before} -> {after}")
    return out


def _describe_data(fingerprint: dict[str, Any], path: bool = True) -> str:
    """A data fingerprint in words: ``data.csv (1234 bytes, sha256 0123456789ab)``; without ``path`` the part in
    parentheses only."""
    kind = fingerprint.get("kind")
    if kind in ("file", "folder"):
        files = f"{fingerprint['files']} files, " if kind == "folder" else ""
        contents = f"{files}{fingerprint['size']} bytes, sha256 {fingerprint['sha256'][:12]}"
        return f"{fingerprint['path']} ({contents})" if path else contents
    if kind == "missing":
        return f"{fingerprint['path']} (missing)"
    if kind == "sklearn":
        return fingerprint["name"] + (f" {fingerprint['parameters']}" if fingerprint.get("parameters") else "")
    if kind == "hub":
        config = f" ({fingerprint['config']})" if fingerprint.get("config") else ""
        return fingerprint["id"] + config + (f" at {fingerprint['revision']}" if fingerprint.get("revision") else "")
    return json.dumps(fingerprint, sort_keys=True)


def record_changes(old: dict[str, Any], new: dict[str, Any], defaults: dict[str, Any] | None = None) -> list[str]:
    """Why a run recorded as ``old`` is not the run ``new`` describes: ``settings changed: ...``, ``data changed:
    ...`` (the bytes, not the mtime: a file touched but not edited is the same data), ``east_hf 0.2.0 -> 0.3.0``;
    empty when they agree. A version or a fingerprint that ``old`` does not hold (an older record) is not compared.

    >>> record_changes({"east_hf_version": "0.2.0"}, {"east_hf_version": "0.3.0"})
    ['east_hf 0.2.0 -> 0.3.0']
    """
    out = []
    changes = settings_changes(old, new, defaults)
    if changes:
        out.append("settings changed: " + "; ".join(changes))
    before, after = old.get("data_fingerprint"), new.get("data_fingerprint")
    content = [{k: v for k, v in (fp or {}).items() if k != "mtime_ns"} for fp in (before, after)]
    if before is not None and after is not None and content[0] != content[1]:
        where = before.get("path")
        if where is not None and where == after.get("path"):  # the same file, edited
            out.append(f"data changed: {where}: {_describe_data(before, False)} -> {_describe_data(after, False)}")
        else:
            out.append(f"data changed: {_describe_data(before)} -> {_describe_data(after)}")
    version = old.get("east_hf_version")
    if version is not None and new.get("east_hf_version") is not None and version != new["east_hf_version"]:
        out.append(f"east_hf {version} -> {new['east_hf_version']}")
    return out


def unrecorded(old: dict[str, Any]) -> str:
    """The note for a record that predates data fingerprints or versions: what is therefore not checked ("" if none).

    >>> unrecorded({"training": {}})
    'its data and east_hf version were not recorded, so they are not checked'
    """
    recorded = (("data_fingerprint", "data"), ("east_hf_version", "east_hf version"))
    missing = [what for key, what in recorded if key not in old]
    if not missing:
        return ""
    verb, pronoun = ("were", "they are") if len(missing) > 1 else ("was", "it is")
    return f"its {' and '.join(missing)} {verb} not recorded, so {pronoun} not checked"


def default_settings() -> dict[str, Any]:
    """Today's default of every setting ``run_settings`` records, in the same JSON form."""
    from east_hf.scripts.east_train import default_settings as defaults

    return json.loads(json.dumps(defaults(), default=str, sort_keys=True))


def _run_one(
    recipe: str,
    run_dir: Path,
    seed: int,
    flags: list[str],
    extra: list[str],
    vary_split: bool = False,
    mode: str = "fresh",
) -> dict[str, Any]:
    """One ``east-train`` run; ``mode``: ``"fresh"``, ``"resume"`` (from the last complete checkpoint) or
    ``"overwrite"`` (the folder's earlier run is replaced)."""
    from east_hf.hf.cards import mask_secrets
    from east_hf.scripts.east_train import main as east_train

    argv = _run_argv(recipe, run_dir, seed, flags, extra, vary_split)
    if mode == "resume":
        argv += ["--resume_from_checkpoint", "true"]
    elif mode == "overwrite":
        argv += ["--overwrite_output_dir", "true"]
    start = time.time()
    code = east_train(argv)
    if code:
        raise RuntimeError(f"east-train exited with {code} for {' '.join(mask_secrets(argv))}")
    return {"wall_seconds": round(time.time() - start, 1)}


def _run_mode(run_dir: Path, settings: dict[str, Any], force: bool) -> tuple[str, str]:
    """How to treat a run folder: ``"skip"`` (finished with this record), ``"resume"``, ``"overwrite"`` or
    ``"fresh"``, and why (empty when nothing needs saying; for an older record, what it leaves unchecked)."""
    from east_hf.hf.checkpoints import last_complete_checkpoint, run_files

    if not run_files(run_dir):
        return "fresh", ""
    if force:
        return "overwrite", "--force"
    recorded_file = run_dir / SETTINGS_NAME
    if not recorded_file.is_file():
        return "overwrite", f"no {SETTINGS_NAME} records how the earlier run was trained"
    recorded = json.loads(recorded_file.read_text())
    changes = record_changes(recorded, settings, default_settings())
    if changes:
        return "overwrite", "; ".join(changes)
    note = unrecorded(recorded)
    if (run_dir / "test_results.json").is_file():
        return "skip", note
    if last_complete_checkpoint(run_dir) is not None:
        return "resume", "; ".join(filter(None, ["resuming from the last complete checkpoint", note]))
    return "overwrite", "no complete checkpoint to resume"


def _read_run(run_dir: Path) -> dict[str, Any]:
    metrics = json.loads((run_dir / "test_results.json").read_text())
    out = {k[len("test_") :]: v for k, v in metrics.items() if k.startswith("test_") and isinstance(v, (int, float))}
    state_file = run_dir / "trainer_state.json"
    if state_file.exists():
        state = json.loads(state_file.read_text())
        out["steps"] = state.get("global_step")
        temps = [  # each EAST evaluation's temperature (not the warm start's), under either key a saved log uses
            e.get("eval_east_temperature", e.get("east_temperature"))
            for e in state.get("log_history", [])
            if "eval_loss" in e and e.get("eval_east_stage", e.get("east_stage", 0)) >= 0
        ]
        out["final_temperature"] = temps[-1] if temps else None
    return out


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


def _label(key: str) -> str:
    """A column's name: ``fbeta`` -> ``F-beta``, ``fbeta_positive`` -> ``F-beta positive``, ``recall`` -> ``Recall``."""
    name, _, cls = key.partition("_")
    names = {**LABELS, "precision": "Precision", "recall": "Recall"}
    return f"{names[name]} {cls}".strip() if name in names else key.replace("_", " ")


def paired_table(pairs: dict[str, tuple], metric: str, reference: str) -> str:
    label = _label(metric)
    lines = [
        f"| variant | {label} − {reference} (paired, mean ± s.e.) | wins / ties / losses | seeds |",
        "|---|---|---|---|",
    ]
    for variant, (mean, se, wins, ties, losses, n) in pairs.items():
        spread = f" ± {se:.4f}" if n > 1 else ""  # one seed has no spread to show
        lines.append(f"| {variant} | {mean:+.4f}{spread} | {wins} / {ties} / {losses} | {n} |")
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


def _plot(summary: dict[str, dict[str, tuple]], metric: str, path: Path) -> None:
    fig = comparison_figure(summary, metric)
    if fig is not None:
        import matplotlib.pyplot as plt

        fig.savefig(path)
        plt.close(fig)


def _bool(text: str) -> bool:
    """A flag's boolean value, spelt as east-train takes it (``true``/``false``, ``yes``/``no``, ``1``/``0``)."""
    value = text.strip().lower()
    if value in ("true", "yes", "t", "y", "1"):
        return True
    if value in ("false", "no", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def reference_variant(args: argparse.Namespace) -> str:
    """The variant the others are paired against: ``--reference``, else cross-entropy with its decision rule tuned
    (``ce+tuned``), the strongest simple baseline, or plain ``ce`` when the rules are not tuned."""
    return args.reference or ("ce+tuned" if args.tuned else "ce")


def _clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour).

    >>> _clock(75), _clock(3725)
    ('1:15', '1:02:05')
    """
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="east-compare",
        description="Train EAST and baselines with identical settings and seeds; tabulate mean ± std test metrics. "
        "By default: EAST, cross-entropy and logit-adjusted cross-entropy, each also with its decision rule tuned on "
        "validation, paired against tuned cross-entropy (ce+tuned).",
        epilog="Arguments after '--' are passed to every east-train run (e.g. -- --max_steps 50).",
    )
    parser.add_argument("recipe", help="an east-train recipe: a YAML path or a packaged recipe's name (e.g. demo)")
    parser.add_argument(
        "--losses",
        default=None,
        help=f"comma-separated losses among {', '.join(LOSSES)} (default: {DEFAULT_LOSSES} unless --variants is given)",
    )
    parser.add_argument(
        "--tuned",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="also tune each run's decision rule on validation (east-train --tune_decision_rule) and add the tuned "
        "scores as variants '<name>+tuned'; a baseline is only as strong as its decision rule (default: true)",
    )
    parser.add_argument(
        "--no_tuned", dest="tuned", action="store_false", help="score the models as trained only (--tuned false)"
    )
    parser.add_argument("--variants", nargs="*", default=None, help="extra variants as NAME:FLAGS")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds, 0..N-1 (default 3)")
    parser.add_argument(
        "--metric", default=None, help="target metric key for the table (default: the recipe's anneal key, e.g. fbeta)"
    )
    parser.add_argument("--output_dir", default=None, help="default: runs/compare-<recipe name>")
    parser.add_argument("--force", action="store_true", help="re-run runs that already have test results")
    parser.add_argument(
        "--vary_split", action="store_true", help="seed s also draws the data split: --split_seed s for each run"
    )
    parser.add_argument(
        "--reference",
        default=None,
        help="variant the others are compared with, paired by seed (default: ce+tuned, or ce with --tuned false)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"expected --seeds >= 1, got {args.seeds}")
    from east_hf.hf.cards import mask_secrets
    from east_hf.scripts.arguments import load_recipe, resolve_recipe

    recipe_path = resolve_recipe(args.recipe)  # a YAML path, or a packaged recipe by name as east-train takes it
    try:
        recipe = load_recipe(recipe_path)
        variants = parse_variants(args.losses if args.losses or args.variants else DEFAULT_LOSSES, args.variants)
    except ValueError as e:
        parser.error(str(e))
    rows = [row for n in variants for row in ([n, f"{n}+tuned"] if args.tuned else [n])]
    reference = reference_variant(args)
    if args.reference is not None and reference not in rows:
        parser.error(f"Expected --reference among {rows}, got {reference!r}")
    metric = args.metric or recipe_metric(recipe)
    out_dir = Path(args.output_dir or f"runs/compare-{Path(args.recipe).stem}")
    out_dir.mkdir(parents=True, exist_ok=True)

    runs, total, k = [], len(variants) * args.seeds, 0
    started, trained, trained_seconds = time.monotonic(), 0, 0.0  # the ETA: mean time of a run trained here so far
    for seed in range(args.seeds):  # seed-major: an interrupted comparison leaves every variant with the same seeds
        for name, flags in variants.items():
            k += 1
            run_dir = out_dir / name / f"seed-{seed}"
            run_flags = [*flags, "--tune_decision_rule", "true"] if args.tuned else flags
            settings = run_settings(_run_argv(recipe_path, run_dir, seed, run_flags, extra, args.vary_split))
            mode, why = _run_mode(run_dir, settings, args.force)
            done = mode == "skip"
            if done and args.tuned and f"tuned_{metric}" not in _read_run(run_dir):
                done, mode, why = False, "overwrite", "finished without a tuned rule"
            state = ("done, skipped" if done else "training") + (f" ({why})" if why else "")
            if not done:  # left: this run and the ones after it, each as long as the mean so far
                eta = f", ETA ~{_clock(trained_seconds / trained * (total - k + 1))}" if trained else ""
                state += f" (elapsed {_clock(time.monotonic() - started)}{eta})"
            print(f"[{k}/{total}] {name} seed {seed}: {state}", file=sys.stderr, flush=True)
            info = {}
            if not done:
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / SETTINGS_NAME).write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
                start = time.monotonic()
                info = _run_one(recipe_path, run_dir, seed, run_flags, extra, args.vary_split, mode=mode)
                trained, trained_seconds = trained + 1, trained_seconds + time.monotonic() - start
            metrics = _read_run(run_dir)
            record = {"seed": seed, "flags": mask_secrets(run_flags), "output_dir": str(run_dir), "settings": settings}
            record.update(info)
            runs.append({"variant": name, "metrics": metrics, **record})
            if args.tuned:  # the same model with its decision rule tuned on validation
                tuned = {k[len("tuned_") :]: v for k, v in metrics.items() if k.startswith("tuned_")}
                runs.append({"variant": f"{name}+tuned", "metrics": tuned, **record})
            print(
                f"[{k}/{total}] {name} seed {seed}: test {metric}={metrics.get(metric, float('nan')):.4f}",
                file=sys.stderr,
                flush=True,
            )

    summary = summarize(runs)
    # variants that redefine the target (another beta, metric or average) score a different F-beta: not paired
    flags_that_redefine = redefining_flags(metric)
    redefines = {n for n, f in variants.items() if any(x.split("=")[0] in flags_that_redefine for x in f)}
    redefines |= {f"{n}+tuned" for n in redefines}
    paired_runs = [r for r in runs if r["variant"] not in redefines]
    names = {r["variant"] for r in runs}
    pairs = paired_differences(paired_runs, metric, reference) if reference in names else {}
    shown = mask_secrets([args.recipe, *argv[1:]] + (["--", *extra] if extra else []))  # less its secrets
    command = "east-compare " + " ".join(shlex.quote(a) for a in shown)
    (out_dir / "results.json").write_text(
        json.dumps(
            {
                "command": command,
                "recipe": mask_secrets(recipe),
                "metric": metric,
                "runs": runs,
                "summary": summary,
                "paired": {"reference": reference, "differences": pairs},
            },
            indent=2,
        )
    )
    table = markdown_table(summary, metric)
    split = "each seed with its own data split" if args.vary_split else "one data split"
    paired = f"\n\n{paired_table(pairs, metric, reference)}" if pairs else ""
    (out_dir / "results.md").write_text(
        f"# {Path(args.recipe).stem}: test metrics, mean ± std over {args.seeds} seeds ({split})\n\n"
        f"Command: `{command}`\n\n{table}{paired}\n\n* the target metric. Variant flags: "
        + "; ".join(f"{n}: `{' '.join(mask_secrets(f)) or '(recipe)'}`" for n, f in variants.items())
        + (
            ". `+tuned`: the same models with per-class logit offsets tuned on the validation split for the target "
            "metric (`--tune_decision_rule true`)"
            if args.tuned
            else ""
        )
        + "\n"
    )
    _plot(summary, metric, out_dir / "results.png")
    print(table + paired)
    print(f"\nresults: {out_dir / 'results.md'}, {out_dir / 'results.json'}, {out_dir / 'results.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
