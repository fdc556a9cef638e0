"""An east-compare folder over several commands: a run whose record or results do not read back is trained again, a
change of the tables alone reuses every trained run, and flags that would replace trained runs are refused."""

import json
from pathlib import Path

import pytest

from east_hf.scripts.east_compare import main

SCORES = {"east": 0.7, "ce": 0.5, "la": 0.6, "dice": 0.55, "focal": 0.52, "ldam": 0.65}
DEFAULT = ["east", "ce", "la", "focal", "ldam"]  # east-compare's default losses on single-label data
TUNED_ROWS = [row for n in DEFAULT for row in (n, f"{n}+tuned")]
SETTINGS = "run_settings.json"


@pytest.fixture
def trainings(monkeypatch) -> list:
    """Replace east-train by a fake that records (variant, seed, mode) and writes a finished run's files, the tuned
    rule's scores included; the records (``run_settings``) are the real ones."""
    import east_hf.scripts.compare_runs as runs

    calls: list = []

    def run(recipe, run_dir, seed, flags, extra, vary_split=False, mode="fresh"):
        calls.append((run_dir.parent.name, seed, mode))
        score = SCORES[flags[flags.index("--east_loss") + 1]]
        metrics = {"test_fbeta": score, "test_accuracy": 0.9}
        if "--tune_decision_rule" in flags:
            metrics["test_tuned_fbeta"] = score + 0.05
        (run_dir / "test_results.json").write_text(json.dumps(metrics))
        (run_dir / "model.safetensors").write_bytes(b"weights of " + str(run_dir).encode())
        return {"wall_seconds": 0.0}

    monkeypatch.setattr(runs, "run_one", run)
    return calls


@pytest.fixture
def recipe(tmp_path) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text("dataset_name: sklearn:iris\nmodel_name_or_path: tabular_mlp\n")
    return path


