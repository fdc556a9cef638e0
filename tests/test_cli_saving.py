"""east-train saving a run: a full disk during a checkpoint save ends in one line naming the checkpoint to resume
from (also a real full disk, in a small tmpfs), a card it cannot write is one warning line and leaves no partial file,
and a README the user edited stays as it is, the card written beside it."""

import errno
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import east_train_error, two_step_flags

from east_hf.scripts.east_train import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "recipes" / "digits_longtail_demo.yaml"  # an image task; the tests give it tiny budgets
TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"
CHECKPOINT_EVERY_2 = [
    "--max_steps",
    "6",
    "--eval_strategy",
    "steps",
    "--eval_steps",
    "2",
    "--save_steps",
    "2",
    "--hidden_sizes",
    "16",
    "--disable_tqdm",
    "true",
    "--use_cpu",
    "true",
    "--model_card",
    "false",
    "--report_to",
    "none",
]


# ---- a full disk during a checkpoint save ----
def test_a_full_disk_during_a_checkpoint_save_ends_in_one_line_and_resume_works(capsys, tmp_path, monkeypatch):
    out = tmp_path / "run"
    argv = [TABULAR, *CHECKPOINT_EVERY_2, "--output_dir", out]
    save = torch.save

    def full_at_step_4(obj, f, *args, **kwargs):  # the optimizer state of checkpoint-4 meets a full disk
        if "checkpoint-4" in str(f):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(f))
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_at_step_4)
    assert east_train_error(capsys, argv, only_line=True) == (
        f"east-train: error: Expected free disk space in {out}, got No space left on device (ENOSPC): "
        f"free space, then resume from {out / 'checkpoint-2'} with --resume_from_checkpoint true "
        "(a checkpoint cut short is skipped)"
    )
    monkeypatch.setattr(torch, "save", save)  # space freed
    assert main([str(a) for a in [*argv, "--resume_from_checkpoint", "true"]]) == 0
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6


FULL_DISK_SCRIPT = r"""
set -u
mnt=$1; logs=$2; shift 2
mount -t tmpfs -o size=64m tmpfs "$mnt" || exit 90
"$PYTHON" -m east_hf.scripts.east_train "$@" --output_dir "$mnt/probe" --max_steps 2 >/dev/null 2>&1 || exit 91
size=$(( $(du -sk "$mnt/probe/checkpoint-2" | cut -f1) * 3 / 2 ))  # room for checkpoint-2, not for checkpoint-4
umount "$mnt" && mount -t tmpfs -o size=${size}k tmpfs "$mnt" || exit 92
"$PYTHON" -m east_hf.scripts.east_train "$@" --output_dir "$mnt/run" >"$logs/full.out" 2>"$logs/full.err"
echo $? >"$logs/full.rc"
mount -o remount,size=64m "$mnt" || exit 93
"$PYTHON" -m east_hf.scripts.east_train "$@" --output_dir "$mnt/run" --resume_from_checkpoint true \
    >"$logs/resumed.out" 2>"$logs/resumed.err"
echo $? >"$logs/resumed.rc"
cp "$mnt/run/trainer_state.json" "$logs/"
"""


def test_a_real_full_disk_during_a_checkpoint_save_then_resume_after_freeing_space(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "tmpfs", str(mnt)], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no user namespace to mount a small tmpfs in")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHON=sys.executable)
    args = [str(TABULAR), *CHECKPOINT_EVERY_2]
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", FULL_DISK_SCRIPT, "sh", str(mnt), str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    err = (tmp_path / "full.err").read_text().strip().splitlines()
    assert (tmp_path / "full.rc").read_text().strip() == "2" and "Traceback" not in "\n".join(err)
    assert err[-1] == (
        f"east-train: error: Expected free disk space in {mnt / 'run'}, got No space left on device (ENOSPC): free "
        f"space, then resume from {mnt / 'run' / 'checkpoint-2'} with --resume_from_checkpoint true (a checkpoint "
        "cut short is skipped)"
    )
    assert (tmp_path / "resumed.rc").read_text().strip() == "0", (tmp_path / "resumed.err").read_text()[-2000:]
    assert json.loads((tmp_path / "trainer_state.json").read_text())["global_step"] == 6


# ---- the model card: a full disk, a README the user edited ----
def test_a_card_east_train_cannot_write_is_one_warning_line_and_leaves_no_partial_file(tmp_path, monkeypatch, caplog):
    out = tmp_path / "run"

    def full_disk(self, path, *args, **kwargs):  # the plot's file is created, then the disk is full
        Path(path).write_bytes(b"\x89PNG")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", full_disk)
    with caplog.at_level(logging.WARNING):
        assert main([str(DEMO), *two_step_flags(out, model_card="true", report_to="none")]) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "east_hf.scripts.east_train"] == [
        f"model card not written: OSError: [Errno {errno.ENOSPC}] No space left on device: '{out / 'annealing.png'}'"
    ]
    assert (out / "model.safetensors").is_file() and (out / "test_results.json").is_file()
    assert not (out / "annealing.png").exists() and not (out / "README.md").exists()
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


def test_overwrite_keeps_a_readme_the_user_edited_and_writes_the_card_beside_it(capsys, caplog, tmp_path):
    """--overwrite_output_dir replaces the run, never the README.md the user edited beside it: the new card goes to
    README.east_hf.md with one warning line, and the folder stays a run east-train resumes or replaces."""
    from east_hf.hf.training.checkpoints import foreign_files

    out = tmp_path / "run"
    recipe = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"
    argv = [str(recipe), *two_step_flags(out, hidden_sizes=16, max_train_samples=None, model_card="true")]
    assert main(argv) == 0
    readme, beside = out / "README.md", out / "README.east_hf.md"
    edited = readme.read_text().replace("\n## ", "\nOur notes: the model behind the March report.\n\n## ", 1)
    readme.write_text(edited)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        assert main([*argv, "--overwrite_output_dir", "true"]) == 0
    assert readme.read_text() == edited and beside.is_file()
    assert f"card:     {beside}" in capsys.readouterr().out
    assert [r.getMessage() for r in caplog.records if r.name == "east_hf.hf.cards.model_card"] == [
        f"{readme} was written or edited by hand (it is not the card east_hf wrote): it stays as it is, and the "
        f"model card is written to {beside}"
    ]
    assert foreign_files(out) == []  # the card beside the README is a run's file: the folder is still a run
    assert main([*argv, "--overwrite_output_dir", "true"]) == 0
    assert readme.read_text() == edited
