"""A checkpoint cut short or damaged never loses a run: after a kill during a save, a truncated or garbled file in
the last checkpoint, or the annealing callback's per-stage best weights missing or truncated, resume true goes on from
the last complete checkpoint with one warning naming the file, and a path to the damaged one is refused in one line."""

import json
import logging
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from helpers import PlainClassifier, TinyTabular, east_args, east_train_error, tiny_run_flags
from transformers import TrainerCallback

from east_hf import EASTTrainer
from east_hf.hf.training.checkpoints import (
    STAGE_BEST_WEIGHTS_NAME,
    WEIGHT_FILES,
    checkpoint_problem,
    complete_checkpoints,
    is_complete_checkpoint,
    last_complete_checkpoint,
)
from east_hf.scripts.east_train import main as east_train

ROOT = Path(__file__).resolve().parents[1]
TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"


# ---- a kill during a checkpoint save loses nothing ----
KILL_SCRIPT = """
import os, signal, sys
from transformers import TrainerState
save = TrainerState.save_to_json
def save_or_die(self, path):
    if "checkpoint-4" in str(path):
        os.kill(os.getpid(), signal.SIGKILL)  # weights and optimizer written, trainer_state.json not yet
    return save(self, path)
TrainerState.save_to_json = save_or_die
from east_hf.scripts.east_train import main
sys.exit(main(sys.argv[1:]))
"""


def test_kill_during_a_checkpoint_save_then_resume_skips_the_incomplete_one(capsys, tmp_path, caplog):
    out = tmp_path / "run"
    argv = [str(TABULAR), *tiny_run_flags(out, max_steps=6)]
    killed = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, *argv], capture_output=True, text=True, timeout=600, env=dict(os.environ)
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert is_complete_checkpoint(out / "checkpoint-2") and not is_complete_checkpoint(out / "checkpoint-4")
    assert (out / "checkpoint-4" / "model.safetensors").is_file()
    assert last_complete_checkpoint(out) == out / "checkpoint-2"
    err = east_train_error(capsys, argv)  # a partial run is not silently replaced
    assert "already holds a run" in err and "checkpoint-4" in err
    err = east_train_error(capsys, [*argv, "--resume_from_checkpoint", str(out / "checkpoint-4")])
    assert "Expected resume_from_checkpoint to be a complete checkpoint" in err
    assert east_train([*argv, "--resume_from_checkpoint", "true"]) == 0
    assert "skipping incomplete checkpoint" in caplog.text and "checkpoint-4" in caplog.text
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 6 and (out / "test_results.json").is_file()


# ---- a corrupt file in the last checkpoint: resume from the last one that loads ----
def _truncate(file: Path) -> None:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


def _garble_header(file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[:8] + b"#" * 32 + data[40:])  # safetensors: 8 bytes of header length, then JSON


CORRUPTIONS = {  # what happens to a file of checkpoint-4, and what the warning and the error say about it
    "truncated weights": ("model.safetensors", _truncate, "does not load", "file not fully covered"),
    "garbled weights header": ("model.safetensors", _garble_header, "does not load", "invalid JSON in header"),
    "truncated trainer state": ("trainer_state.json", _truncate, "is not JSON", "line "),
    "truncated optimizer": ("optimizer.pt", _truncate, "is not a whole torch.save archive", "truncated or corrupt"),
}


class _StepCounter(TrainerCallback):
    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


def _checkpointed(out: Path, callbacks=None) -> EASTTrainer:
    """4 steps of a tiny model, a checkpoint every 2: checkpoint-2 and checkpoint-4."""
    args = east_args(out, max_steps=4, save_strategy="steps", save_steps=2, logging_steps=1, save_total_limit=None)
    torch.manual_seed(0)
    return EASTTrainer(model=PlainClassifier(), args=args, train_dataset=TinyTabular(), callbacks=callbacks)


@pytest.fixture(scope="module")
def checkpointed_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("checkpointed") / "run"
    _checkpointed(out).train()
    assert is_complete_checkpoint(out / "checkpoint-2") and is_complete_checkpoint(out / "checkpoint-4")
    return out


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_last_checkpoint_is_skipped_by_resume_true_and_refused_by_path(
    checkpointed_run, tmp_path, caplog, corruption
):
    name, corrupt, why, detail = CORRUPTIONS[corruption]
    out = tmp_path / "run"
    shutil.copytree(checkpointed_run, out)
    bad = out / "checkpoint-4" / name
    corrupt(bad)
    assert not is_complete_checkpoint(bad.parent) and last_complete_checkpoint(out) == out / "checkpoint-2"
    assert complete_checkpoints(out) == [out / "checkpoint-2"]
    # A path to it: one line naming the file and what is wrong, before any step.
    with pytest.raises(ValueError) as error:
        _checkpointed(out).train(resume_from_checkpoint=str(bad.parent))
    message = str(error.value)
    assert "\n" not in message and message.startswith("Expected resume_from_checkpoint to be a complete checkpoint")
    assert f"{bad} {why}" in message and detail in message and "pass 'true'" in message
    # true: one warning line naming it, then the run resumes from checkpoint-2 and finishes.
    counter = _StepCounter()
    trainer = _checkpointed(out, callbacks=[counter])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        trainer.train(resume_from_checkpoint=True)
    (warning,) = [r.getMessage() for r in caplog.records if "skipping incomplete checkpoint" in r.getMessage()]
    assert warning.startswith(f"skipping incomplete checkpoint {bad.parent}: {bad} {why}") and "\n" not in warning
    assert counter.steps == [3, 4] and trainer.state.global_step == 4
    assert is_complete_checkpoint(out / "checkpoint-4")  # saved again, whole


