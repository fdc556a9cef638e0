"""Time and memory of ``load_data`` on large CSV files: one process, and two under ``torchrun``.

The CSV files are generated in a temporary folder (never committed): N rows of 20 float features (4 decimals) and
an integer ``label`` whose 20 class sizes follow a Zipf law (class k has a share proportional to 1 / (k + 1)), the
feature means shifted by the class. Each measurement runs in a fresh Python process with a fresh ``datasets`` cache
(``HF_DATASETS_CACHE`` in the temporary folder), so the CSV parse is part of it:

- ``imports``: ``ru_maxrss`` after importing torch, datasets and ``east_hf.hf.data`` and loading ``sklearn:iris`` once
  (every import warm);
- ``load``: wall time of ``load_data(DataArguments(dataset_name=CSV, label_column="label"))``, CSV parse, label
  encoding, stratified 64 / 16 / 20 % split and standardisation included;
- ``peak``: ``ru_maxrss`` after the load (resident pages, memory-mapped ones included), and ``above imports``;
- ``read``: the wall time of one pass over every training row's ``input_features`` (float32 batches of 65,536 rows,
  what a training epoch reads), and ``peak`` after it.

The two-process case runs the same load under ``torchrun --standalone --nproc_per_node 2`` (gloo, CPU) inside
``TrainingArguments.main_process_first``, as ``east-train`` does, then reads the training features on both ranks.
Per rank: when its load started and ended (seconds after the launch) and its ``ru_maxrss``. Together: the peak of the
summed proportional set size (PSS, from ``/proc/PID/smaps_rollup`` sampled every 0.1 s: a page shared by both
processes, such as a memory-mapped Arrow file in the page cache, counts half in each) and of the summed RSS.

Usage::

    python benchmarks/data_scale.py --rows 1e4 1e5 1e6 1e7 --two-process 1e6 --json after.json
    python benchmarks/data_scale.py --code /tmp/east_old --rows 1e4 1e5 1e6 --two-process 1e5 --json before.json
    python benchmarks/data_scale.py --markdown benchmarks/results/data_scale_cpu.md --from-json before.json after.json

``--code DIR`` imports ``east_hf`` from another checkout (``git worktree add /tmp/east_old HEAD``) to measure it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FEATURES = 20
CLASSES = 20

MEASURE = r"""
import json, resource, sys, time
import numpy as np
import torch, datasets
from east_hf.hf.data import DataArguments, load_data

def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

load_data(DataArguments(dataset_name="sklearn:iris"))
imports = rss_mb()
t0 = time.perf_counter()
data = load_data(DataArguments(dataset_name=sys.argv[1], label_column="label"))
load = time.perf_counter() - t0
peak = rss_mb()
t0 = time.perf_counter()
train, seen = data.train.with_format("numpy"), 0
for start in range(0, len(train), 65536):
    seen += len(train[start : start + 65536]["input_features"])
read = time.perf_counter() - t0
print("RESULT " + json.dumps({
    "imports_mb": imports, "load_s": load, "peak_mb": peak, "read_s": read, "peak_after_read_mb": rss_mb(),
    "sizes": [len(data.train), len(data.validation), len(data.test)], "read_rows": seen,
    "module": __import__("east_hf").__file__,
}))
"""

RANK = r"""
import json, os, resource, sys, tempfile, time
import torch, datasets
from transformers import TrainingArguments
from east_hf.hf.data import DataArguments, load_data

launched = float(sys.argv[2])
args = TrainingArguments(output_dir=tempfile.mkdtemp(), use_cpu=True, ddp_backend="gloo", report_to=[])
with args.main_process_first(desc="loading the data set"):
    start = time.time() - launched
    data = load_data(DataArguments(dataset_name=sys.argv[1], label_column="label"))
    end = time.time() - launched
train = data.train.with_format("numpy")
for i in range(0, len(train), 65536):
    train[i : i + 65536]["input_features"]
torch.distributed.barrier()
print("RANK " + json.dumps({
    "rank": args.process_index, "start_s": start, "end_s": end,
    "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}), flush=True)
torch.distributed.barrier()
torch.distributed.destroy_process_group()
"""


def write_csv(path: Path, rows: int, seed: int = 0, chunk: int = 1_000_000) -> None:
    """``rows`` rows of ``FEATURES`` float columns and a Zipf-sized integer ``label``, written in chunks."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    share = 1.0 / np.arange(1, CLASSES + 1)
    share /= share.sum()
    names = [f"x{j}" for j in range(FEATURES)] + ["label"]
    with pacsv.CSVWriter(path, pa.schema([(n, pa.float64()) for n in names[:-1]] + [("label", pa.int64())])) as w:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            y = rng.choice(CLASSES, size=n, p=share)
            x = rng.normal(size=(n, FEATURES)) + 0.1 * y[:, None]
            columns = [pa.array(np.round(x[:, j], 4)) for j in range(FEATURES)] + [pa.array(y)]
            w.write_table(pa.table(columns, names=names))


def environment(code: str | None, cache: Path) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_DATASETS_CACHE=str(cache))
    if code:
        env["PYTHONPATH"] = code + os.pathsep + env.get("PYTHONPATH", "")
    return env


def measure(csv: Path, code: str | None, folder: Path) -> dict:
    cache = Path(tempfile.mkdtemp(dir=folder, prefix="cache"))
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(csv)],
        capture_output=True,
        text=True,
        env=environment(code, cache),
        cwd=folder,  # not the checkout: `python -c` puts the working directory first on sys.path
    )
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(next(line[7:] for line in out.stdout.splitlines() if line.startswith("RESULT ")))


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _memory(pid: int) -> tuple[int, int]:
    """(PSS, RSS) in kB of one process, (0, 0) if it is gone."""
    pss = rss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except OSError:
        pass
    return pss, rss


