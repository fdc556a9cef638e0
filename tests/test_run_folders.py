"""Nothing a user trained or wrote is replaced: re-running into a finished run is refused and overwriting is
explicit, a run resumes only with the data and model settings it was started with, east-compare trains again a run
whose recipe changed, and a folder of the user's files or an east-compare comparison is refused as an output_dir
whatever the flags."""

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import east_train_error, tiny_run_flags

from east_hf.scripts.east_train import main as east_train

ROOT = Path(__file__).resolve().parents[1]
TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"


# ---- nothing a user trained is deleted ----
def test_rerunning_into_a_finished_run_is_refused_and_overwrite_is_explicit(capsys, tmp_path):
    out = tmp_path / "run"
    assert east_train([str(TABULAR), *tiny_run_flags(out)]) == 0
    state = json.loads((out / "trainer_state.json").read_text())
    best = Path(state["best_model_checkpoint"])
    before = {
        p: p.read_bytes() for p in [out / "model.safetensors", out / "all_results.json", best / "model.safetensors"]
    }
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(out, learning_rate=0.05)])
    assert f"output_dir {out} already holds a run" in err and "--overwrite_output_dir true" in err
    assert "--resume_from_checkpoint true" in err
    assert {p: p.read_bytes() for p in before} == before  # untouched, best checkpoint included
    assert east_train([str(TABULAR), *tiny_run_flags(out, learning_rate=0.05, overwrite_output_dir="true")]) == 0
    assert json.loads((out / "all_results.json").read_text()) != json.loads(before[out / "all_results.json"])


def test_a_run_resumes_only_with_the_data_and_model_settings_it_was_started_with(capsys, tmp_path):
    """east-train keeps its run's record (run_settings.json); resuming with another split or model shape is refused in
    one line naming the change, before any training; a longer budget resumes."""
    out = tmp_path / "run"
    assert east_train([str(TABULAR), *tiny_run_flags(out)]) == 0
    record = json.loads((out / "run_settings.json").read_text())
    assert record["data"]["split_seed"] == 42 and record["model"]["hidden_sizes"] == [16]
    before = (out / "model.safetensors").read_bytes()
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(out, split_seed=7, resume_from_checkpoint="true")])
    assert "Expected the data and model settings" in err and "split_seed: 42 -> 7" in err
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(out, hidden_sizes=32, resume_from_checkpoint="true")])
    assert "hidden_sizes: [16] -> [32]" in err
    assert (out / "model.safetensors").read_bytes() == before  # nothing trained
    assert east_train([str(TABULAR), *tiny_run_flags(out, max_steps=6, resume_from_checkpoint="true")]) == 0
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6
    assert east_train([str(TABULAR), *tiny_run_flags(out, split_seed=7, overwrite_output_dir="true")]) == 0
    assert json.loads((out / "run_settings.json").read_text())["data"]["split_seed"] == 7  # the new run's record


def test_a_finished_text_run_resumes_and_is_replaced(capsys, tmp_path):
    """A text run's tokenizer files are the run's own: the run resumes and --overwrite_output_dir replaces it."""
    words = {"sport": "goal match team coach".split(), "money": "bank price loan cash".split()}
    rows = [(f"{a} {b} the day", label) for label, w in words.items() for a in w for b in w for _ in range(3)]
    csv = tmp_path / "texts.csv"
    pd.DataFrame(rows, columns=["text", "label"]).to_csv(csv, index=False)
    out = tmp_path / "run"
    argv = [str(ROOT / "recipes" / "text_tiny_demo.yaml"), "--dataset_name", str(csv), *tiny_run_flags(out)]
    argv = [a for a in argv if a not in ("--hidden_sizes", "16")]
    assert east_train(argv) == 0
    assert (out / "tokenizer.json").is_file()
    assert east_train([*argv, "--resume_from_checkpoint", "true"]) == 0
    assert east_train([*argv, "--overwrite_output_dir", "true"]) == 0
    err = east_train_error(capsys, [*argv, "--max_length", "16", "--resume_from_checkpoint", "true"])
    assert "max_length: 128 -> 16" in err


