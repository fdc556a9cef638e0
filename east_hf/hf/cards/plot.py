"""The annealing trajectory of a run, as the model card shows it: one row per evaluation (step, stage, temperature,
validation loss and target metric) and a PNG of the three curves, written atomically."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["annealing_trajectory", "plot_annealing", "write_atomically"]


def annealing_trajectory(log_history: list[dict[str, Any]], target_key: str) -> list[dict[str, Any]]:
    """One row per evaluation: step, stage, temperature, validation surrogate loss and validation target metric.

    Evaluations of a cross-entropy warm start (stage -1) have the stage ``"CE warm start"``, no temperature, and the
    cross-entropy validation loss in the loss column.
    """
    rows, seen = [], set()
    for entry in log_history:
        if "eval_loss" not in entry or entry.get("step") in seen:
            continue  # a step evaluated twice (the final evaluation of the best model): the first is the trajectory's
        seen.add(entry.get("step"))
        stage = entry.get("eval_east_stage", entry.get("east_stage", ""))
        rows.append(
            {
                "step": entry.get("step"),
                "stage": "CE warm start" if stage == -1 else stage,
                "temperature": None
                if stage == -1
                else entry.get("eval_east_temperature", entry.get("east_temperature")),
                "loss": entry.get("eval_loss"),
                "metric": entry.get(f"eval_{target_key}"),
            }
        )
    return rows


def plot_annealing(rows: list[dict[str, Any]], path: str | Path, target_key: str) -> Path | None:
    """Validation metric (top), validation loss (middle) and temperature (bottom) against step, stage boundaries
    marked and a cross-entropy warm start shaded, saved as PNG; the legend sits above the curves. The loss and the
    metric have panels of their own: a 10-class cross-entropy (~2.3 to 3.2) beside a metric in [0, 1] on one axis
    would flatten the metric."""
    rows = [r for r in rows if r["step"] is not None]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    fig, (ax_m, ax_l, ax_t) = plt.subplots(
        3, 1, figsize=(7, 5.5), dpi=100, sharex=True, gridspec_kw={"height_ratios": [2, 1, 1]}
    )
    panels = (ax_m, ax_l, ax_t)
    metric = [r["metric"] if r["metric"] is not None else float("nan") for r in rows]
    loss = [r["loss"] if r["loss"] is not None else float("nan") for r in rows]
    ax_m.plot(steps, metric, marker="o", ms=3, color="tab:blue", label=f"validation {target_key}")
    ax_l.plot(steps, loss, marker="o", ms=3, ls="--", color="tab:gray", label="validation loss")
    warm = [r["step"] for r in rows if r["stage"] == "CE warm start"]
    if warm:
        for ax in panels:
            ax.axvspan(0, max(warm), color="tab:orange", alpha=0.12, lw=0)
        ax_m.plot([], [], color="tab:orange", alpha=0.3, lw=6, label="cross-entropy warm start")
    annealed = [r for r in rows if r["temperature"] is not None]
    if annealed:
        ax_t.step([r["step"] for r in annealed], [r["temperature"] for r in annealed], where="post", color="tab:red")
    for prev, row in zip(rows, rows[1:]):
        if row["stage"] != prev["stage"]:
            for ax in panels:
                ax.axvline(row["step"], color="k", alpha=0.25, lw=1)
    ax_m.set_ylabel(f"validation {target_key}")
    ax_l.set_ylabel("validation loss")
    ax_t.set_ylabel("temperature T")
    ax_t.set_xlabel("step (vertical lines: a new stage)")
    ax_m.legend(loc="lower left", bbox_to_anchor=(0, 1.02), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    try:
        return write_atomically(Path(path), lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)


def write_atomically(path: Path, write: Callable[[Path], Any]) -> Path:
    """``write(temporary)`` into a temporary file beside ``path``, then ``os.replace`` it onto ``path``: a failure
    (a full disk) leaves the earlier file or none, never a 0-byte or partial one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # same folder: replace is atomic
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno:  # name the file the user knows, not the temporary one
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise
    return path
