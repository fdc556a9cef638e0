"""Merge the evidence tables of runs/evidence/tables/ into the few files benchmarks/results/ commits.

`run_evidence.sh` copies every `east-compare` table it trains (`<folder>/results.md`, `<folder>/results.json`) and
every table its tabulating scripts write (`*.md`) to `runs/evidence/tables/`; this script merges the Markdown ones
into one file per results section, each section headed by its source's name. A file is written only when all its
sources exist, so a machine that ran one mode rewrites that mode's file and leaves the others as committed. The raw
records (`results.json`, every run's folder) stay under `runs/` and are not committed.

Usage: python benchmarks/publish_tables.py [--src runs/evidence/tables] [--dest benchmarks/results] [NAME ...]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

BINARY = ["lending_club", "caravan", "digits9_binary", "synthetic_binary"]
MULTICLASS = ["hpc", "diamonds", "digits_longtail"]
EVERY = BINARY + MULTICLASS
RARE = ["lending_club", "caravan"]


def _runs(prefix: str, tasks: list[str]) -> list[str]:
    return [f"{prefix}{task}/results.md" for task in tasks]


# name -> (title, the run_evidence.sh mode that writes its sources, sources relative to --src)
TABLES: dict[str, tuple[str, str, list[str]]] = {
    "main_tables.md": (
        "The main tables: every variant against every tuned baseline",
        "main",
        _runs("", EVERY) + ["synthetic_binary_e100/results.md", "synthetic_binary_resplit/results.md"],
    ),
    "ce_decay.md": (
        "The default on every task, its cross-entropy decay, lending_club on twenty seeds",
        "ce_decay",
        _runs("ce_decay_", EVERY)
        + ["ce_decay_against_best.md", "annealing_ends.md", "replicate_lending_club/results.md"]
        + ["la_mix_memory_caravan/results.md"],
    ),
    "beta_default.md": (
        "F0.25 of the positive class under the default",
        "beta_default",
        [f"beta_default_{task}/{name}.md" for task in RARE for name in ("f025", "f025_tuned_at_floor")],
    ),
    "long_tail.md": (
        "Focal loss, LDAM-DRW and a 23-class long tail",
        "long_tail",
        _runs("long_tail_", EVERY) + ["hotel_countries/results.md", "long_tail_against_best.md"],
    ),
    "selection.md": (
        "Selection by a mean over evaluations",
        "selection",
        _runs("select_", RARE + ["digits9_binary", "hpc", "diamonds"])
        + ["selection_against_default.md", "selection_against_best.md", "selection_fresh.md"]
        + [f"beta_select_{task}.md" for task in RARE],
    ),
    "ema.md": (
        "A moving average of the weights",
        "ema",
        _runs("ema_", EVERY + ["hotel_countries"])
        + _runs("emabase_", RARE)
        + ["ema_against_default.md", "ema_against_best.md", "ema_fresh.md", "ema_baselines.md"],
    ),
    "val_split.md": (
        "A validation split of 30 %",
        "val_split",
        _runs("valsplit_", RARE) + ["val_split.md"],
    ),
    "lr_decay.md": (
        "The learning rate across stages",
        "lr_decay",
        _runs("lrdecay_", EVERY + ["hotel_countries", "fine_foods"])
        + _runs("lrdecay07_", RARE)
        + _runs("lrprobe_", RARE)
        + ["lr_decay_against_default.md", "lr_decay_against_best.md", "lr_decay_against_tuned.md"]
        + ["lr_decay_fresh.md", "lr_decay_ldam.md", "lr_probe.md"]
        + [f"beta_lr_decay_{task}.md" for task in RARE],
    ),
    "lr_decay_more.md": (
        "The halved rate with a moving average or a window, and 0.3 per decrease",
        "lr_decay_more",
        ["lr_decay_combos.md", "lr_decay_03.md"],
    ),
    "stage_average.md": (
        "Averaging the checkpoints of a stage, and selection by the soft surrogate",
        "stage_average",
        ["stage_average.md", "soft_selection.md"],
    ),
    "anneal_threshold.md": (
        "The default across-stage threshold 2 / n against 0",
        "anneal_default",
        ["anneal_threshold_replay.md", "anneal_threshold_default.md"],
    ),
    "text.md": ("Two text tasks, text_tiny trained from scratch", "text", _runs("", ["trump_tweets", "fine_foods"])),
    "ablations.md": (
        "Ablations of EAST alone",
        "ablations",
        ["digits9_binary_ablations/results.md", "digits9_binary_ablations/training_fit.md"]
        + ["digits_longtail_ablations/results.md"],
    ),
    "multilabel.md": (
        "Two real multi-label tables",
        "multilabel",
        ["multilabel.md", "movie_genres/results.md", "gss_abortion/results.md"],
    ),
}


def section_name(source: str) -> str:
    """`ce_decay_hpc/results.md` -> `ce_decay_hpc`; `lr_probe.md` -> `lr_probe`."""
    return source.removesuffix("/results.md").removesuffix(".md")


def merge(name: str, src: Path) -> str | None:
    """The merged file's text, or None when a source is missing."""
    title, modes, sources = TABLES[name]
    if not all((src / source).is_file() for source in sources):
        return None
    lines = [
        f"# {title}",
        "",
        f"Written by `bash benchmarks/run_evidence.sh {modes}`, which trains the runs under `runs/evidence/`, "
        "copies each",
        "table and its raw records (`results.json`) to `runs/evidence/tables/` and merges the tables here",
        "(`python benchmarks/publish_tables.py`). The raw records are regenerated by that command, not committed.",
    ]
    for source in sources:
        text = (src / source).read_text().strip("\n")
        text = re.sub(r"^(#+) ", r"\1## ", text, flags=re.MULTILINE)  # the source's headings below its section's
        lines += ["", f"## {section_name(source)}", "", text]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"files to write (default: every one): {', '.join(TABLES)}")
    parser.add_argument("--src", type=Path, default=Path("runs/evidence/tables"))
    parser.add_argument("--dest", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(TABLES))
    if unknown:
        parser.error(f"Expected names among {', '.join(TABLES)}, got {', '.join(unknown)}")
    merged = {name: merge(name, args.src) for name in args.names or TABLES}  # read every source before writing
    for name, text in merged.items():
        if text is None:
            print(f"{name}: skipped, a source under {args.src} is missing")
            continue
        (args.dest / name).write_text(text)
        print(f"{args.dest / name}")


if __name__ == "__main__":
    main()
