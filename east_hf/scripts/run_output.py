"""What an ``east-train`` run prints: each line once per run, never glued to a progress bar, and the Trainer's metric
dictionaries only where asked.

Under torchrun / accelerate every process runs the script: ``quiet_replicas`` leaves east_hf's warnings and torch's
DDP advice to the main process. ``lines_above_bars`` writes east_hf's log lines through ``tqdm.write`` while the
Trainer's bars are drawn, so a line starts a line of its own. ``without_metric_logs`` keeps the bars and drops the
dictionary the Trainer prints at every log and evaluation (``print_metrics false``; east-compare's runs), since
``trainer_state.json`` keeps them all.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = ["lines_above_bars", "quiet_replicas", "without_metric_logs"]

# torch's DistributedDataParallel advice, raised in every process at the first backward pass
_UNUSED_PARAMETERS = r"find_unused_parameters=True was specified in DDP constructor"


def quiet_replicas(process_index: int) -> None:
    """On a process other than the main one, keep east_hf's warnings and torch's DDP advice to the main process:
    errors still print everywhere."""
    if process_index == 0:
        return
    logging.getLogger("east_hf").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=_UNUSED_PARAMETERS)


@contextlib.contextmanager
def lines_above_bars() -> Iterator[None]:
    """While the block runs, east_hf's log lines go through ``tqdm.write`` (above the bars, each on a line of its own)
    where nothing else prints them (no handler on east_hf's loggers or the root logger: Python's last-resort printer
    would write them where the bar's cursor is)."""
    east_hf = logging.getLogger("east_hf")
    if east_hf.handlers or logging.getLogger().handlers:
        yield
        return
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(loggers=[east_hf]):
        yield


def without_metric_logs(trainer: Any) -> None:
    """Replace the Trainer's progress output by the same bars without the metric dictionary printed at each log."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class BarsOnly(ProgressCallback):
        """transformers' progress bars, without the dictionary ``on_log`` writes under them."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            return None

    for callback in list(trainer.callback_handler.callbacks):
        if type(callback) is ProgressCallback:
            trainer.remove_callback(callback)
            trainer.add_callback(BarsOnly())
        elif type(callback) is PrinterCallback:
            trainer.remove_callback(callback)
