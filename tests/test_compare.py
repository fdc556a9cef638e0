"""east-compare on a tiny run: the table has the right rows, its numbers are the per-run JSON's, runs are skipped."""

import json
import statistics
from pathlib import Path

import pytest

from east_hf.compare import main, markdown_table, parse_variants, summarize

RECIPE = str(Path(__file__).parents[1] / "recipes" / "demo.yaml")
TINY = [
    "--max_steps",
    "2",
    "--eval_steps",
    "1",
    "--save_steps",
    "1",
    "--eval_strategy",
    "steps",
    "--save_strategy",
    "steps",
    "--max_train_samples",
    "64",
    "--max_test_samples",
    "64",
    "--disable_tqdm",
    "True",
    "--model_card",
    "False",
]


def test_compare_tiny_run_table_matches_runs(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = [
        RECIPE,
        "--losses",
        "east,ce",
        "--variants",
        "warm:--east_warm_start ce",
        "--seeds",
        "2",
        "--output_dir",
        str(out),
    ]
    assert main([*argv, "--", *TINY]) == 0
    result = json.loads((out / "results.json").read_text())
    assert [(r["variant"], r["seed"]) for r in result["runs"]] == [
        (v, s) for v in ("east", "ce", "warm") for s in (0, 1)
    ]
    table = (out / "results.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| variant")]
    assert [row.split(" | ")[0].strip("| ") for row in rows] == ["east", "ce", "warm"]
    for row, variant in zip(rows, ("east", "ce", "warm")):
        values = [r["metrics"]["fbeta"] for r in result["runs"] if r["variant"] == variant]
        per_run = [
            json.loads((out / variant / f"seed-{s}" / "test_results.json").read_text())["test_fbeta"] for s in (0, 1)
        ]
        assert values == per_run
        assert f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}" == row.split(" | ")[2]
    assert (out / "results.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main([*argv, "--", *TINY]) == 0  # everything done: skipped, same table
    assert "done, skipped" in capsys.readouterr().err
    assert (out / "results.md").read_text() == table


def test_summary_and_variant_parsing():
    runs = [{"variant": "east", "metrics": {"fbeta": x, "precision_dog": 1.0}} for x in (0.5, 0.7)]
    summary = summarize(runs)
    assert summary["east"]["fbeta"][0] == pytest.approx(0.6) and summary["east"]["fbeta"][2] == 2
    assert "precision dog" in markdown_table(summary)
    assert parse_variants("ce", ["r08:--east_decay 0.8"]) == {
        "ce": ["--east_loss", "ce"],
        "r08": ["--east_decay", "0.8"],
    }
    with pytest.raises(ValueError, match="losses among"):
        parse_variants("focal", None)
    with pytest.raises(ValueError, match="NAME:FLAGS"):
        parse_variants(None, ["no-colon"])
