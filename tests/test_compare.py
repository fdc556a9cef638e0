"""east-compare on a tiny run: the table has the right rows, its numbers are the per-run JSON's, runs are skipped."""

import json
import statistics
from pathlib import Path

import pytest

from east_hf.scripts.east_compare import main, markdown_table, parse_variants, redefining_flags, summarize

RECIPE = str(Path(__file__).parents[1] / "recipes" / "digits_longtail_demo.yaml")
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
    assert [(r["variant"], r["seed"]) for r in result["runs"]] == [  # seed-major: a cut-off run has whole seeds
        (v, s) for s in (0, 1) for v in ("east", "ce", "warm")
    ]
    table = (out / "results.md").read_text()
    main_table, paired_table = table.split("\n\n")[2:4]
    rows = [line for line in main_table.splitlines() if line.startswith("| ") and not line.startswith("| variant")]
    assert [row.split(" | ")[0].strip("| ") for row in rows] == ["east", "ce", "warm"]
    for row, variant in zip(rows, ("east", "ce", "warm")):
        values = [r["metrics"]["fbeta"] for r in result["runs"] if r["variant"] == variant]
        per_run = [
            json.loads((out / variant / f"seed-{s}" / "test_results.json").read_text())["test_fbeta"] for s in (0, 1)
        ]
        assert values == per_run
        assert f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}" == row.split(" | ")[2]
    # the paired table: each variant minus ce, seed by seed, from the same per-run numbers
    paired = [line.split(" | ") for line in paired_table.splitlines()[2:]]
    assert [row[0].strip("| ") for row in paired] == ["east", "warm"]
    for row in paired:
        diffs = [
            json.loads((out / row[0].strip("| ") / f"seed-{s}" / "test_results.json").read_text())["test_fbeta"]
            - json.loads((out / "ce" / f"seed-{s}" / "test_results.json").read_text())["test_fbeta"]
            for s in (0, 1)
        ]
        assert row[1] == f"{statistics.fmean(diffs):+.4f} ± {statistics.stdev(diffs) / 2**0.5:.4f}"
        assert sum(map(int, row[2].split(" / "))) == 2 and row[3].strip(" |") == "2"
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
    per_class = summarize([{"variant": "ce", "metrics": {"fbeta": 0.9, "fbeta_dog": 0.8}}])
    assert markdown_table(per_class, "fbeta_dog").splitlines()[0] == "| variant | n | F-beta dog * | F-beta |"
    assert parse_variants("ce", ["r08:--east_decay 0.8"]) == {
        "ce": ["--east_loss", "ce"],
        "r08": ["--east_decay", "0.8"],
    }
    with pytest.raises(ValueError, match="losses among"):
        parse_variants("focal", None)
    with pytest.raises(ValueError, match="NAME:FLAGS"):
        parse_variants(None, ["no-colon"])
    # another average redefines macro F-beta but not a class's own F-beta; another beta redefines both
    assert "--east_average" in redefining_flags("fbeta") and "--east_average" not in redefining_flags("fbeta_positive")
    assert "--east_beta" in redefining_flags("fbeta_positive")


def test_vary_split_gives_each_seed_its_own_split(tmp_path, monkeypatch):
    import east_hf.scripts.east_train

    seen = []
    monkeypatch.setattr(east_hf.scripts.east_train, "main", lambda argv: seen.append(argv) or 1)
    from east_hf.scripts.east_compare import _run_one

    with pytest.raises(RuntimeError, match="exited with 1"):
        _run_one(RECIPE, tmp_path / "run", 3, ["--east_loss", "ce"], [], vary_split=True)
    assert seen[0][-2:] == ["--split_seed", "3"] and seen[0][seen[0].index("--seed") + 1] == "3"
    with pytest.raises(RuntimeError):
        _run_one(RECIPE, tmp_path / "run", 3, [], [])
    assert "--split_seed" not in seen[1]


def test_compare_tuned_adds_tuned_rows_and_pairs_against_tuned_ce(tmp_path, capsys):
    recipe = str(Path(__file__).parents[1] / "recipes" / "breast_cancer_imbalanced_f1.yaml")
    out = tmp_path / "cmp"
    tiny = ["--max_steps", "4", "--eval_steps", "2", "--save_steps", "2", "--eval_strategy", "steps"]
    tiny += ["--save_strategy", "steps", "--hidden_sizes", "16", "--disable_tqdm", "True", "--model_card", "False"]
    argv = [recipe, "--losses", "east,ce,wce,la", "--tuned", "--reference", "ce+tuned", "--output_dir", str(out)]
    assert main([*argv, "--seeds", "1", "--", *tiny]) == 0
    result = json.loads((out / "results.json").read_text())
    names = ["east", "east+tuned", "ce", "ce+tuned", "wce", "wce+tuned", "la", "la+tuned"]
    assert [r["variant"] for r in result["runs"]] == names
    for run in result["runs"]:
        saved = json.loads((Path(run["output_dir"]) / "test_results.json").read_text())
        key = "test_tuned_fbeta" if run["variant"].endswith("+tuned") else "test_fbeta"
        assert run["metrics"]["fbeta"] == saved[key]
        assert ("--tune_decision_rule" in run["flags"]) and (Path(run["output_dir"]) / "decision_rule.json").is_file()
    assert result["paired"]["reference"] == "ce+tuned"
    assert sorted(result["paired"]["differences"]) == sorted(n for n in names if n != "ce+tuned")
    tuned_ce = next(r for r in result["runs"] if r["variant"] == "ce+tuned")["metrics"]["fbeta"]
    east = next(r for r in result["runs"] if r["variant"] == "east")["metrics"]["fbeta"]
    assert result["paired"]["differences"]["east"][0] == pytest.approx(east - tuned_ce)
    assert "F-beta − ce+tuned" in (out / "results.md").read_text()


def test_a_recipe_using_the_metric_alias_is_tabulated_on_its_anneal_key(tmp_path, monkeypatch):
    import east_hf.scripts.east_compare as compare

    assert compare.recipe_metric({"metric": "mcc"}) == "mcc"
    assert compare.recipe_metric({"east_metric": "f1"}) == "fbeta"
    assert compare.recipe_metric({"metric": "mcc", "east_anneal_monitor": "eval_fbeta_dog"}) == "fbeta_dog"
    assert compare.recipe_metric({"metric": "mcc", "east_anneal_monitor": "eval_loss"}) == "mcc"  # a loss: the target
    recipe = tmp_path / "r.yaml"
    recipe.write_text("dataset_name: sklearn:iris\nmetric: mcc\n")

    def fake_run(recipe, run_dir, seed, flags, extra, vary_split=False, mode="fresh"):
        (run_dir / "test_results.json").write_text(json.dumps({"test_mcc": 0.5 + seed / 10, "test_fbeta": 0.4}))
        return {}

    monkeypatch.setattr(compare, "run_settings", lambda argv: {})
    monkeypatch.setattr(compare, "_run_one", fake_run)
    out = tmp_path / "cmp"
    assert main([str(recipe), "--losses", "east", "--seeds", "2", "--output_dir", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["metric"] == "mcc"
    assert "| variant | n | MCC * | F-beta |" in (out / "results.md").read_text()
