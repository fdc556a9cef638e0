"""Claiming ``east-train``'s ``output_dir`` before a run: refused, replaced or resumed, by what the folder holds.

A folder holding another run is refused unless the run resumes it (``--resume_from_checkpoint``) or replaces it
(``--overwrite_output_dir true``, which deletes the earlier run's checkpoints and results first). A folder holding
files east_hf did not write, or an east-compare table, is refused whatever the flags.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

__all__ = ["DECISION_RULE_NAME", "claim_output_dir", "resuming"]

logger = logging.getLogger(__name__)

DECISION_RULE_NAME = "decision_rule.json"
"""The tuned decision rule's offsets and scores, written beside the model (``east-train --tune_decision_rule``)."""


def resuming(resume: str | None) -> bool:
    """Whether ``--resume_from_checkpoint`` asks to resume (a path, or ``true``; not ``false`` / ``none`` / empty)."""
    return resume is not None and str(resume).strip().lower() not in ("false", "none", "")


def claim_output_dir(output_dir: str, resume: str | None, overwrite: bool) -> None:
    """Refuse to train into a folder holding another run unless resuming it or told to overwrite it: a new run would
    replace its model and results and rotate away its checkpoints, best model included. With ``overwrite`` the
    earlier run's checkpoints and results are deleted; its ``README.md`` is not: the new run's card replaces it only
    where it is the card east_hf wrote, unchanged, and goes beside one the user edited
    (``east_hf.hf.cards.model_card``). The main process calls it, holding the folder's lock.

    A folder holding files east_hf did not write (a project, a user's README.md or config.json, a downloaded model)
    or east-compare's table is refused whatever the flags: east-train never replaces or deletes what it did not
    write, so the only way out is another output_dir."""
    from east_hf.hf.training.checkpoints import comparison_files, foreign_files, run_files

    table = comparison_files(output_dir)
    if table:
        raise ValueError(
            f"Expected an output_dir for one run, got {output_dir}, which holds an east-compare comparison "
            f"({', '.join(table)}); choose another output_dir (--overwrite_output_dir never replaces a comparison)"
        )
    foreign = foreign_files(output_dir)
    if foreign:
        raise ValueError(
            f"Expected output_dir {output_dir} to be empty or to hold an east_hf run, got files east_hf did not write "
            f"({', '.join(foreign[:4])}{', ...' if len(foreign) > 4 else ''}); choose another output_dir "
            "(--overwrite_output_dir never replaces or deletes them)"
        )
    found = run_files(output_dir)
    if not found or resuming(resume):
        return
    if not overwrite:
        raise ValueError(
            f"output_dir {output_dir} already holds a run "
            f"({', '.join(found[:4])}{', ...' if len(found) > 4 else ''}); "
            "pass --resume_from_checkpoint true to resume it, --overwrite_output_dir true to replace it, or choose "
            "another output_dir"
        )
    folder = Path(output_dir)
    logger.warning(f"overwrite_output_dir: deleting the earlier run in {output_dir} ({', '.join(found)})")
    for name in found:
        path = folder / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    for name in ("eval_results.json", DECISION_RULE_NAME):  # results a new run might not write again
        if (folder / name).is_file():
            (folder / name).unlink()
