"""A checkpoint whose weights hold NaN or inf: refused in one line naming it and the checkpoint before it."""

import json

import pytest
import torch
from safetensors.torch import save_file

from east_hf.hf.training.resume import resolve_checkpoint


def _checkpoint(folder, step: int, value: float):
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    weights = {"fc.weight": torch.ones(2, 3), "fc.bias": torch.full((2,), value), "steps": torch.tensor([step])}
    save_file(weights, str(path / "model.safetensors"))
    return path


def test_the_last_checkpoint_with_nan_weights_names_itself_and_the_one_before(tmp_path):
    good, bad = _checkpoint(tmp_path, 2, 0.5), _checkpoint(tmp_path, 4, float("nan"))
    expected = (
        f"Expected finite weights in {bad} to resume from, "
        f"got NaN or inf in 'fc.bias' in {bad / 'model.safetensors'}: "
        f"resume from the checkpoint before it with resume_from_checkpoint={good} "
        f"(east-train: --resume_from_checkpoint {good})"
    )
    for resume in (True, "last", str(bad)):
        with pytest.raises(ValueError) as error:
            resolve_checkpoint(resume, str(tmp_path))
        assert str(error.value) == expected
    assert resolve_checkpoint(str(good), str(tmp_path)) == str(good)  # the advice works


def test_an_inf_weight_in_the_only_checkpoint_says_to_train_anew(tmp_path):
    bad = _checkpoint(tmp_path, 3, float("inf"))
    with pytest.raises(ValueError, match=r"no complete checkpoint precedes it: train anew \(east-train: "):
        resolve_checkpoint(str(bad), str(tmp_path))


def test_east_train_resuming_a_run_whose_last_checkpoint_holds_nan_names_the_one_before(tmp_path, capsys):
    from pathlib import Path

    from safetensors.torch import load_file

    from east_hf.scripts.east_train import main

    recipe = Path(__file__).resolve().parents[1] / "recipes" / "breast_cancer_imbalanced_f1.yaml"
    out = tmp_path / "run"
    overrides = {
        "output_dir": out, "max_steps": 4, "save_strategy": "steps", "save_steps": 2, "eval_strategy": "steps",
        "eval_steps": 2, "hidden_sizes": 8, "disable_tqdm": "true", "use_cpu": "true", "model_card": "false",
        "save_total_limit": 5,
    }  # fmt: skip
    argv = [str(recipe), *[str(x) for k, v in overrides.items() for x in (f"--{k}", v)]]
    assert main(argv) == 0
    last = out / "checkpoint-4" / "model.safetensors"
    weights = load_file(str(last))
    name = sorted(k for k, v in weights.items() if v.is_floating_point())[0]
    weights[name] = torch.full_like(weights[name], float("nan"))
    save_file(weights, str(last), metadata={"format": "pt"})
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--max_steps", "6", "--resume_from_checkpoint", "true"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"east-train: error: Expected finite weights in {out / 'checkpoint-4'} to resume from, got NaN or inf in "
        f"{name!r} in {last}: resume from the checkpoint before it with resume_from_checkpoint={out / 'checkpoint-2'} "
        f"(east-train: --resume_from_checkpoint {out / 'checkpoint-2'})"
    )


def test_a_checkpoint_removed_while_it_is_checked_is_incomplete_not_an_error(tmp_path, monkeypatch):
    """The Trainer's save_total_limit deletes an old checkpoint while another process (a resume, a test waiting for
    a checkpoint) lists and checks the folder: the check says the checkpoint is incomplete."""
    import shutil

    from east_hf.hf.training import checkpoints

    path = _checkpoint(tmp_path, 2, 0.5)
    torch.save({"state": 1}, path / "optimizer.pt")
    assert checkpoints.checkpoint_problem(path) is None
    weights_problem = checkpoints._safetensors_problem

    def removed_meanwhile(file):  # the folder goes after its weights are read, before its archives are
        problem = weights_problem(file)
        shutil.rmtree(path)
        return problem

    monkeypatch.setattr(checkpoints, "_safetensors_problem", removed_meanwhile)
    assert checkpoints.checkpoint_problem(path) == (
        f"{path / 'optimizer.pt'} is missing (removed while the checkpoint was checked)"
    )
    path.mkdir()  # listed again, then removed again while checked
    (path / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    save_file({"w": torch.ones(2)}, str(path / "model.safetensors"))
    torch.save({"state": 1}, path / "optimizer.pt")
    assert checkpoints.complete_checkpoints(tmp_path) == []
