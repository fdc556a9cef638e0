"""east-compare on a tiny run: the table has the right rows, its numbers are the per-run JSON's, runs are skipped."""

import hashlib
import json
import os
import statistics
from pathlib import Path

import pytest
from helpers import write_csv

from east_hf.scripts.compare_plan import parse_variants, redefining_flags
from east_hf.scripts.compare_report import markdown_table, summarize
from east_hf.scripts.east_compare import main

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
        "--tuned",
        "false",
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
        assert sum(map(int, row[2].split(" / "))) == 2 and row[3] == "2"
        seconds = {  # the training wall-clock against ce's, paired by seed: the median of the ratios
            v: [
                json.loads((out / v / f"seed-{s}" / "train_results.json").read_text())["train_runtime"] for s in (0, 1)
            ]
            for v in (row[0].strip("| "), "ce")
        }
        ratios = [a / b for a, b in zip(*seconds.values())]
        assert row[4].strip(" |") == f"{statistics.median(ratios):.2f}"
    assert (out / "results.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main([*argv, "--", *TINY]) == 0  # everything done: skipped, same table
    assert "done, skipped" in capsys.readouterr().err
    assert (out / "results.md").read_text() == table


def test_summary_and_variant_parsing():
    runs = [{"variant": "east", "metrics": {"fbeta": x, "precision_dog": 1.0}} for x in (0.5, 0.7)]
    summary = summarize(runs)
    assert summary["east"]["fbeta"][0] == pytest.approx(0.6) and summary["east"]["fbeta"][2] == 2
    assert markdown_table(summary).splitlines()[0] == "| variant | n | F-beta * | Precision dog |"
    binary = summarize([{"variant": "la", "metrics": {"fbeta": 0.4, "precision": 0.5, "recall": 0.3, "mcc": 0.2}}])
    assert markdown_table(binary).splitlines()[0] == "| variant | n | F-beta * | MCC | Precision | Recall |"
    assert markdown_table(binary).splitlines()[2] == "| la | 1 | 0.4000 | 0.2000 | 0.5000 | 0.3000 |"
    per_class = summarize([{"variant": "ce", "metrics": {"fbeta": 0.9, "fbeta_dog": 0.8}}])
    assert markdown_table(per_class, "fbeta_dog").splitlines()[0] == "| variant | n | F-beta dog * | F-beta |"
    assert parse_variants("ce", ["r08:--east_decay 0.8"]) == {
        "ce": ["--east_loss", "ce"],
        "r08": ["--east_decay", "0.8"],
    }
    with pytest.raises(ValueError, match="losses among"):
        parse_variants("hinge", None)
    with pytest.raises(ValueError, match="NAME:FLAGS"):
        parse_variants(None, ["no-colon"])
    # another average redefines macro F-beta but not a class's own F-beta; another beta redefines both
    assert "--east_average" in redefining_flags("fbeta") and "--east_average" not in redefining_flags("fbeta_positive")
    assert "--east_beta" in redefining_flags("fbeta_positive")


def test_vary_split_gives_each_seed_its_own_split(tmp_path, monkeypatch):
    import east_hf.scripts.east_train

    seen = []
    monkeypatch.setattr(east_hf.scripts.east_train, "main", lambda argv: seen.append(argv) or 1)
    from east_hf.scripts.compare_runs import run_one

    with pytest.raises(RuntimeError, match="exited with 1"):
        run_one(RECIPE, tmp_path / "run", 3, ["--east_loss", "ce"], [], vary_split=True)
    assert seen[0][-2:] == ["--split_seed", "3"] and seen[0][seen[0].index("--seed") + 1] == "3"
    with pytest.raises(RuntimeError):
        run_one(RECIPE, tmp_path / "run", 3, [], [])
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
    import east_hf.scripts.compare_plan as compare
    import east_hf.scripts.compare_runs as runs

    assert compare.recipe_metric({"metric": "mcc"}) == "mcc"
    assert compare.recipe_metric({"east_metric": "f1"}) == "fbeta"
    assert compare.recipe_metric({"metric": "mcc", "east_anneal_monitor": "eval_fbeta_dog"}) == "fbeta_dog"
    assert compare.recipe_metric({"metric": "mcc", "east_anneal_monitor": "eval_loss"}) == "mcc"  # a loss: the target
    recipe = tmp_path / "r.yaml"
    recipe.write_text("dataset_name: sklearn:iris\nmetric: mcc\n")

    def fake_run(recipe, run_dir, seed, flags, extra, vary_split=False, mode="fresh"):
        (run_dir / "test_results.json").write_text(json.dumps({"test_mcc": 0.5 + seed / 10, "test_fbeta": 0.4}))
        return {}

    monkeypatch.setattr(runs, "run_settings", lambda argv: {})
    monkeypatch.setattr(runs, "run_one", fake_run)
    out = tmp_path / "cmp"
    assert main([str(recipe), "--losses", "east", "--seeds", "2", "--output_dir", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["metric"] == "mcc"
    assert "| variant | n | MCC * | F-beta |" in (out / "results.md").read_text()


# ---- a comparison is never stale: a changed default, an edited data file, another east_hf version ----
def _fake_run(calls: list):
    """A ``run_one`` that records its mode and writes test results, so a comparison runs in a blink."""

    def run(recipe, run_dir, seed, flags, extra, vary_split=False, mode="fresh"):
        calls.append(mode)
        (run_dir / "test_results.json").write_text(json.dumps({"test_fbeta": 0.5, "test_accuracy": 0.6}))
        return {"wall_seconds": 0.0}

    return run


def _change_default(monkeypatch, name: str, value) -> None:
    """Change ``EASTConfig``'s default of ``name`` as an edit of ``east_hf/hf/config/east_config.py`` would: the
    parser's default and the defaults a record is compared against."""
    import dataclasses

    import east_hf.scripts.run_record as run_record
    from east_hf.hf.config.east_config import EASTConfig

    field = next(f for f in dataclasses.fields(EASTConfig) if f.name == name)
    monkeypatch.setattr(field, "default", value)
    defaults = run_record.default_settings

    def changed():
        out = defaults()
        out["training"][name] = value
        return out

    monkeypatch.setattr(run_record, "default_settings", changed)


def test_a_changed_default_or_version_retrains_with_the_difference_printed(tmp_path, monkeypatch, capsys):
    import east_hf
    import east_hf.scripts.compare_runs as runs

    recipe = tmp_path / "r.yaml"
    recipe.write_text("dataset_name: sklearn:iris\nmodel_name_or_path: tabular_mlp\n")
    calls: list = []
    monkeypatch.setattr(runs, "run_one", _fake_run(calls))
    argv = [str(recipe), "--losses", "ce", "--seeds", "1", "--tuned", "false", "--output_dir", str(tmp_path / "cmp")]
    assert main(argv) == 0 and calls == ["fresh"]
    capsys.readouterr()
    assert main(argv) == 0 and calls == ["fresh"]
    assert "ce seed 0: done, skipped\n" in capsys.readouterr().err

    _change_default(monkeypatch, "east_temperature", 0.1)
    assert main(argv) == 0 and calls == ["fresh", "overwrite"]
    err = capsys.readouterr().err
    assert "training (settings changed: east_temperature: 0.2 -> 0.1)" in err and "done, skipped" not in err

    version = east_hf.__version__
    monkeypatch.setattr(east_hf, "__version__", "9.9.9")
    assert main(argv) == 0 and calls == ["fresh", "overwrite", "overwrite"]
    assert f"training (east_hf {version} -> 9.9.9)" in capsys.readouterr().err
    record = json.loads((tmp_path / "cmp" / "ce" / "seed-0" / "run_settings.json").read_text())
    assert record["training"]["east_temperature"] == 0.1  # a default, recorded all the same
    assert record["east_hf_version"] == "9.9.9"
    assert record["data_fingerprint"] == {"kind": "sklearn", "name": "sklearn:iris", "parameters": None}


def test_an_old_record_of_changed_fields_only_still_counts_as_unchanged(tmp_path, monkeypatch, capsys):
    import east_hf.scripts.compare_runs as runs
    from east_hf.scripts.arguments import EASTArgumentParser
    from east_hf.scripts.run_record import resolved_settings

    calls: list = []
    monkeypatch.setattr(runs, "run_one", _fake_run(calls))
    out = tmp_path / "cmp"
    run = out / "ce" / "seed-0"
    run.mkdir(parents=True)
    tiny = ["--max_steps", "2", "--disable_tqdm", "True"]
    # what east-compare recorded before records were complete: the fields that differ from the defaults, less where
    # the run writes; no version, no data fingerprint (benchmarks/results/*/results.json hold such records)
    parsed = EASTArgumentParser().parse(runs.run_argv(RECIPE, run, 0, ["--east_loss", "ce"], tiny))
    old = {g: {k: v for k, v in kv.items() if k != "output_dir"} for g, kv in resolved_settings(parsed).items()}
    assert "east_temperature" not in old["training"] and old["training"]["disable_tqdm"] is True  # left out now
    (run / "run_settings.json").write_text(json.dumps(old, default=str))
    (run / "test_results.json").write_text(json.dumps({"test_fbeta": 0.5}))
    argv = [RECIPE, "--losses", "ce", "--seeds", "1", "--no_tuned", "--output_dir", str(out), "--", *tiny]
    assert main(argv) == 0 and calls == []
    err = capsys.readouterr().err
    assert "done, skipped (its data and east_hf version were not recorded, so they are not checked)" in err
    assert main([*argv, "--learning_rate", "0.01"]) == 0 and calls == ["overwrite"]  # a changed setting still counts
    assert "settings changed: learning_rate: 0.001 -> 0.01" in capsys.readouterr().err


def _tabular_recipe(tmp_path, classes: int) -> Path:
    rows = [f"{i % 7 * 0.3 + i % classes:.2f},{i % 5 * 0.2:.2f},c{i % classes}" for i in range(60)]
    write_csv(tmp_path / "data.csv", "x1,x2,label", rows)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"dataset_name: {tmp_path / 'data.csv'}\nmodel_name_or_path: tabular_mlp\nhidden_sizes: [8]\n")
    return recipe


def test_a_data_file_edited_in_place_is_trained_again(tmp_path, capsys):
    recipe = _tabular_recipe(tmp_path, classes=3)
    out = tmp_path / "cmp"
    tiny = ["--max_steps", "2", "--eval_steps", "1", "--save_steps", "1", "--eval_strategy", "steps"]
    tiny += ["--save_strategy", "steps", "--disable_tqdm", "True", "--model_card", "False", "--use_cpu", "True"]
    argv = [str(recipe), "--losses", "ce", "--seeds", "1", "--output_dir", str(out), "--", *tiny]
    assert main(argv) == 0
    run = out / "ce" / "seed-0"
    assert len(json.loads((run / "config.json").read_text())["id2label"]) == 3
    data = tmp_path / "data.csv"
    os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 10**9))  # touched, not edited
    capsys.readouterr()
    assert main(argv) == 0
    assert "done, skipped" in capsys.readouterr().err
    size = data.stat().st_size
    _tabular_recipe(tmp_path, classes=2)  # the same file, two classes now
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"training (data changed: {data}: {size} bytes, sha256 " in err and "done, skipped" not in err
    assert len(json.loads((run / "config.json").read_text())["id2label"]) == 2
    record = json.loads((run / "run_settings.json").read_text())["data_fingerprint"]
    assert record["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest() and record["size"] == data.stat().st_size


# ---- no secret reaches a file ----
def test_a_hub_token_never_reaches_a_file(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setenv("HF_TOKEN", "hf_ENVIRONMENT789")
    out = tmp_path / "cmp"
    tiny = ["--max_steps", "2", "--eval_steps", "1", "--save_steps", "1", "--eval_strategy", "steps"]
    tiny += ["--save_strategy", "steps", "--disable_tqdm", "True", "--hidden_sizes", "8", "--use_cpu", "True"]
    recipe = str(Path(__file__).parents[1] / "recipes" / "breast_cancer_imbalanced_f1.yaml")
    variants = ["tok:--east_loss ce --hub_token=hf_SECRET123"]
    argv = [recipe, "--variants", *variants, "--seeds", "1", "--tuned", "false", "--output_dir", str(out)]
    assert main([*argv, "--", *tiny, "--hub_token", "hf_SECRET123", "--push_to_hub", "false"]) == 0
    assert (out / "tok" / "seed-0" / "README.md").is_file()  # the card, with its recipe, is among the files
    written = [p for p in out.rglob("*") if p.is_file()]
    assert len(written) > 10
    for secret in (b"hf_SECRET123", b"hf_ENVIRONMENT789"):
        assert [p for p in written if secret in p.read_bytes()] == []
    logs = capsys.readouterr()
    assert "hf_SECRET123" not in logs.out + logs.err + caplog.text
    result = json.loads((out / "results.json").read_text())
    assert "--hub_token '***'" in result["command"] and result["runs"][0]["flags"][-3] == "--hub_token=***"


# ---- the honest comparison by default: the strongest baselines, each tuned and not, against tuned cross-entropy ----
def _fake_tuned_run(calls: list):
    """A ``run_one`` that records its recipe and flags and writes test results with a tuned rule's scores."""

    def run(recipe, run_dir, seed, flags, extra, vary_split=False, mode="fresh"):
        calls.append((recipe, list(flags)))
        scores = {"east": 0.7, "ce": 0.5, "la": 0.6, "focal": 0.55, "ldam": 0.65, "wce": 0.52, "asl": 0.58}
        score = scores[flags[flags.index("--east_loss") + 1]]
        metrics = {"test_fbeta": score, "test_accuracy": 0.9, "test_tuned_fbeta": score + 0.05}
        (run_dir / "test_results.json").write_text(json.dumps(metrics))
        return {"wall_seconds": 0.0}

    return run


def test_the_defaults_compare_east_with_the_strongest_baselines_each_tuned_against_tuned_ce(
    tmp_path, monkeypatch, capsys
):
    """The default losses are EAST, ce, la and the strongest baselines of the project's results (focal loss and
    LDAM-DRW, docs/results/finetune.md); on multi-label data, the multi-label results' set."""
    import re

    import east_hf.scripts.compare_runs as runs
    import east_hf.scripts.east_compare as compare

    args = compare.build_parser().parse_args(["demo"])
    assert (args.losses, args.variants, args.tuned, args.reference) == (None, None, True, None)
    default = ("east", "ce", "la", "focal", "ldam")
    assert parse_variants(compare.DEFAULT_LOSSES, None) == {n: ["--east_loss", n] for n in default}
    assert list(parse_variants(compare.default_losses(multi_label=True), None, multi_label=True)) == [
        "east",
        "ce",
        "wce",
        "la",
        "asl",
    ]
    help_text = " ".join(compare.build_parser().format_help().split())
    assert (
        "focal loss and LDAM" in help_text and "(default: east,ce,la,focal,ldam; multi-label: east,ce,wce" in help_text
    )
    assert compare.reference_variant(args) == "ce+tuned"
    for off in (["--tuned", "false"], ["--no_tuned"]):
        args = compare.build_parser().parse_args(["demo", *off])
        assert args.tuned is False and compare.reference_variant(args) == "ce"
    assert compare.build_parser().parse_args(["demo", "--tuned"]).tuned is True

    calls: list = []
    monkeypatch.setattr(runs, "run_one", _fake_tuned_run(calls))
    recipe = tmp_path / "r.yaml"
    recipe.write_text("dataset_name: sklearn:iris\nmodel_name_or_path: tabular_mlp\n")
    out = tmp_path / "cmp"
    assert main([str(recipe), "--seeds", "2", "--output_dir", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    names = [row for n in default for row in (n, f"{n}+tuned")]
    assert [r["variant"] for r in result["runs"]] == names * 2
    assert all(flags[-2:] == ["--tune_decision_rule", "true"] for _, flags in calls) and len(calls) == 10
    assert result["paired"]["reference"] == "ce+tuned"
    differences = result["paired"]["differences"]
    assert sorted(differences) == sorted(n for n in names if n != "ce+tuned")
    assert differences["east"][0] == pytest.approx(0.7 - 0.55) and differences["la+tuned"][0] == pytest.approx(0.1)
    err = capsys.readouterr().err
    assert re.search(r"\[1/10\] east seed 0: training \(elapsed 0:\d\d\)\n", err)
    assert re.search(r"\[10/10\] ldam seed 1: training \(elapsed 0:\d\d, ETA ~0:\d\d\)\n", err)
    # turned off: the untuned models against argmax cross-entropy
    off = tmp_path / "off"
    assert main([str(recipe), "--seeds", "1", "--tuned", "false", "--output_dir", str(off)]) == 0
    result = json.loads((off / "results.json").read_text())
    assert [r["variant"] for r in result["runs"]] == list(default) and result["paired"]["reference"] == "ce"
    # the rule is tuned all the same (after the as-trained test evaluation): only the rows differ
    assert calls[-1][1][-2:] == ["--tune_decision_rule", "true"]
    assert all(not key.startswith("tuned_") for run in result["runs"] for key in run["metrics"])
    # several labels per row: the multi-label results' set
    calls.clear()
    multi = tmp_path / "multi.yaml"
    multi.write_text("dataset_name: sklearn:iris\nmodel_name_or_path: tabular_mlp\nlabel_columns: [a, b]\n")
    assert main([str(multi), "--seeds", "1", "--output_dir", str(tmp_path / "multi")]) == 0
    assert [flags[flags.index("--east_loss") + 1] for _, flags in calls] == ["east", "ce", "wce", "la", "asl"]


def test_a_reference_that_is_not_compared_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        main([RECIPE, "--losses", "east,ce", "--reference", "dice", "--output_dir", str(tmp_path / "cmp")])
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("east-compare: error: ")
    assert "Expected --reference among ['east', 'east+tuned', 'ce', 'ce+tuned'], got 'dice'" in err
    assert not (tmp_path / "cmp").exists()


def test_a_packaged_recipe_is_compared_by_name_into_its_own_folder(tmp_path, monkeypatch, capsys):
    import east_hf.scripts.compare_runs as runs
    from east_hf.scripts.arguments import packaged_recipes

    calls: list = []
    monkeypatch.setattr(runs, "run_one", _fake_tuned_run(calls))
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--losses", "ce", "--seeds", "1"]) == 0
    assert calls[0][0] == str(packaged_recipes()["demo"])
    table = (tmp_path / "runs" / "compare-demo" / "results.md").read_text()
    assert table.startswith("# demo: test metrics") and "Command: `east-compare demo --losses ce --seeds 1`" in table
    with pytest.raises(SystemExit) as exit:
        main(["demoo", "--seeds", "1"])
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("east-compare: error: recipe 'demoo' does not exist") and "did you mean" in err
    assert "'demo'?" in err


def test_make_demo_and_east_train_demo_never_share_a_folder(tmp_path, monkeypatch, capsys):
    """``make demo``'s east-compare table and ``east-train demo``'s run go to different folders; east-train refuses
    the table's folder even when pointed at it."""
    import east_hf.scripts.compare_runs as runs
    from east_hf.scripts.arguments import EASTArgumentParser
    from east_hf.scripts.east_train import main as east_train

    makefile = (Path(__file__).parents[1] / "Makefile").read_text()
    command = next(line.split() for line in makefile.splitlines() if "/east-compare " in line)
    assert command[1:] == ["demo", "--seeds", "1"]  # the defaults: the honest comparison
    calls: list = []
    monkeypatch.setattr(runs, "run_one", _fake_tuned_run(calls))
    monkeypatch.chdir(tmp_path)
    assert main(command[1:]) == 0
    table = tmp_path / "runs" / "compare-demo"
    assert (table / "results.md").is_file() and (table / "results.json").is_file()
    train_dir = EASTArgumentParser().parse(["demo"]).training.output_dir
    assert Path(train_dir).resolve() != table.resolve() and not (tmp_path / train_dir).exists()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        east_train(["demo", "--output_dir", str(table), "--max_steps", "1"])
    assert exit.value.code == 2
    assert "which holds an east-compare comparison" in capsys.readouterr().err


# ---- the plot does not exaggerate gaps ----
def test_the_comparison_plot_starts_its_y_axis_at_zero():
    from east_hf.scripts.compare_report import comparison_figure

    close = {"east": {"fbeta": (0.86, 0.01, 3)}, "ce": {"fbeta": (0.84, 0.01, 3)}}
    fig = comparison_figure(close, "fbeta")
    low, high = fig.axes[0].get_ylim()
    assert low == 0.0 and 0.87 <= high <= 1.0
    negative = {"east": {"mcc": (0.2, 0.05, 3)}, "ce": {"mcc": (-0.1, 0.05, 3)}}
    low, high = comparison_figure(negative, "mcc").axes[0].get_ylim()
    assert low <= -0.15 and high >= 0.25  # a metric below zero: the axis reaches it, and still shows zero


def test_the_card_license_is_no_reason_to_train_again():
    from east_hf.scripts.run_record import settings_changes

    old = {"script": {"license": "mit", "model_card": True}, "training": {"learning_rate": 0.01}}
    new = {"script": {"license": "apache-2.0", "model_card": False}, "training": {"learning_rate": 0.01}}
    assert settings_changes(old, new) == []
    assert settings_changes(old, {**new, "training": {"learning_rate": 0.1}}) == ["learning_rate: 0.01 -> 0.1"]
