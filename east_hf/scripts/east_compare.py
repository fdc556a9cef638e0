"""east-compare: train EAST and its baselines with identical settings and seeds, and tabulate the test metrics.

    east-compare demo --seeds 1                        # a packaged recipe by name, as east-train takes it
    east-compare recipes/digits_longtail_f1.yaml --losses east,ce,dice --tuned false --reference ce
    east-compare RECIPE.yaml --variants "cold:--east_loss east" "warm:--east_loss east --east_warm_start ce" --seeds 3

By default it is the comparison a sceptical reader asks for: EAST against the strongest baselines, cross-entropy
(``ce``) and logit-adjusted cross-entropy (``la``), each model scored both as trained and with its decision rule
tuned on validation (``+tuned``), every variant paired against ``ce+tuned``. ``--tuned false`` (``--no_tuned``)
scores the models as trained only, against ``ce``. Every run is trained with ``--tune_decision_rule true`` either
way: the rule is tuned after the as-trained test evaluation (the saved model applies it; the as-trained weights stay
in the best checkpoint), so ``--tuned`` only chooses the rows, and a comparison that differs from an earlier one in
``--tuned``, ``--reference``, ``--metric``, ``--seeds`` or which variants it tables reuses every run trained so far.

Every (variant, seed) is one ``east-train RECIPE.yaml --seed s --output_dir DIR/variant/seed-s [variant flags]``
run, in this process, so everything ``east-train`` accepts works here too. Seeds vary the weight initialisation
and the batch order only; the data split (``split_seed``) is the recipe's, the same for every run (the paper's
protocol: repeated trials over random initialisations). ``--vary_split`` also passes ``--split_seed s``, so each
seed draws its own split (and long-tail subsample): the mean is then over test sets too, which matters when the
test split is small. A run whose ``test_results.json`` exists is skipped, and
one that was interrupted resumes from its last complete checkpoint, so the command can be re-run until it completes.
Each run's record (``east_hf.scripts.run_record.run_record``: every setting that affects training, defaults included,
the east_hf version and a fingerprint of the data) is kept in its folder as ``run_settings.json`` and in
``results.json``; a run whose record changed since under the same flags (an edited recipe, a changed default, a data
file edited in place, another east_hf version) is trained again from scratch, with a message naming what changed,
never reused. A run whose ``run_settings.json``, ``test_results.json`` or ``trainer_state.json`` does not read back
(truncated by a full disk or a kill) is not done: it is trained again, its line naming the file.

One folder holds one comparison's runs, whatever tables are drawn from them: a comparison that would train again and
replace runs the folder's earlier comparison trained with other flags (a variant name defined otherwise, other
arguments after ``--``, another recipe, ``--vary_split`` turned on or off) is refused before any training, in one line
naming the folder; ``--output_dir`` gives it a folder of its own, ``--force`` replaces them. A comparison that only
tables other rows replaces ``results.md`` with one line on stderr naming the command whose table it replaces; that
command, run again, rebuilds its table from the runs, which stay. Each run starts with a line on stderr, ``[k/n]
VARIANT seed S: training (elapsed m:ss, ETA ~m:ss)``, the ETA from the mean time of the runs trained so far. Secrets
(``--hub_token``, ``HF_TOKEN``'s value) are masked in every file written here.

Writes ``DIR/results.json`` (every run's test metrics), ``DIR/results.md`` (mean ± sample std over seeds, the layout
of the paper's Table 1, then each variant's difference from a reference variant, ``ce+tuned`` by default (``ce``
with ``--tuned false``), paired by seed: mean ± standard error and wins / ties / losses; variants that change the
target's beta, metric or average are left out of it, their F-beta being another metric; with a per-class
``--metric`` such as ``fbeta_positive`` only a change of beta or metric is) and ``DIR/results.png`` (the target
metric per variant, on an axis from 0). ``DIR`` is ``runs/compare-<recipe name>`` unless ``--output_dir`` says
otherwise: never ``runs/<recipe name>``, east-train's folder for the same recipe.

This module is the command: its parser and ``main``. ``east_hf.scripts.compare_plan`` says what is compared (the
variants, the metric, the reference), ``east_hf.scripts.compare_runs`` trains or skips the runs, and
``east_hf.scripts.compare_report`` writes the tables and the figure.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from east_hf.scripts.parsers import OneLineArgumentParser

# The helpers import torch, so they load on first use (the functions' own imports, the module __getattr__): the
# console script imports this module before main runs, and a Ctrl-C while torch loads must reach main's guard.
_HELPERS = {
    **dict.fromkeys(["LOSSES"], "east_hf.core.loss_registry"),
    **dict.fromkeys(
        [
            "DEFAULT_LOSSES",
            "MULTILABEL_DEFAULT_LOSSES",
            "default_losses",
            "parse_variants",
            "recipe_metric",
            "redefining_flags",
            "reference_variant",
            "variant_rows",
        ],
        "east_hf.scripts.compare_plan",
    ),
    **dict.fromkeys(
        ["comparison_figure", "earlier_command", "markdown_table", "paired_differences", "summarize", "write_results"],
        "east_hf.scripts.compare_report",
    ),
    **dict.fromkeys(["record_changes", "settings_changes"], "east_hf.scripts.run_record"),
}


def __getattr__(name: str) -> Any:
    """The helpers of ``_HELPERS``, imported on first use."""
    if name in _HELPERS:
        return getattr(importlib.import_module(_HELPERS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the helpers of the command live in compare_plan, compare_report and run_record; they are importable from here too
__all__ = [  # noqa: F822 - all but main come from the module __getattr__ above
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


def _bool(text: str) -> bool:
    """A flag's boolean value, spelt as east-train takes it (``true``/``false``, ``yes``/``no``, ``1``/``0``)."""
    value = text.strip().lower()
    if value in ("true", "yes", "t", "y", "1"):
        return True
    if value in ("false", "no", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    from east_hf.core.loss_registry import LOSSES
    from east_hf.scripts.compare_plan import DEFAULT_LOSSES, MULTILABEL_DEFAULT_LOSSES

    parser = OneLineArgumentParser(
        prog="east-compare",
        description="Train EAST and baselines with identical settings and seeds; tabulate mean ± std test metrics. "
        "By default: EAST, cross-entropy, logit-adjusted cross-entropy and the strongest baselines of east_hf's "
        "results, focal loss and LDAM-DRW (multi-label: binary cross-entropy, with pos_weight, logit-adjusted, and "
        "the asymmetric loss), each also with its decision rule tuned on validation, paired against tuned "
        "cross-entropy (ce+tuned).",
        epilog="Arguments after '--' are passed to every east-train run (e.g. -- --max_steps 50).",
    )
    parser.add_argument("recipe", help="an east-train recipe: a YAML path or a packaged recipe's name (e.g. demo)")
    parser.add_argument(
        "--losses",
        default=None,
        help=f"comma-separated losses among {', '.join(LOSSES)} (multi-label: also asl; not dice or ldam), or 'all' "
        f"(default: {DEFAULT_LOSSES}; multi-label: {MULTILABEL_DEFAULT_LOSSES}; with --variants alone: none)",
    )
    parser.add_argument(
        "--tuned",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="add each run's scores with its decision rule tuned on validation as variants '<name>+tuned'; a "
        "baseline is only as strong as its decision rule. Every run tunes its rule (east-train --tune_decision_rule) "
        "after its as-trained test evaluation, so this only chooses the rows (default: true)",
    )
    parser.add_argument(
        "--no_tuned", dest="tuned", action="store_false", help="table the models as trained only (--tuned false)"
    )
    parser.add_argument("--variants", nargs="*", default=None, help="extra variants as NAME:FLAGS")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds, 0..N-1 (default 3)")
    parser.add_argument(
        "--metric", default=None, help="target metric key for the table (default: the recipe's anneal key, e.g. fbeta)"
    )
    parser.add_argument("--output_dir", default=None, help="default: runs/compare-<recipe name>")
    parser.add_argument(
        "--force",
        action="store_true",
        help="train every run again, also those with test results and those an earlier comparison in the folder "
        "trained with other flags",
    )
    parser.add_argument(
        "--vary_split", action="store_true", help="seed s also draws the data split: --split_seed s for each run"
    )
    parser.add_argument(
        "--reference",
        default=None,
        help="variant the others are compared with, paired by seed (default: ce+tuned, or ce with --tuned false)",
    )
    return parser


def _split_extra(argv: list[str]) -> tuple[list[str], list[str]]:
    """east-compare's own arguments, and those after ``--`` that go to every east-train run."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


MULTI_LABEL_FLAGS = ("--label_columns", "--label_separator")
"""east-train flags that make a run multi-label (as the recipe keys of the same names do)."""


def _recipe_and_variants(
    parser: argparse.ArgumentParser, args: argparse.Namespace, extra: Sequence[str] = ()
) -> tuple[str, dict[str, Any], dict[str, list[str]]]:
    """The recipe's path, the recipe and the variants ({name: east-train flags}); a mistake exits 2 in one line.
    ``extra``: the flags after ``--`` (every run's), which can make the runs multi-label."""
    from east_hf.scripts.arguments import load_recipe, resolve_recipe
    from east_hf.scripts.compare_plan import default_losses, parse_variants, reference_variant, variant_rows

    if args.seeds < 1:
        parser.error(f"expected --seeds >= 1, got {args.seeds}")
    recipe_path = resolve_recipe(args.recipe)  # a YAML path, or a packaged recipe by name as east-train takes it
    try:
        recipe = load_recipe(recipe_path)
        multi_label = bool(recipe.get("label_columns") or recipe.get("label_separator")) or any(
            flag.split("=", 1)[0] in MULTI_LABEL_FLAGS for flag in extra
        )
        losses = args.losses if args.losses or args.variants else default_losses(multi_label)
        variants = parse_variants(losses, args.variants, multi_label)
    except ValueError as e:
        parser.error(str(e))
    rows = variant_rows(variants, args.tuned)
    if args.reference is not None and reference_variant(args) not in rows:
        parser.error(f"Expected --reference among {rows}, got {reference_variant(args)!r}")
    return recipe_path, recipe, variants


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``east-compare``: train every (variant, seed) run, write the tables; returns 0, exits 2 (one
    line on stderr) on bad input and 130 on Ctrl-C, at any moment, in one line (a run cut short says how it resumes;
    before one starts, that the same command goes on)."""
    from east_hf.scripts.interruptions import COMPARE_INTERRUPTED as line
    from east_hf.scripts.interruptions import exit_at_once_on_ctrl_c

    try:
        with exit_at_once_on_ctrl_c(line, command=argv is None):  # the libraries load, nothing written yet
            for module in (*dict.fromkeys(_HELPERS.values()), "east_hf.scripts.compare_runs"):
                importlib.import_module(module)
        return _compare(argv)
    except KeyboardInterrupt:
        print(line, file=sys.stderr, flush=True)
        raise SystemExit(130) from None


def _compare(argv: Sequence[str] | None) -> int:
    """``main`` inside its Ctrl-C guard."""
    from east_hf.hf.secret_masking import mask_secrets
    from east_hf.scripts.compare_plan import recipe_metric, reference_variant
    from east_hf.scripts.compare_report import earlier_command, write_results
    from east_hf.scripts.compare_runs import OtherFlagsError, run_comparison

    argv, extra = _split_extra(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    recipe_path, recipe, variants = _recipe_and_variants(parser, args, extra)
    metric = args.metric or recipe_metric(recipe)
    out_dir = Path(args.output_dir or f"runs/compare-{Path(args.recipe).stem}")
    out_dir.mkdir(parents=True, exist_ok=True)
    shown = mask_secrets([args.recipe, *argv[1:]] + (["--", *extra] if extra else []))  # less its secrets
    command = "east-compare " + " ".join(shlex.quote(a) for a in shown)

    try:
        runs = run_comparison(
            recipe_path,
            variants,
            out_dir,
            seeds=args.seeds,
            metric=metric,
            extra=extra,
            tuned=args.tuned,
            vary_split=args.vary_split,
            force=args.force,
            recipe_name=args.recipe,
            command=command,
        )
    except OtherFlagsError as e:  # it would replace runs another comparison trained there with other flags
        parser.error(str(e))
    earlier = earlier_command(out_dir)
    if earlier is not None and earlier != command:
        print(
            f"{out_dir / 'results.md'}: replacing the table of `{earlier}` with this comparison's; every run stays in "
            f"{out_dir}, and that command rebuilds its table from them",
            file=sys.stderr,
            flush=True,
        )
    tables = write_results(
        out_dir,
        runs,
        command=command,
        recipe=recipe,
        title=Path(args.recipe).stem,
        variants=variants,
        metric=metric,
        reference=reference_variant(args),
        seeds=args.seeds,
        tuned=args.tuned,
        vary_split=args.vary_split,
    )
    print(tables)
    print(f"\nresults: {out_dir / 'results.md'}, {out_dir / 'results.json'}, {out_dir / 'results.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
