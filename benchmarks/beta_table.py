"""Per-class beta evidence: every variant of an east-compare folder scored at the same F-beta.

    python benchmarks/beta_table.py runs/beta_lending_club --cls bad --classes 1 \
        --pair 0.25:b025:f1 --pair 0.25:b025:ce_b025+tuned --pair 0.25:b025_paper:f1 ...

A run trained for beta_run on class ``cls`` reports that class's test precision P and recall R and its test F-beta
(binary: the class's; macro: the mean over ``classes`` classes). Its score at another beta is that F-beta with the
class's term replaced: F - (F_beta_run(P, R) - F_beta(P, R)) / classes, with F_b(P, R) = (1 + b^2) P R / (b^2 P + R).
So the beta = 1 model is judged at F0.25 exactly as the model trained for F0.25 is. ``VARIANT+tuned`` reads the
run's ``test_tuned_*`` metrics (its decision rule tuned on validation for the run's own metric).
``--pair BETA:MODEL:REFERENCE`` adds a paired row: MODEL - REFERENCE at F-BETA over the seeds both have.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path


def f_beta(p: float, r: float, beta: float) -> float:
    b2 = beta * beta
    return 0.0 if p == 0 and r == 0 else (1 + b2) * p * r / (b2 * p + r)


def run_beta(run: Path, cls: str) -> float:
    settings = json.loads((run / "run_settings.json").read_text())
    beta = next((g["east_beta"] for g in settings.values() if g.get("east_beta") is not None), 1.0)
    if isinstance(beta, dict):  # keys as the recipe spells the class ('L'), metric names lower case ('l')
        return float(next((v for k, v in beta.items() if str(k).lower() == cls.lower()), 1.0))
    return float(beta)


def scores(folder: Path, cls: str, classes: int, betas: list[float]) -> dict[str, dict[int, dict[str, float]]]:
    """{variant: {seed: {"P", "R", "F<beta>" ...}}} for every run with test results (and its +tuned twin)."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for result in sorted(folder.glob("*/seed-*/test_results.json")):
        run, metrics = result.parent, json.loads(result.read_text())
        variant, seed, b_run = run.parent.name, int(run.name.split("-")[1]), run_beta(run, cls)
        for prefix, name in (("test_", variant), ("test_tuned_", f"{variant}+tuned")):
            if f"{prefix}fbeta" not in metrics:
                continue
            p, r, f = (metrics[f"{prefix}{k}"] for k in (f"precision_{cls}", f"recall_{cls}", "fbeta"))
            row = {"P": p, "R": r}
            for b in betas:
                row[f"F{b:g}"] = f - (f_beta(p, r, b_run) - f_beta(p, r, b)) / classes
            out.setdefault(name, {})[seed] = row
    return out


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def markdown(table, betas, pairs, cls, metric) -> str:
    keys = [f"F{b:g}" for b in betas] + ["P", "R"]
    heads = [f"test {metric} F{b:g}" for b in betas] + [f"precision {cls}", f"recall {cls}"]
    lines = ["| variant | n | " + " | ".join(heads) + " |", "|---" * (len(keys) + 2) + "|"]
    for name, runs in table.items():
        cells = [mean_sd([r[k] for r in runs.values()]) for k in keys]
        lines.append(f"| {name} | {len(runs)} | " + " | ".join(cells) + " |")
    if pairs:
        lines += [
            "",
            "| F-beta | model − reference | paired difference (mean ± s.e.) | wins / ties / losses |",
            "|---|---|---|---|",
        ]
    for beta, model, ref in pairs:
        a, b = table.get(model, {}), table.get(ref, {})
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        d = [a[s][f"F{beta:g}"] - b[s][f"F{beta:g}"] for s in seeds]
        se = statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else 0.0
        w = sum(x > 1e-9 for x in d), sum(abs(x) <= 1e-9 for x in d), sum(x < -1e-9 for x in d)
        lines.append(
            f"| F{beta:g} | {model} − {ref} | {statistics.mean(d):+.3f} ± {se:.3f} | {w[0]} / {w[1]} / {w[2]} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--cls", required=True, help="the class whose beta varies (its name, as in the metrics)")
    parser.add_argument("--classes", type=int, default=1, help="classes the F-beta averages over (1: binary)")
    parser.add_argument("--betas", type=float, nargs="+", default=[0.25, 1.0, 4.0])
    parser.add_argument("--pair", action="append", default=[], help="BETA:MODEL:REFERENCE")
    parser.add_argument("--order", nargs="*", default=None, help="variants to show, in this order")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table to this file")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's scores to this file")
    args = parser.parse_args()
    table = scores(args.folder, args.cls, args.classes, args.betas)
    if args.order:
        table = {k: table[k] for k in args.order if k in table}
    pairs = [(float(b), m, r) for b, m, r in (p.split(":") for p in args.pair)]
    text = markdown(table, args.betas, pairs, args.cls, "binary" if args.classes == 1 else "macro")
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(table, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