def measure_two(csv: Path, code: str | None, folder: Path) -> dict:
    cache = Path(tempfile.mkdtemp(dir=folder, prefix="cache"))
    script = folder / "rank.py"
    script.write_text(RANK)
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    launched = time.time()
    proc = subprocess.Popen(
        [torchrun, "--standalone", "--nproc_per_node", "2", str(script), str(csv), str(launched)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(environment(code, cache), OMP_NUM_THREADS="1"),
        cwd=folder,
    )
    peak_pss = peak_rss = 0
    while proc.poll() is None:
        workers = [p for p in _descendants(proc.pid) if "rank.py" in _cmdline(p)]
        usage = [_memory(p) for p in workers]
        peak_pss = max(peak_pss, sum(u[0] for u in usage))
        peak_rss = max(peak_rss, sum(u[1] for u in usage))
        time.sleep(0.1)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        return {"error": stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {proc.returncode}"}
    ranks = sorted(
        (json.loads(line[5:]) for line in stdout.splitlines() if line.startswith("RANK ")), key=lambda r: r["rank"]
    )
    return {"ranks": ranks, "peak_pss_mb": peak_pss / 1024, "peak_rss_mb": peak_rss / 1024}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def markdown(results: list[dict]) -> str:
    lines = [
        "# Tabular loading at scale on CPU",
        "",
        "`load_data` on generated CSV files: N rows x 20 float features (4 decimals) + an integer label of 20 "
        "Zipf-sized classes (class k's share proportional to 1 / (k + 1)); the 64 / 16 / 20 % stratified split and "
        "standardisation of `east-train`'s defaults. Each cell is one fresh process with a fresh `datasets` cache, so "
        "the CSV parse is included (see `benchmarks/data_scale.py` for what each column measures).",
        "",
        "```",
        *sorted({r["command"] for r in results}),
        "```",
        "",
        f"Machine: {results[0]['machine']}.",
        "",
        "## One process",
        "",
        "| code | rows | load + preprocess (s) | peak RSS (MB) | above imports (MB) | one pass over train (s) "
        "| peak after it (MB) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for rows, m in r["one"].items():
            if "error" in m:
                lines.append(f"| {r['label']} | {int(float(rows)):,} | {m['error']} | | | | |")
                continue
            lines.append(
                f"| {r['label']} | {int(float(rows)):,} | {m['load_s']:.1f} | {m['peak_mb']:,.0f} | "
                f"{m['peak_mb'] - m['imports_mb']:,.0f} | {m['read_s']:.1f} | {m['peak_after_read_mb']:,.0f} |"
            )
    lines += [
        "",
        "## Two processes: `torchrun --standalone --nproc_per_node 2` (gloo, CPU)",
        "",
        "| code | rows | rank 0 load (s after launch) | rank 1 load (s after launch) | ru_maxrss per rank (MB) "
        "| peak summed PSS (MB) | peak summed RSS (MB) |",
        "|---|---:|---|---|---|---:|---:|",
    ]
    for r in results:
        for rows, m in r["two"].items():
            if "error" in m:
                lines.append(f"| {r['label']} | {int(float(rows)):,} | {m['error']} | | | | |")
                continue
            r0, r1 = m["ranks"]
            lines.append(
                f"| {r['label']} | {int(float(rows)):,} | {r0['start_s']:.1f} - {r0['end_s']:.1f} | "
                f"{r1['start_s']:.1f} - {r1['end_s']:.1f} | {r0['maxrss_mb']:,.0f} / {r1['maxrss_mb']:,.0f} | "
                f"{m['peak_pss_mb']:,.0f} | {m['peak_rss_mb']:,.0f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="*", default=[], help="one-process sizes, e.g. 1e4 1e6")
    parser.add_argument("--two-process", nargs="*", default=[], help="sizes for the torchrun case")
    parser.add_argument("--code", default=None, help="import east_hf from this checkout")
    parser.add_argument("--label", default=None, help="name of this code in the table (default: before/after)")
    parser.add_argument("--json", default=None, help="write the measurements here")
    parser.add_argument("--from-json", nargs="*", default=[], help="tabulate these measurement files")
    parser.add_argument("--markdown", default=None, help="write the Markdown table here")
    parser.add_argument("--tmp", default=None, help="folder for the CSV files and caches (default: a temp dir)")
    args = parser.parse_args()
    results = [json.loads(Path(p).read_text()) for p in args.from_json]
    if args.rows or args.two_process:
        run = {
            "label": args.label or ("before" if args.code else "after"),
            "command": "python benchmarks/data_scale.py " + " ".join(sys.argv[1:]),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, Python "
            f"{platform.python_version()}",
            "one": {},
            "two": {},
        }
        with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
            folder = Path(tmp)
            for key, sizes, fn in (("one", args.rows, measure), ("two", args.two_process, measure_two)):
                for size in sizes:
                    csv = folder / f"rows_{int(float(size))}.csv"
                    if not csv.exists():
                        write_csv(csv, int(float(size)))
                    run[key][size] = fn(csv, args.code, folder)
                    print(key, size, json.dumps(run[key][size]), flush=True)
                    if args.json:
                        Path(args.json).write_text(json.dumps(run, indent=1))
        results.append(run)
    if args.markdown and results:
        Path(args.markdown).write_text(markdown(results))
    if results:
        print(markdown(results))


if __name__ == "__main__":
    main()
