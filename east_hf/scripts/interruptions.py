"""The one line ``east-train`` ends with when a run stops early, and how the run goes on from there.

Ctrl-C: the last complete checkpoint and the command that resumes it (``interrupted_line``). A full disk or a spent
quota while saving: the folder, and whether to resume or to start again once space is freed (``disk_full_line``).
Ctrl-C while a command still loads its libraries, before it writes anything: its line at once
(``exit_at_once_on_ctrl_c``, which all three console scripts use).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

__all__ = [
    "COMPARE_INTERRUPTED",
    "disk_full_line",
    "exit_at_once_on_ctrl_c",
    "interrupted_line",
    "interrupted_says",
    "interrupts_say",
    "resume_command",
]

_DISK_FULL = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT"}

COMPARE_INTERRUPTED = (
    "east-compare: interrupted; run the same command again to go on (finished runs are kept, an interrupted one "
    "resumes from its last complete checkpoint)"
)
"""What east-compare ends with on Ctrl-C, whenever it comes: also inside one of its runs, in place of the east-train
command that would resume that run alone."""

_SAYS: contextvars.ContextVar[str | None] = contextvars.ContextVar("east_hf_interrupted_line", default=None)


@contextlib.contextmanager
def interrupts_say(line: str) -> Iterator[None]:
    """While the block runs, an east-train run started in it ends a Ctrl-C with ``line`` (``interrupted_says``): the
    command that started the run (east-compare) says how to go on."""
    token = _SAYS.set(line)
    try:
        yield
    finally:
        _SAYS.reset(token)


def interrupted_says() -> str | None:
    """The line of the innermost ``interrupts_say`` block, or None outside one."""
    return _SAYS.get()


def resume_command(prog: str, argv: Sequence[str], restart: bool) -> str:
    """The command line that continues an interrupted run: ``argv`` with ``--resume_from_checkpoint true``, or with
    ``--overwrite_output_dir true`` where it has to ``restart`` (no complete checkpoint, but files of the run)."""
    bools = {"true", "false", "yes", "no", "t", "f", "y", "n", "1", "0"}  # what a boolean flag may take as its value
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0].lstrip("-").replace("-", "_") if arg.startswith("--") else None
        if name not in ("resume_from_checkpoint", "overwrite_output_dir"):
            out.append(arg)
        elif "=" not in arg and i + 1 < len(argv):  # drop its value too: any path, or a boolean
            skip = name == "resume_from_checkpoint" or argv[i + 1].lower() in bools
    flag = "--overwrite_output_dir" if restart else "--resume_from_checkpoint"
    return shlex.join([prog, *out, flag, "true"])


def interrupted_line(prog: str, argv: Sequence[str], output_dir: str) -> str:
    """What east-train prints on Ctrl-C: that training was interrupted, and the command that continues it."""
    from east_hf.hf.training.checkpoints import complete_checkpoints, run_files

    saved = complete_checkpoints(output_dir)
    if saved:
        return f"{prog}: interrupted; resume from {saved[-1]} with: {resume_command(prog, argv, restart=False)}"
    if run_files(output_dir):
        return f"{prog}: interrupted before a checkpoint was saved; start again with: " + resume_command(
            prog, argv, restart=True
        )
    return f"{prog}: interrupted before a checkpoint was saved; start again with the same command"


def _disk_full(error: BaseException, output_dir: str) -> int | None:
    """ENOSPC or EDQUOT where ``error`` or its cause says the disk is full or the quota spent, else ``None``. An
    ``OSError`` carries the errno, safetensors says "No space left on device (os error 28)", and ``torch.save`` names
    no cause ("PytorchStreamWriter failed", "inline_container"): then the free space left in ``output_dir`` tells."""
    chain = [error]
    while (nxt := chain[-1].__cause__ or chain[-1].__context__) is not None and nxt not in chain:
        chain.append(nxt)
    for e in chain:
        if isinstance(e, OSError) and e.errno in _DISK_FULL:
            return e.errno
        text = str(e)
        for code in _DISK_FULL:
            if os.strerror(code) in text or f"os error {code})" in text:
                return code
        if isinstance(e, RuntimeError) and ("PytorchStreamWriter" in text or "inline_container" in text):
            try:
                return errno.ENOSPC if shutil.disk_usage(output_dir).free < 1 << 20 else None
            except OSError:
                return None
    return None


def disk_full_line(error: BaseException, output_dir: str) -> str | None:
    """The one line east-train ends with when a save finds the disk full (ENOSPC) or the quota spent (EDQUOT): the
    folder, and how the run goes on once space is freed; ``None`` for any other error."""
    from east_hf.hf.training.checkpoints import last_complete_checkpoint

    code = _disk_full(error, output_dir)
    if code is None:
        return None
    last = last_complete_checkpoint(output_dir)
    then = (
        f"resume from {last} with --resume_from_checkpoint true (a checkpoint cut short is skipped)"
        if last is not None
        else "start again with --overwrite_output_dir true (no checkpoint was complete)"
    )
    got = f"{os.strerror(code)} ({_DISK_FULL[code]})"
    return f"Expected free disk space in {output_dir}, got {got}: free space, then {then}"


@contextlib.contextmanager
def exit_at_once_on_ctrl_c(line: str | None, *, command: bool = True) -> Iterator[None]:
    """While the block runs, Ctrl-C writes ``line`` (``None``: nothing) to stderr and ends the process at once, exit
    status 130; the handler before the block is back after it.

    For the seconds a console script spends importing torch, transformers and datasets and reading its arguments,
    before it writes anything, so there is nothing to clean up: a ``KeyboardInterrupt`` raised there may surface inside
    a C extension's import, as an ``ImportError`` (numpy's "PyCapsule_Import could not import module") or as a C++
    ``terminate`` that aborts the process, instead of reaching the script's one-line handler. The block runs unchanged,
    a ``KeyboardInterrupt`` the caller's to handle, where the process is not the command's own (``command`` false: a
    program or notebook calling ``main(argv)``, which must never end at once), where SIGINT is not Python's own
    handler (ignored in a background job, replaced by the caller) and off the main thread."""
    if (
        not command
        or threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def at_once(signum, frame) -> None:
        if line is not None:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        os._exit(130)  # no unwinding through half-imported extensions; the block has written nothing

    signal.signal(signal.SIGINT, at_once)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