def test_checkpoint_problem_reads_shards_bins_and_state_without_loading_tensors(tmp_path):
    from safetensors.torch import save_file

    from east_hf.hf.training.checkpoints import checkpoint_problem

    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    assert checkpoint_problem(folder) == f"{folder} holds no model weights ({', '.join(WEIGHT_FILES)})"
    save_file({"w": torch.ones(2)}, str(folder / "model-00001-of-00002.safetensors"))
    index = {"weight_map": {"w": "model-00001-of-00002.safetensors", "v": "model-00002-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert checkpoint_problem(folder) == (
        f"{folder / 'model.safetensors.index.json'} names the shard model-00002-of-00002.safetensors, which is missing"
    )
    save_file({"v": torch.ones(2)}, str(folder / "model-00002-of-00002.safetensors"))
    assert checkpoint_problem(folder) is None and is_complete_checkpoint(folder)
    save_file({}, str(folder / "model-00002-of-00002.safetensors"))
    assert checkpoint_problem(folder) == f"{folder / 'model-00002-of-00002.safetensors'} lists no tensors"
    for name in (
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ):
        (folder / name).unlink()
    torch.save({"w": torch.ones(2)}, folder / "pytorch_model.bin")
    assert is_complete_checkpoint(folder)
    (folder / "pytorch_model.bin").write_bytes(b"")
    assert checkpoint_problem(folder) == f"{folder / 'pytorch_model.bin'} is empty"
    torch.save({"w": torch.ones(2)}, folder / "pytorch_model.bin")
    (folder / "trainer_state.json").write_text("[1, 2]")
    assert checkpoint_problem(folder) == f"{folder / 'trainer_state.json'} holds a JSON list, not the Trainer's state"
    assert checkpoint_problem(tmp_path / "checkpoint-9") == f"{tmp_path / 'checkpoint-9'} is not a folder"


# ---- the annealing callback's per-stage best weights are part of a complete checkpoint ----
@pytest.fixture(scope="module")
def stage_best_run(tmp_path_factory) -> tuple[Path, int]:
    """An annealing run cut after the first checkpoint that carries east_stage_best.pt (its stage best is an earlier
    step): the checkpoints after it are removed, as if the run had been killed there. Returns the folder and step."""
    from helpers import annealing_trainer

    out = tmp_path_factory.mktemp("stage_best") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        annealing_trainer(out).train()
    finally:
        torch.set_num_threads(threads)
    steps = sorted(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*"))
    step = next(s for s in steps if (out / f"checkpoint-{s}" / STAGE_BEST_WEIGHTS_NAME).is_file())
    for later in (s for s in steps if s > step):
        shutil.rmtree(out / f"checkpoint-{later}")
    return out, step


def _copy_of(stage_best_run, tmp_path) -> tuple[Path, Path]:
    """A copy of the stage-best run to damage, and its last checkpoint."""
    run, step = stage_best_run
    out = tmp_path / "run"
    shutil.copytree(run, out)
    return out, out / f"checkpoint-{step}"


def test_a_checkpoint_lists_its_stage_best_weights_and_is_incomplete_without_them(stage_best_run, tmp_path):
    out, last = _copy_of(stage_best_run, tmp_path)
    saved = json.loads((last / "trainer_state.json").read_text())["stateful_callbacks"]
    assert saved["TemperatureAnnealingCallback"]["attributes"]["checkpoint_files"] == [STAGE_BEST_WEIGHTS_NAME]
    assert last_complete_checkpoint(out) == last
    # a save cut off after trainer_state.json, before the callback's on_save wrote its file
    (last / STAGE_BEST_WEIGHTS_NAME).unlink()
    assert checkpoint_problem(last) == (
        f"{last / STAGE_BEST_WEIGHTS_NAME} is missing (its save was cut off): {last / 'trainer_state.json'} lists it"
    )
    assert last_complete_checkpoint(out) == complete_checkpoints(out)[-1] != last


@pytest.mark.usefixtures("one_thread")
def test_a_truncated_stage_best_file_is_skipped_by_resume_true_and_refused_by_path(stage_best_run, tmp_path, caplog):
    from helpers import annealing_trainer

    out, last = _copy_of(stage_best_run, tmp_path)
    bad = last / STAGE_BEST_WEIGHTS_NAME
    _truncate(bad)
    previous = complete_checkpoints(out)[-1]
    assert previous != last and last_complete_checkpoint(out) == previous
    # A path to it: one line naming the file, before any step (no PytorchStreamReader traceback).
    with pytest.raises(ValueError) as error:
        annealing_trainer(out).train(resume_from_checkpoint=str(last))
    message = str(error.value)
    assert "\n" not in message and message.startswith("Expected resume_from_checkpoint to be a complete checkpoint")
    assert f"{bad} is not a whole torch.save archive: truncated or corrupt" in message
    # true: one warning line naming it, then the run resumes from the checkpoint before and finishes.
    counter = _StepCounter()
    trainer = annealing_trainer(out, callbacks=[counter])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        trainer.train(resume_from_checkpoint=True)
    (warning,) = [r.getMessage() for r in caplog.records if "skipping incomplete checkpoint" in r.getMessage()]
    assert (
        warning
        == f"skipping incomplete checkpoint {last}: {bad} is not a whole torch.save archive: truncated or corrupt"
    )
    first_step = int(previous.name.split("-")[1]) + 1
    assert counter.steps[0] == first_step and trainer.state.global_step > stage_best_run[1]
    assert is_complete_checkpoint(last)  # saved again, whole


def _flip_a_tensor_byte(file: Path) -> None:
    """Flip one byte inside the largest tensor's data of a torch.save archive: the zip's directory stays whole."""
    with zipfile.ZipFile(file) as archive:
        entry = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = bytearray(file.read_bytes())
    header = entry.header_offset  # a zip local header: 30 bytes, then the name and the extra field, then the data
    name_length = int.from_bytes(data[header + 26 : header + 28], "little")
    extra_length = int.from_bytes(data[header + 28 : header + 30], "little")
    data[header + 30 + name_length + extra_length + entry.file_size // 2] ^= 0xFF
    file.write_bytes(bytes(data))


@pytest.mark.usefixtures("one_thread")
def test_a_garbled_stage_best_file_fails_its_checksum_and_resume_last_uses_the_checkpoint_before(
    stage_best_run, tmp_path, caplog
):
    """A byte flipped inside a tensor of east_stage_best.pt leaves a whole archive; the SHA-256 recorded beside it
    when it was saved tells. resume "last" (as true) skips the checkpoint with one warning line naming the file and
    goes on from the checkpoint before, as the troubleshooting page promises."""
    from helpers import annealing_trainer

    out, last = _copy_of(stage_best_run, tmp_path)
    bad = last / STAGE_BEST_WEIGHTS_NAME
    _flip_a_tensor_byte(bad)
    assert zipfile.is_zipfile(bad) and (last / f"{STAGE_BEST_WEIGHTS_NAME}.sha256").is_file()
    why = f"{bad} is a file whose SHA-256 "
    assert checkpoint_problem(last).startswith(why) and "changed or garbled since" in checkpoint_problem(last)
    previous = complete_checkpoints(out)[-1]
    assert previous != last and last_complete_checkpoint(out) == previous
    counter = _StepCounter()
    trainer = annealing_trainer(out, callbacks=[counter])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        trainer.train(resume_from_checkpoint="last")
    (warning,) = [r.getMessage() for r in caplog.records if "skipping incomplete checkpoint" in r.getMessage()]
    assert warning.startswith(f"skipping incomplete checkpoint {last}: {why}") and "\n" not in warning
    assert counter.steps[0] == int(previous.name.split("-")[1]) + 1 and trainer.state.global_step > stage_best_run[1]


def test_a_stage_best_file_damaged_after_the_check_is_one_line_not_a_traceback(tmp_path):
    """The callback reads east_stage_best.pt from output_dir; a file there that does not load (a checkpoint resumed
    from a path elsewhere, a file damaged since the check) ends in one line naming it."""
    from transformers import TrainerControl, TrainerState

    from east_hf.core.annealing import AnnealingSchedule
    from east_hf.hf.training.callbacks import TemperatureAnnealingCallback

    callback = TemperatureAnnealingCallback(AnnealingSchedule(patience=3))
    callback.schedule.update(1.0, 0.5, step=2)  # the stage best is step 2; the checkpoint is step 4
    (tmp_path / "checkpoint-4").mkdir()
    bad = tmp_path / "checkpoint-4" / STAGE_BEST_WEIGHTS_NAME
    torch.save({"w": torch.ones(3)}, bad)
    _truncate(bad)
    args = east_args(tmp_path, eval_strategy="steps", eval_steps=2)
    with pytest.raises(ValueError) as error:
        callback.on_train_begin(args, TrainerState(global_step=4), TrainerControl(), model=PlainClassifier())
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"Expected the stage's best weights in {bad}, got a file")
