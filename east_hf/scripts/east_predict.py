"""``east-predict``: predictions from a saved run; also ``python -m east_hf.scripts.east_predict``.

    east-predict runs/demo rows.csv -o predictions.csv                    # a CSV: one prediction per row
    east-predict runs/digits images/ --probabilities -o predictions.csv   # an image folder, with class probabilities
    east-predict runs/cifar10 uoft-cs/cifar10 --split test > predictions.csv   # a datasets id (the cache offline)
    east-predict runs/text-tiny texts.jsonl --probabilities -o predictions.csv   # texts: the run's text column(s)
    east-predict runs/text-tiny texts.csv --id_column id -o predictions.csv       # the id column first, to join on

RUN_DIR is a folder ``east-train`` wrote (or one of its checkpoints); DATA is read as ``east-train`` reads its data:
a CSV / TSV / Parquet / JSON file, a data folder (an imagefolder: images, in one sub-folder per class or not) or a
datasets path or Hub id. The run's own preprocessing is applied (the tokenizer of a text run, on the text
column and pair column the run trained on; the tabular feature encoding of ``preprocessor_config.json``; the image
transform it evaluated with), and the output is a CSV with one row per input:
``path`` for images read from files, ``--id_column`` passed through, the input's label column passed through where it
has one, with ``--keep_columns`` every other input column the model does not read, ``predicted_label`` by name and,
with ``--probabilities``, ``probability_<name>`` per class. A decision rule the run tuned on validation
is already in the saved model's bias, so its predictions apply it (``east_hf.hf.predict.predictor``); an edit of
``decision_rule.json`` is not applied, and a warning line says so. Bad input ends in one line,
``east-predict: error: ...``, exit status 2; an ``--output`` that names a directory, the input file or a file the
run holds (its config, weights, checkpoints) is refused before the model loads, so no file of the run is ever
replaced (a new file in the run folder is written). Ctrl-C at any moment (torch still loading included: this module
imports only the standard library at the top) ends in one line, ``east-predict: interrupted ...``, exit status 130,
leaving the ``--output`` file as it was (it is written whole or not at all).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from east_hf.scripts.interruptions import exit_at_once_on_ctrl_c
from east_hf.scripts.parsers import OneLineArgumentParser

__all__ = ["build_parser", "main"]

PROG = "east-predict"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog=PROG,
        description="Predict with a saved east-train run: a CSV, a data folder or a datasets id in, a CSV of "
        "predicted labels out (the run's preprocessing and tuned decision rule applied).",
    )
    parser.add_argument("run_dir", help="a folder east-train wrote (or one of its checkpoints)")
    parser.add_argument(
        "data", help="a CSV / TSV / Parquet / JSON file, a data folder (imagefolder) or a datasets path or Hub id"
    )
    parser.add_argument("-o", "--output", default="-", help="the predictions CSV to write (default: - for stdout)")
    parser.add_argument("--probabilities", action="store_true", help="add probability_<class> columns")
    parser.add_argument(
        "--label_column", default=None, help="the input's label column to pass through (default: label or labels)"
    )
    parser.add_argument(
        "--id_column", default=None, help="an input column to pass through first, to join the predictions back"
    )
    parser.add_argument(
        "--keep_columns",
        action="store_true",
        help="pass through every input column the model does not read (ids, metadata; not the texts or features)",
    )
    parser.add_argument("--image_column", default=None, help="the input's image column (default: the first)")
    parser.add_argument("--split", default=None, help="which split of DATA (needed where it has several)")
    parser.add_argument("--dataset_config", default=None, help="the datasets configuration name of DATA")
    parser.add_argument("--batch_size", type=int, default=256, help="inputs per forward pass (default 256)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda where available)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``east-predict``: writes the predictions CSV and one summary line on stderr; returns 0, exits 2
    with one line on bad input (a folder that is not a run, missing feature columns, an unreadable image, ...) and
    130 with one line on Ctrl-C, at any moment; while the libraries load and the model predicts it ends at once, as
    nothing is written before the CSV (``east_hf.scripts.interruptions.exit_at_once_on_ctrl_c``)."""
    parser = build_parser()
    line = f"{PROG}: interrupted"
    try:
        args = parser.parse_args(argv)
        if args.output != "-":
            line = f"{PROG}: interrupted; {args.output} not written"
        with exit_at_once_on_ctrl_c(line, command=argv is None):  # argv None: the console script, its own process
            predictor, frame = _predictions(parser, args)
        if args.output == "-":
            frame.to_csv(sys.stdout, index=False)
            where = "stdout"
        else:
            _write_whole(frame, Path(args.output).expanduser())
            where = args.output
    except KeyboardInterrupt:  # while writing, or where SIGINT is not Python's own handler
        print(line, file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    rule = ""
    if predictor.decision_rule is not None and not predictor.decision_rule_edited:
        rule = "; the decision rule tuned on validation is in the saved model"
    print(
        f"{PROG}: {len(frame)} predictions of the {predictor.modality} run {args.run_dir} to {where}{rule}",
        file=sys.stderr,
    )
    return 0


def _predictions(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """(the ``Predictor`` of ``args.run_dir``, its predictions for ``args.data``); bad input exits 2 in one line."""
    if args.output != "-":
        problem = _output_problem(args.output, args.data, args.run_dir)
        if problem:
            parser.error(problem)

    from east_hf.hf.predict.predictor import Predictor, read_inputs

    try:
        predictor = Predictor(args.run_dir, device=args.device, batch_size=args.batch_size)
        data = read_inputs(args.data, args.split, args.dataset_config)
        frame = predictor.predict(
            data,
            probabilities=args.probabilities,
            label_column=args.label_column,
            image_column=args.image_column,
            id_column=args.id_column,
            keep_columns=args.keep_columns,
        )
    except (ValueError, TypeError) as e:
        parser.error(" ".join(str(e).split()))
    return predictor, frame


def _output_problem(output: str, data: str, run_dir: str) -> str | None:
    """Why ``--output`` cannot take the predictions CSV, or None; checked before the model loads, so that a bad path
    costs nothing and the CSV never replaces the input file, a directory or a file of the run (its config, weights,
    tokenizer, a checkpoint's files): the run folder, and the run around it where ``run_dir`` is one of its
    checkpoints. A new file inside the run folder, or an unrelated existing file, is written as usual."""
    from east_hf.hf.training.checkpoints import run_files

    path = Path(output).expanduser()
    if os.path.exists(data) and path.resolve() == Path(data).resolve():
        return f"Expected --output other than the input file, got {output}"
    if path.is_dir():
        return f"Expected --output to name a file for the predictions CSV, got {output}, which is a directory"
    if not path.exists():
        return None
    run = Path(run_dir).expanduser().resolve()
    if not run.is_dir():
        return None  # not a run folder: check_run_folder says so
    runs = [run, run.parent] if run.name in run_files(run.parent) else [run]  # a checkpoint: its run as well
    for folder in runs:
        if path.resolve().is_relative_to(folder):
            return (
                f"Expected --output to name a new file or one outside the run folder {folder}, got {output}, "
                "which is a file of the run"
            )
    return None


def _write_whole(frame, path: Path) -> None:
    """``frame`` as CSV into ``path`` through a temporary file beside it: an interruption leaves the earlier file (or
    none), never part of the predictions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        frame.to_csv(tmp, index=False)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
