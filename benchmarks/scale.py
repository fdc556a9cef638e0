"""east_hf at scale, in one command: rows, classes, evaluation memory and the decision-rule tuner.

Runs the scale benchmarks one after another, each in its own process (so each peak RSS is its own), and writes their
tables into one Markdown file with the command that reproduces each:

- rows (``data_scale.py``): load + preprocess time and peak RSS of a generated CSV of 20 float features and a Zipf
  label, 1e4 to 1e7 rows, and two processes under ``torchrun`` sharing the prepared cache;
- classes (``class_scale.py``): one training step, EAST against cross-entropy, batch 512, C = 2 to 100,000, with
  EAST's (3, C) statistics and with the dense (C, C) matrix;
- evaluation (``eval_memory.py``): ``EASTTrainer.evaluate`` at C = 10,000, batches of 4,096, on 20k and 100k rows,
  peak memory added;
- tuning (``eval_memory.py --tune``): ``EASTTrainer.tune_decision_rule`` at C = 10,000 on 20k and 160k validation
  rows (at 160k, 6.4 GB of float32 logits, written to disk), peak memory added;
- the tuner (``decision_speed.py``): ``tune_logit_offsets`` on 50,000 validation rows, C = 10 to 10,000.

Usage::

    python benchmarks/scale.py --markdown scale_cpu.md                                # over an hour on 2 cores
    python benchmarks/scale.py --quick                                                # every part, small: minutes

The numbers the documentation quotes (``docs/results/scale.md``) come from the scripts' own runs, each written by the
command beside its table; this driver reruns them all at once. The evaluation and tuning parts compare with the code
at ``/tmp/old_eval`` only up to ``--max-old`` rows (0 here: this checkout alone).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

FULL = {
    "rows": "data_scale.py --rows 1e4 1e5 1e6 1e7 --two-process 1e6".split(),
    "classes": "class_scale.py --threads 1".split(),
    "evaluation": "eval_memory.py --threads 1 --sizes 20000 100000 --batch 4096 --max-old 0".split(),
    "tuning": "eval_memory.py --tune --threads 1 --sizes 20000 160000 --max-old 0".split(),
    "tuner": "decision_speed.py --threads 1 --sizes 50000x10 50000x100 50000x1000 50000x10000".split(),
}
QUICK = {
    "rows": "data_scale.py --rows 1e4 1e5".split(),
    "classes": "class_scale.py --threads 1 --classes 2 100 1000 --repeats 3".split(),
    "evaluation": "eval_memory.py --threads 1 --classes 2048 --sizes 4000 --max-old 0".split(),
    "tuning": "eval_memory.py --tune --threads 1 --classes 2048 --sizes 4000 --max-old 0".split(),
    "tuner": "decision_speed.py --threads 1 --sizes 5000x10 5000x100".split(),
}
WRITES_MARKDOWN = {"rows", "classes", "evaluation", "tuning"}  # decision_speed.py prints its table


def run_part(name: str, argv: list[str], folder: Path) -> str:
    """One benchmark in its own process; its Markdown table (or its stdout), headed by the command."""
    command = [sys.executable, str(HERE / argv[0]), *argv[1:]]
    table = folder / f"{name}.md"
    if name in WRITES_MARKDOWN:
        command += ["--markdown", str(table)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    start = time.time()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.time() - start
    shown = " ".join(["python", f"benchmarks/{argv[0]}", *argv[1:]])
    if proc.returncode != 0:
        return f"## {name}\n\n`{shown}` failed (exit {proc.returncode}):\n\n```\n{proc.stderr[-2000:]}\n```\n"
    body = table.read_text() if table.is_file() else f"```\n{proc.stdout.strip()}\n```\n"
    return f"## {name}\n\n```\n{shown}\n```\n\n({seconds:.0f} s)\n\n{body}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every part at small sizes (minutes)")
    parser.add_argument("--parts", nargs="+", default=list(FULL), choices=list(FULL))
    parser.add_argument("--markdown", type=Path, default=None, help="write the tables here (default: stdout)")
    args = parser.parse_args(argv)
    parts = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory() as tmp:
        sections = [run_part(name, parts[name], Path(tmp)) for name in args.parts]
    text = "# east_hf at scale (CPU)\n\n" + "\n".join(sections)
    if args.markdown:
        args.markdown.write_text(text)
    else:
        print(text)
    return 0 if "failed (exit" not in text else 1


if __name__ == "__main__":
    sys.exit(main())
