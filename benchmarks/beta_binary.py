"""Binary east-compare folders scored at one F-beta of the positive class, from each run's test precision and recall.

Models trained and selected for different betas (``--east_beta 0.25`` against the default 1) compare at the beta the
user is judged by; each variant's ``+tuned`` twin (the decision rule tuned on validation) is scored the same way.
Paired differences are by seed.

Usage::

    python benchmarks/beta_binary.py runs/evidence/betaprobe_caravan --beta 0.25 \\
        --pair b025:east --pair b025+tuned:east+tuned --pair b025:ce_b025+tuned [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def fbeta(precision: float, recall: float, beta: float) -> float:
    b2 = beta * beta
    den = b2 * precision + recall
    return (1 + b2) * precision * recall / den if den > 0 else 0.0


def scores(folder: Path, beta: float) -> dict[str, dict[int, float]]:
    """{variant: {seed: F-beta}} for every run of ``folder`` and its ``+tuned`` twin."""
    out: dict[str, dict[int, float]] = {}
    for results in sorted(folder.glob("*/seed-*/test_results.json")):
        variant, seed = results.parent.parent.name, int(results.parent.name.split("-")[1])
        metrics = json.loads(results.read_text())
        for prefix, suffix in (("test_", ""), ("test_tuned_", "+tuned")):
            if f"{prefix}precision" in metrics:
                value = fbeta(metrics[f"{prefix}precision"], metrics[f"{prefix}recall"], beta)
                out.setdefault(variant + suffix, {})[seed] = value
    return out


def table(folder: Path, beta: float, pairs: list[str]) -> str:
    score = scores(folder, beta)
    lines = [f"| variant | test F{beta:g}, mean ± std |", "|---|---|"]
    for name, by_seed in score.items():
        values = list(by_seed.values())
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        lines.append(f"| {name} | {statistics.fmean(values):.4f} ± {spread:.4f} |")
    lines += ["", f"| pair, at F{beta:g} | mean ± s.e. | wins / ties / losses | seeds |", "|---|---|---|---|"]
    for pair in pairs:
        a, b = pair.split(":")
        seeds = sorted(set(score[a]) & set(score[b]))
        diffs = [score[a][s] - score[b][s] for s in seeds]
        se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else 0.0
        wins, losses = sum(d > 1e-12 for d in diffs), sum(d < -1e-12 for d in diffs)
        ties = len(diffs) - wins - losses
        lines.append(
            f"| {a} − {b} | {statistics.fmean(diffs):+.4f} ± {se:.4f} | {wins} / {ties} / {losses} | {len(diffs)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--beta", type=float, default=0.25)
    parser.add_argument("--pair", action="append", default=[], help="A:B, paired by seed")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    text = table(args.folder, args.beta, args.pair)
    if args.markdown:
        args.markdown.write_text(
            f"# {args.folder.name}\n\n```\npython benchmarks/beta_binary.py {args.folder} "
            f"--beta {args.beta:g} " + " ".join(f"--pair {p}" for p in args.pair) + f"\n```\n\n{text}"
        )
    print(text)


if __name__ == "__main__":
    main()