# ---- east-compare never reuses a run trained with other settings ----
def test_compare_reruns_a_run_whose_recipe_changed(tmp_path, capsys):
    from east_hf.scripts.east_compare import main as compare

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(TABULAR.read_text())
    out = tmp_path / "cmp"
    tiny = ["--max_steps", "2", "--eval_steps", "1", "--save_steps", "1", "--eval_strategy", "steps"]
    tiny += ["--hidden_sizes", "16", "--disable_tqdm", "True", "--model_card", "False"]
    argv = [str(recipe), "--losses", "ce", "--seeds", "1", "--output_dir", str(out), "--", *tiny]
    assert compare(argv) == 0
    run = out / "ce" / "seed-0"
    assert json.loads((run / "run_settings.json").read_text())["training"]["learning_rate"] == 1e-3
    capsys.readouterr()
    assert compare(argv) == 0
    assert "done, skipped" in capsys.readouterr().err
    recipe.write_text(TABULAR.read_text().replace("learning_rate: 1.0e-3", "learning_rate: 1.0e-2"))
    assert compare(argv) == 0
    err = capsys.readouterr().err
    assert "settings changed: learning_rate: 0.001 -> 0.01" in err and "done, skipped" not in err
    result = json.loads((out / "results.json").read_text())
    assert result["runs"][0]["settings"]["training"]["learning_rate"] == 1e-2
    assert "wall_seconds" in result["runs"][0]  # trained again, not read back
    assert json.loads((run / "run_settings.json").read_text())["training"]["learning_rate"] == 1e-2


@pytest.mark.parametrize("overwrite", [None, "true"])
def test_users_files_in_output_dir_are_never_replaced(capsys, tmp_path, monkeypatch, overwrite):
    mine = {"README.md": "# my notes\n", "config.json": '{"mine": true}\n'}
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in mine.items():
        (folder / name).write_text(text)
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(folder, overwrite_output_dir=overwrite)])
    assert f"Expected output_dir {folder} to be empty or to hold an east_hf run" in err
    assert "got files east_hf did not write (README.md, config.json); choose another output_dir" in err
    assert "--overwrite_output_dir never replaces or deletes them" in err
    assert {p.name: p.read_text() for p in folder.iterdir()} == mine  # no lock, no model, the files as they were

    project = tmp_path / "project"  # east-train --output_dir . in a project
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (project / "README.md").write_text("# mine\n")
    monkeypatch.chdir(project)
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(".", overwrite_output_dir=overwrite)])
    assert "got files east_hf did not write (README.md, pyproject.toml)" in err
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "pyproject.toml"]

    model = tmp_path / "my-model"  # a downloaded model: weights and config, no run of east_hf's
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "config.json").write_text("{}")
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(model, overwrite_output_dir=overwrite)])
    assert "got files east_hf did not write (config.json, model.safetensors)" in err
    assert (model / "model.safetensors").read_bytes() == b"weights"


def test_a_finished_run_with_its_card_is_still_a_run_and_can_be_replaced(capsys, tmp_path):
    out = tmp_path / "run"
    assert east_train([str(TABULAR), *tiny_run_flags(out, model_card="true")]) == 0
    assert (out / "README.md").is_file() and (out / "config.json").is_file()
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(out, model_card="true")])
    assert "already holds a run" in err
    assert east_train([str(TABULAR), *tiny_run_flags(out, model_card="true", overwrite_output_dir="true")]) == 0


def test_an_east_compare_folder_is_refused_as_an_output_dir(capsys, tmp_path):
    from east_hf.scripts.east_compare import main as compare

    out = tmp_path / "cmp"
    tiny = ["--max_steps", "2", "--eval_steps", "1", "--save_steps", "1", "--eval_strategy", "steps"]
    tiny += ["--hidden_sizes", "16", "--disable_tqdm", "True", "--model_card", "False"]
    assert compare([str(TABULAR), "--losses", "ce", "--seeds", "1", "--output_dir", str(out), "--", *tiny]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for overwrite in (None, "true"):
        err = east_train_error(capsys, [TABULAR, *tiny_run_flags(out, overwrite_output_dir=overwrite)])
        assert f"got {out}, which holds an east-compare comparison (results.json, results.md)" in err
        assert "--overwrite_output_dir never replaces a comparison" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
