"""Ctrl-C at any moment ends each console script in one line, exit status 130: while torch and transformers are
still being imported included (the scripts' modules import neither at the top, so the guard in main sees it). During
training east-train's line names the last complete checkpoint and the command that resumes from it."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import first_checkpoint, long_run_argv, start_east_train, tiny_run_flags

from east_hf import EASTTrainer
from east_hf.hf.training.checkpoints import LOCK_NAME, is_complete_checkpoint
from east_hf.scripts.east_train import main as east_train

ROOT = Path(__file__).resolve().parents[1]
TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"

# sitecustomize for the child: the first import of EAST_SLOW_IMPORT takes a minute, long enough for the Ctrl-C the
# test sends once the child says (EAST_SLOW_READY) that the import has begun
SLOW_IMPORT = """
import os, signal, sys, time
from pathlib import Path

signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C at a terminal: a background child ignores SIGINT


class _SlowImport:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["EAST_SLOW_IMPORT"]:
            sys.meta_path.remove(self)
            Path(os.environ["EAST_SLOW_READY"]).write_text(name)
            time.sleep(60)


sys.meta_path.insert(0, _SlowImport())
"""


def _command(name: str) -> list[str]:
    """The console script as installed, else ``python -m`` of its module (the same order: package, module, main)."""
    script = Path(sys.executable).with_name(name)
    module = "east_hf.scripts." + name.replace("-", "_")
    return [str(script)] if script.exists() else [sys.executable, "-m", module]


def _interrupt_while_importing(tmp_path: Path, name: str, args: list[str], slow: str) -> subprocess.CompletedProcess:
    """Run the console script ``name`` with ``args``; send SIGINT while it imports ``slow``; return how it ended."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_IMPORT)
    ready = tmp_path / "importing"
    python_path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": python_path, "EAST_SLOW_IMPORT": slow, "EAST_SLOW_READY": str(ready)}
    run = subprocess.Popen(
        [*_command(name), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert run.poll() is None, run.communicate()[1][-2000:]
            assert time.monotonic() < deadline, f"{name} did not import {slow} within 120 s"
            time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
        run.wait()
    return subprocess.CompletedProcess(run.args, run.returncode, out, err)


@pytest.mark.parametrize(
    "name, args, slow, line",
    [
        (
            "east-train",
            [str(TABULAR), "--output_dir", "run"],
            "torch",
            "east-train: interrupted before training started; nothing was written",
        ),
        (
            "east-train",
            [str(TABULAR), "--output_dir", "run"],
            "transformers",
            "east-train: interrupted before training started; nothing was written",
        ),
        (
            "east-compare",
            [str(TABULAR), "--output_dir", "cmp"],
            "torch",
            "east-compare: interrupted; run the same command again to go on (finished runs are kept, an interrupted "
            "one resumes from its last complete checkpoint)",
        ),
        (
            "east-predict",
            ["run", "rows.csv", "-o", "out.csv"],
            "torch",
            "east-predict: interrupted; out.csv not written",
        ),
    ],
    ids=["east-train-torch", "east-train-transformers", "east-compare-torch", "east-predict-torch"],
)
def test_ctrl_c_while_the_libraries_load_is_one_line_and_exit_130(tmp_path, name, args, slow, line):
    ended = _interrupt_while_importing(tmp_path, name, args, slow)
    assert "Traceback" not in ended.stderr and "KeyboardInterrupt" not in ended.stderr, ended.stderr[-3000:]
    assert ended.stderr.strip() == line and ended.returncode == 130, (ended.returncode, ended.stderr[-3000:])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["importing", "site"]  # nothing written


def test_the_console_scripts_modules_import_neither_torch_nor_transformers(tmp_path):
    """The console script imports its module before main runs: anything heavy there would load outside main's
    Ctrl-C guard."""
    code = (
        "import sys\n"
        "import east_hf.scripts.east_compare, east_hf.scripts.east_predict, east_hf.scripts.east_train\n"
        "print(sorted(m for m in ('torch', 'transformers', 'datasets', 'timm', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_the_scripts_export_what_they_name_and_compare_re_exports_its_helpers():
    import east_hf.scripts.east_compare as compare
    import east_hf.scripts.east_train as train
    from east_hf.scripts import compare_plan, compare_report

    assert train.__all__ == ["main"]  # the run record's functions live in east_hf.scripts.run_record
    assert compare.paired_differences is compare_report.paired_differences
    assert compare.DEFAULT_LOSSES is compare_plan.DEFAULT_LOSSES
    for module in (train, compare):
        assert all(hasattr(module, name) for name in module.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'ScriptArguments'"):
        train.ScriptArguments  # noqa: B018


def test_exit_at_once_replaces_pythons_own_handler_for_its_block_only():
    from east_hf.scripts.interruptions import exit_at_once_on_ctrl_c

    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(RuntimeError, match="inside"):
            with exit_at_once_on_ctrl_c("east-x: interrupted"):
                assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
                raise RuntimeError("inside")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # back, however the block ended
        with exit_at_once_on_ctrl_c("east-x: interrupted", command=False):  # main(argv) called by a program
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job ignores Ctrl-C: the block leaves it so
        with exit_at_once_on_ctrl_c("east-x: interrupted"):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize(
    "module, target, line",
    [
        (
            "east_train",
            "east_hf.scripts.arguments.EASTArgumentParser.parse",
            "east-train: interrupted before training started; nothing was written",
        ),
        (
            "east_compare",
            "east_hf.scripts.east_compare._compare",
            "east-compare: interrupted; run the same command again to go on (finished runs are kept, an interrupted "
            "one resumes from its last complete checkpoint)",
        ),
        (
            "east_predict",
            "east_hf.scripts.east_predict._predictions",
            "east-predict: interrupted; out.csv not written",
        ),
    ],
)
def test_a_keyboard_interrupt_raised_before_the_work_is_the_same_one_line(capsys, monkeypatch, module, target, line):
    """Where a Ctrl-C arrives as a KeyboardInterrupt (SIGINT not Python's own handler, or raised in a library), main's
    guard ends in the same line and exit status 130."""
    import importlib

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(target, interrupted)
    main = importlib.import_module(f"east_hf.scripts.{module}").main
    try:
        with pytest.raises(SystemExit) as exc:
            main([str(TABULAR), "out.csv", "-o", "out.csv"] if module == "east_predict" else [str(TABULAR)])
    except KeyboardInterrupt:  # escaping, it would end the test session
        pytest.fail(f"KeyboardInterrupt escaped {module}")
    assert exc.value.code == 130 and capsys.readouterr().err.strip() == line


# ---- Ctrl-C during training: the resume command, or start again before the first checkpoint ----
def test_ctrl_c_ends_in_one_line_with_the_resume_command_and_exit_130(tmp_path):
    out, log = tmp_path / "run", tmp_path / "run.log"
    run = start_east_train(long_run_argv(out), log)
    try:
        first_checkpoint(out, run, log)
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=300) == 130, log.read_text()[-2000:]
    finally:
        run.kill()
        run.wait()
    err = log.read_text()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    line = err.strip().splitlines()[-1]
    assert [x for x in err.splitlines() if "interrupted" in x] == [line]
    checkpoint, command = line.removeprefix("east-train: interrupted; resume from ").split(" with: ")
    assert is_complete_checkpoint(checkpoint) and Path(checkpoint).parent == out
    argv = shlex.split(command)
    assert argv[0] == "east-train" and argv[-2:] == ["--resume_from_checkpoint", "true"], line
    assert not (out / LOCK_NAME).exists()
    step = int(Path(checkpoint).name.split("-")[1])
    assert east_train([*argv[1:], "--max_steps", str(step + 2)]) == 0  # the printed command resumes
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == step + 2


def test_ctrl_c_before_any_checkpoint_says_to_start_again(capsys, tmp_path, monkeypatch):
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(EASTTrainer, "train", interrupted)
    out = tmp_path / "run"
    try:
        with pytest.raises(SystemExit) as exc:
            east_train([str(TABULAR), *tiny_run_flags(out)])
    except KeyboardInterrupt:  # escaping, it would end the test session
        pytest.fail("KeyboardInterrupt escaped east-train")
    assert exc.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "east-train: interrupted before a checkpoint was saved; start again with the same command"
    )
    assert not out.exists()  # the lock released, the folder it made removed
