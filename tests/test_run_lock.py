"""One east-train per output folder: a second writer is refused naming the process that holds the lock, a dead
writer's lock is taken over, a lock from another host or an unreadable one is refused naming the file to delete, the
lock is released after an error, and under torchrun only the main process locks while every process stops on a
refusal."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import east_train_error, first_checkpoint, long_run_argv, start_east_train, tiny_run_flags

from east_hf.hf.training.checkpoints import LOCK_NAME, complete_checkpoints
from east_hf.scripts.east_train import main as east_train

ROOT = Path(__file__).resolve().parents[1]
TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"


def test_lock_refuses_a_second_writer_naming_its_pid_and_takes_over_a_dead_writers_lock(capsys, caplog, tmp_path):
    out = tmp_path / "run"
    first = start_east_train(long_run_argv(out), tmp_path / "first.log")
    try:
        first_checkpoint(out, first, tmp_path / "first.log")
        for argv in (
            [TABULAR, *tiny_run_flags(out)],  # a new run
            [*long_run_argv(out), "--resume_from_checkpoint", "true"],  # a resume of the running one
            [*long_run_argv(out), "--overwrite_output_dir", "true"],  # a replacement of it
        ):
            err = east_train_error(capsys, argv)
            assert f"got {out}, in use by process {first.pid} ({out / LOCK_NAME})" in err, err
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == first.pid  # the refusals leave its lock alone
        assert first.poll() is None
    finally:
        first.kill()  # kill -9, an out-of-memory kill: no chance to remove its lock
        first.wait()
    assert json.loads((out / LOCK_NAME).read_text())["pid"] == first.pid
    step = int(complete_checkpoints(out)[-1].name.split("-")[1])
    assert east_train([*long_run_argv(out), "--resume_from_checkpoint", "true", "--max_steps", str(step + 2)]) == 0
    warnings = [r.getMessage() for r in caplog.records if "stale lock" in r.getMessage()]
    assert warnings == [f"taking over the stale lock on {out} of process {first.pid}, no longer running"]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == step + 2
    assert not (out / LOCK_NAME).exists()  # released at a normal exit


def test_lock_is_released_after_an_error_and_an_unused_folder_is_not_left_behind(capsys, tmp_path):
    out = tmp_path / "new" / "run"
    err = east_train_error(
        capsys, [TABULAR, *tiny_run_flags(out), "--label_column", "nope"]
    )  # found after the lock is taken
    assert "nope" in err
    assert not out.exists()
    out.mkdir(parents=True)
    assert east_train([str(TABULAR), *tiny_run_flags(out)]) == 0
    assert not (out / LOCK_NAME).exists() and (out / "test_results.json").is_file()


def test_a_lock_from_another_host_or_unreadable_is_refused_with_the_file_to_delete(capsys, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": 4242, "host": "another-machine", "token": "x"}))
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(out)])
    assert err.endswith(
        f"got {out}, locked by process 4242 on host another-machine; "
        f"if that process has ended, delete {out / LOCK_NAME}"
    )
    (out / LOCK_NAME).write_text("")  # a holder cut off between creating and writing it
    err = east_train_error(capsys, [TABULAR, *tiny_run_flags(out)])
    assert f"Expected {out / LOCK_NAME} to name the process that locks {out}, got an unreadable file" in err
    assert (out / LOCK_NAME).read_text() == ""  # left for the user to judge


HOLD_LOCK = """
import sys, time
from east_hf.scripts.lock import OutputDirLock
OutputDirLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_under_torchrun_only_the_main_process_locks_and_every_process_stops_on_a_refusal(tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    out = tmp_path / "run"
    launch = [torchrun, "--standalone", "--nproc_per_node", "2", "-m", "east_hf.scripts.east_train"]
    launch += [str(TABULAR), *tiny_run_flags(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        refused = subprocess.run(launch, capture_output=True, text=True, timeout=300, env=env)
        assert refused.returncode != 0
        ours = [line for line in refused.stderr.splitlines() if line.startswith("east-train")]
        assert ours == [
            f"east-train: error: Expected an output_dir no other east-train writes to, got {out}, in use by "
            f"process {holder.pid} ({out / LOCK_NAME}): wait for it to end or choose another output_dir"
        ]
        assert "[rank1]" not in refused.stderr  # the other process stopped too, without a traceback
    finally:
        holder.kill()
        holder.wait()
    done = subprocess.run(launch, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]  # the second process never asks for the main one's lock
    assert done.stderr.count(f"taking over the stale lock on {out} of process {holder.pid}") == 1
    assert not (out / LOCK_NAME).exists() and (out / "test_results.json").is_file()