def _files(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` (but the tables) with its mtime in ns: what a reused run leaves untouched."""
    return {
        str(p.relative_to(folder)): p.stat().st_mtime_ns
        for p in folder.rglob("*")
        if p.is_file() and p.parent != folder
    }


def _rows(out: Path) -> list[str]:
    return [r["variant"] for r in json.loads((out / "results.json").read_text())["runs"]]


# ---- a record or results that do not read back: the run is not done ----
@pytest.mark.parametrize("name", ["run_settings.json", "test_results.json"])
def test_a_truncated_record_or_result_retrains_the_run_in_one_line(trainings, recipe, tmp_path, capsys, name):
    out = tmp_path / "cmp"
    argv = [str(recipe), "--losses", "ce", "--seeds", "1", "--no_tuned", "--output_dir", str(out)]
    assert main(argv) == 0 and trainings == [("ce", 0, "fresh")]
    file = out / "ce" / "seed-0" / name
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])  # a full disk, a kill mid-write
    capsys.readouterr()
    assert main(argv) == 0  # no JSONDecodeError, on this run or any after it
    assert trainings == [("ce", 0, "fresh"), ("ce", 0, "overwrite")]
    err = capsys.readouterr().err
    assert "Traceback" not in err and "JSONDecodeError" not in err
    (line,) = [line for line in err.splitlines() if str(file) in line]
    why = "so how the earlier run was trained is unknown" if name == SETTINGS else "so the run is not done"
    assert line.startswith(f"[1/1] ce seed 0: training ({file} does not read back (") and why in line
    assert "truncated or corrupt" in line
    json.loads(file.read_text())  # written whole again
    capsys.readouterr()
    assert main(argv) == 0 and len(trainings) == 2
    assert "ce seed 0: done, skipped\n" in capsys.readouterr().err


def test_a_truncated_test_result_is_trained_again_by_east_train_itself(tmp_path, capsys):
    """The same through a real (tiny) east-train run: the folder with the truncated result is replaced, not
    refused."""
    recipe = str(Path(__file__).parents[1] / "recipes" / "breast_cancer_imbalanced_f1.yaml")
    out = tmp_path / "cmp"
    tiny = ["--max_steps", "2", "--eval_steps", "1", "--save_steps", "1", "--eval_strategy", "steps"]
    tiny += ["--save_strategy", "steps", "--hidden_sizes", "8", "--disable_tqdm", "True", "--model_card", "False"]
    tiny += ["--use_cpu", "True"]
    argv = [recipe, "--losses", "ce", "--seeds", "1", "--no_tuned", "--output_dir", str(out), "--", *tiny]
    assert main(argv) == 0
    result = out / "ce" / "seed-0" / "test_results.json"
    expected = json.loads(result.read_text())
    result.write_text(result.read_text()[:10])
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"ce seed 0: training ({result} does not read back (" in err and "Traceback" not in err
    assert json.loads(result.read_text())["test_fbeta"] == pytest.approx(expected["test_fbeta"])


# ---- the tables change, the trained runs stay ----
def test_a_change_of_the_tuning_alone_reuses_every_trained_run(trainings, recipe, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = [str(recipe), "--seeds", "1", "--output_dir", str(out)]
    assert main(argv) == 0 and [c[0] for c in trainings] == DEFAULT
    assert _rows(out) == TUNED_ROWS
    trained = _files(out)
    capsys.readouterr()
    assert main([*argv, "--tuned", "false"]) == 0
    assert len(trainings) == 5 and _files(out) == trained  # nothing trained, no run's file rewritten
    err = capsys.readouterr().err
    assert all(f"{v} seed 0: done, skipped\n" in err for v in DEFAULT)
    assert _rows(out) == DEFAULT
    result = json.loads((out / "results.json").read_text())
    assert [r["metrics"]["fbeta"] for r in result["runs"]] == [SCORES[v] for v in DEFAULT]  # the as-trained scores
    (line,) = [line for line in err.splitlines() if "replacing the table" in line]
    assert line == (
        f"{out / 'results.md'}: replacing the table of `east-compare {recipe} --seeds 1 --output_dir {out}` with "
        f"this comparison's; every run stays in {out}, and that command rebuilds its table from them"
    )
    assert main(argv) == 0 and len(trainings) == 5 and _files(out) == trained  # and back
    assert _rows(out) == TUNED_ROWS


def test_the_untuned_comparison_after_the_default_trains_only_its_new_variant(trainings, recipe, tmp_path, capsys):
    """The README's two commands into one folder: the default, then the untuned comparison with dice."""
    out = tmp_path / "cmp"
    assert main([str(recipe), "--seeds", "1", "--output_dir", str(out)]) == 0
    trained = _files(out)
    capsys.readouterr()
    untuned = [str(recipe), "--tuned", "false", "--losses", "east,ce,dice", "--reference", "ce", "--seeds", "1"]
    assert main([*untuned, "--output_dir", str(out)]) == 0
    assert trainings[5:] == [("dice", 0, "fresh")]
    after = _files(out)
    assert {k: v for k, v in after.items() if k in trained} == trained  # the default's runs untouched and kept
    assert sorted(set(after) - set(trained)) == [
        f"dice/seed-0/{n}" for n in ("model.safetensors", SETTINGS, "test_results.json")
    ]
    assert _rows(out) == ["east", "ce", "dice"]
    assert "replacing the table of `east-compare" in capsys.readouterr().err


# ---- flags that would replace trained runs ----
def test_other_training_flags_into_the_same_folder_are_refused_in_one_line(trainings, recipe, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = [str(recipe), "--losses", "east,ce", "--seeds", "1", "--output_dir", str(out)]
    assert main(argv) == 0 and len(trainings) == 2
    trained, table = _files(out), (out / "results.md").read_text()
    capsys.readouterr()
    for other in (
        [*argv, "--", "--learning_rate", "0.01"],  # other arguments for every run
        [
            str(recipe),
            "--variants",
            "east:--east_loss east --east_decay 0.8",
            "--seeds",
            "1",
            "--output_dir",
            str(out),
        ],
        [*argv, "--vary_split"],
    ):
        with pytest.raises(SystemExit) as exit:
            main(other)
        assert exit.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1  # the one line, without argparse's usage
        error = lines[0]
        assert error.startswith(f"east-compare: error: Expected {out} to be compared again ")
        assert f"(east-compare {recipe} --losses east,ce --seeds 1 --output_dir {out})" in error
        assert f"replace their runs in {out}; pass --output_dir" in error and "--force" in error
        assert len(trainings) == 2 and _files(out) == trained and (out / "results.md").read_text() == table
    # the same flags and more seeds: nothing to replace
    assert main([*argv[:-3], "2", *argv[-2:]]) == 0 and [c[1] for c in trainings[2:]] == [1, 1]
    # --force replaces them, saying why
    capsys.readouterr()
    assert main([*argv, "--force", "--", "--learning_rate", "0.01"]) == 0
    assert trainings[4:] == [("east", 0, "overwrite"), ("ce", 0, "overwrite")]
    assert "east seed 0: training (--force)" in capsys.readouterr().err
    record = json.loads((out / "east" / "seed-0" / "run_settings.json").read_text())
    assert record["training"]["learning_rate"] == 0.01 and record["requested"]["asked"]["extra"] == [
        "--learning_rate",
        "0.01",
    ]


def test_a_recipe_edited_under_the_same_flags_is_still_trained_again(trainings, recipe, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = [str(recipe), "--losses", "ce", "--seeds", "1", "--output_dir", str(out)]
    assert main(argv) == 0
    recipe.write_text(recipe.read_text() + "learning_rate: 0.01\n")
    capsys.readouterr()
    assert main(argv) == 0 and trainings[1:] == [("ce", 0, "overwrite")]
    err = capsys.readouterr().err
    assert "ce seed 0: training (settings changed: learning_rate: " in err and " -> 0.01) (elapsed" in err


def test_a_recipe_whose_annealing_changed_trains_only_east_again(trainings, recipe, tmp_path, capsys):
    """The baselines train one stage of early stopping and leave the annealing's settings unused: their kept runs hold
    the same models, so only EAST trains again; a setting a baseline trains with (its patience) retrains them all."""
    out = tmp_path / "cmp"
    argv = [str(recipe), "--losses", "east,ce,ldam", "--seeds", "1", "--output_dir", str(out)]
    assert main(argv) == 0 and len(trainings) == 3
    recipe.write_text(recipe.read_text() + "east_max_stages: 1\neast_decay: 0.8\neast_stage_patience: 3\n")
    capsys.readouterr()
    assert main(argv) == 0 and trainings[3:] == [("east", 0, "overwrite")]
    err = capsys.readouterr().err
    assert "east seed 0: training (settings changed: east_decay: " in err
    assert "ce seed 0: done, skipped\n" in err and "ldam seed 0: done, skipped\n" in err
    recipe.write_text(recipe.read_text() + "east_patience: 4\n")
    assert main(argv) == 0 and [c[0] for c in trainings[4:]] == ["east", "ce", "ldam"]
