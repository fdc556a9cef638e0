"""How a process of a torchrun / accelerate launch ends once its run is done.

A process of a gloo launch aborts now and then in the interpreter's final teardown (``terminate called without an
active exception``, after its last line of Python ran and its exit handlers returned; more often on a loaded
machine), which fails a launch whose run succeeded. ``end_launched_process`` waits for the other processes, ends the
process group and marks the process's exit status; the interpreter then shuts down as usual, running every exit
handler (``atexit``: a Trainer integration's, a user's), and the last handler to run, ``_exit_past_teardown``, ends
the process with that status before the native teardown that aborts.

The handler is registered when this module is imported, before torch or transformers load (the console scripts
import it first), and handlers run in the reverse order of registration: it runs after every handler registered by
the run.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys

__all__ = ["end_launched_process"]

_exit_status: int | None = None  # set once a launched process's run is done; None: the interpreter ends as usual


def end_launched_process(status: int) -> int:
    """Wait for the launch's other processes, end the process group, and have the interpreter's exit end with
    ``status`` once its exit handlers ran; returns ``status`` for the caller to return as usual."""
    global _exit_status
    from east_hf.hf.devices import end_process_group

    end_process_group(wait=True)
    _exit_status = status
    return status


def _exit_past_teardown() -> None:
    if _exit_status is None:
        return
    logging.shutdown()  # registered before this handler, so it would run after it
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(_exit_status)


atexit.register(_exit_past_teardown)
