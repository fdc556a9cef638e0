"""The runs of an ``east-compare``: one ``east-train`` run per (variant, seed), trained, resumed, retrained or
skipped by what its folder holds, and its test metrics read back.

Each run's record (``east_hf.scripts.run_record``) is kept in its folder as ``run_settings.json``, with what the
comparison asked of it (the recipe as named, the variant's flags, the arguments after ``--``, ``--vary_split``); a run
whose record changed since is trained again from scratch, never reused. A run whose ``run_settings.json`` or results
do not read back (a file truncated by a full disk or a kill) is not done: it is trained again, saying why. Every run
is trained with its decision rule tuned on validation (``--tune_decision_rule true``): the tuning comes after the
as-trained test evaluation and leaves the training untouched, so comparisons with and without ``+tuned`` rows share
the trained runs. Before anything is trained, a comparison that would train again and replace runs made with other
flags (another variant definition under the same name, other arguments after ``--``, another recipe or
``--vary_split``) is refused, naming the folder. Each run starts with a line on stderr, ``[k/n] VARIANT seed S:
training (elapsed m:ss, ETA ~m:ss)``, the ETA from the mean time of the runs trained so far.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from east_hf.hf.secret_masking import mask_secrets
from east_hf.scripts.compare_report import TRAIN_SECONDS
from east_hf.scripts.run_record import (
    REQUEST_KEY,
    SETTINGS_NAME,
    as_json,
    default_settings,
    record_changes,
    run_record,
    unrecorded,
    write_atomically,
)

__all__ = [
    "OtherFlagsError",
    "REQUEST_KEY",
    "SETTINGS_NAME",
    "read_run",
    "run_argv",
    "run_comparison",
    "run_mode",
    "run_one",
    "run_settings",
    "unreadable_results",
]

TUNE_FLAGS = ["--tune_decision_rule", "true"]
"""Every run tunes its decision rule: post-hoc, so the ``+tuned`` rows never need a run of their own."""
POST_HOC = {"script": ("tune_decision_rule",)}
"""Settings applied after training and the as-trained test evaluation: a run recorded with another value holds the
same model and as-trained scores, so they are not compared (a run that lacks the tuned scores a comparison tables is
trained again, saying so)."""


class OtherFlagsError(ValueError):
    """A comparison would train again and replace runs its folder holds, trained there with other flags."""


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _read_object(file: Path) -> dict[str, Any]:
    """The JSON object in ``file``; a ``ValueError`` naming the file when it does not read back as one."""
    try:
        value = json.loads(file.read_text())
    except (OSError, ValueError) as e:  # ValueError: JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{file} does not read back ({_one_line(e)}): truncated or corrupt") from None
    if not isinstance(value, dict):
        raise ValueError(f"{file} holds a JSON {type(value).__name__}, not an object: truncated or corrupt")
    return value


def run_argv(
    recipe: str, run_dir: Path, seed: int, flags: list[str], extra: list[str], vary_split: bool = False
) -> list[str]:
    """The ``east-train`` command line of one run (without ``east-train``); ``vary_split`` also draws its split."""
    argv = [recipe, "--seed", str(seed), "--output_dir", str(run_dir), "--report_to", "none", *flags, *extra]
    return argv + (["--split_seed", str(seed)] if vary_split else [])


def run_settings(argv: list[str]) -> dict[str, Any]:
    """The record of an ``east-train`` command line (``run_record``: every setting that affects training, the east_hf
    version, the data's fingerprint), in its JSON form."""
    from east_hf.scripts.arguments import EASTArgumentParser

    return as_json(run_record(EASTArgumentParser().parse(argv)))


def run_one(
    recipe: str,
    run_dir: Path,
    seed: int,
    flags: list[str],
    extra: list[str],
    vary_split: bool = False,
    mode: str = "fresh",
) -> dict[str, Any]:
    """One ``east-train`` run, in this process; ``mode``: ``"fresh"``, ``"resume"`` (from the last complete
    checkpoint) or ``"overwrite"`` (the folder's earlier run is replaced)."""
    from east_hf.scripts.east_train import main as east_train
    from east_hf.scripts.interruptions import COMPARE_INTERRUPTED, interrupts_say

    argv = run_argv(recipe, run_dir, seed, flags, extra, vary_split)
    argv[1:1] = ["--print_metrics", "false"]  # east-compare's own lines and table report the runs
    if mode == "resume":
        argv += ["--resume_from_checkpoint", "true"]
    elif mode == "overwrite":
        argv += ["--overwrite_output_dir", "true"]
    start = time.time()
    with interrupts_say(COMPARE_INTERRUPTED):  # a Ctrl-C inside the run: the comparison's line
        code = east_train(argv)
    if code:
        raise RuntimeError(f"east-train exited with {code} for {' '.join(mask_secrets(argv))}")
    return {"wall_seconds": round(time.time() - start, 1)}


def run_mode(run_dir: Path, settings: dict[str, Any], force: bool) -> tuple[str, str]:
    """How to treat a run folder: ``"skip"`` (finished with this record), ``"resume"``, ``"overwrite"`` or
    ``"fresh"``, and why (empty when nothing needs saying; for an older record, what it leaves unchecked). A record
    or results that do not read back make the run not done: ``"overwrite"``, naming the file."""
    mode, why, _ = _run_mode(run_dir, settings, force)
    return mode, why


def _run_mode(run_dir: Path, settings: dict[str, Any], force: bool) -> tuple[str, str, dict[str, Any] | None]:
    """``run_mode``, and the record read from the folder where it was read (None where there was none to read)."""
    from east_hf.hf.training.checkpoints import last_complete_checkpoint, run_files

    if not run_files(run_dir):
        return "fresh", "", None
    if force:
        return "overwrite", "--force", None
    recorded_file = run_dir / SETTINGS_NAME
    if not recorded_file.is_file():
        return "overwrite", f"no {SETTINGS_NAME} records how the earlier run was trained", None
    try:
        recorded = _read_object(recorded_file)
    except ValueError as e:
        return "overwrite", f"{e}, so how the earlier run was trained is unknown", None
    changes = _record_changes(recorded, settings)
    if changes:
        return "overwrite", "; ".join(changes), recorded
    note = unrecorded(recorded)
    if (run_dir / "test_results.json").is_file():
        problem = unreadable_results(run_dir)
        if problem is not None:
            return "overwrite", f"{problem}, so the run is not done", recorded
        return "skip", note, recorded
    if last_complete_checkpoint(run_dir) is not None:
        return "resume", "; ".join(filter(None, ["resuming from the last complete checkpoint", note])), recorded
    return "overwrite", "no complete checkpoint to resume", recorded


def _record_changes(recorded: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """``record_changes`` between a kept record and this comparison's, leaving out the ``POST_HOC`` settings and the
    ``east_`` settings the run's loss does not train with (``fields_left_unused``: a baseline kept from a recipe
    whose annealing has changed since holds the same model)."""
    from east_hf.hf.config.checks import fields_left_unused

    skipped = dict(POST_HOC)
    loss = settings.get("training", {}).get("east_loss")
    if loss is not None and loss == recorded.get("training", {}).get("east_loss"):
        skipped["training"] = tuple(fields_left_unused(loss))
    aligned = dict(recorded)
    for group, keys in skipped.items():
        values = settings.get(group, {})
        aligned[group] = {**recorded.get(group, {}), **{k: values[k] for k in keys if k in values}}
    return record_changes(aligned, settings, as_json(default_settings()))


def unreadable_results(run_dir: Path) -> str | None:
    """Why a finished run's results do not read back (``test_results.json``, and ``trainer_state.json`` where it is
    there), naming the file; None when they do."""
    for name in ("test_results.json", "trainer_state.json"):
        file = run_dir / name
        if name == "test_results.json" or file.exists():
            try:
                _read_object(file)
            except ValueError as e:
                return str(e)
    return None


def read_run(run_dir: Path) -> dict[str, Any]:
    """A finished run's test metrics (``test_`` left off), its number of steps, its last EAST temperature and its
    training wall-clock in seconds (``train_seconds``: the Trainer's ``train_runtime``, evaluations included)."""
    metrics = _read_object(run_dir / "test_results.json")
    out = {k[len("test_") :]: v for k, v in metrics.items() if k.startswith("test_") and isinstance(v, (int, float))}
    state_file = run_dir / "trainer_state.json"
    if state_file.exists():
        state = _read_object(state_file)
        out["steps"] = state.get("global_step")
        temps = [  # each EAST evaluation's temperature (not the warm start's), under either key a saved log uses
            e.get("eval_east_temperature", e.get("east_temperature"))
            for e in state.get("log_history", [])
            if "eval_loss" in e and e.get("eval_east_stage", e.get("east_stage", 0)) >= 0
        ]
        out["final_temperature"] = temps[-1] if temps else None
    train_file = run_dir / "train_results.json"  # the Trainer's train_runtime: seconds of training, evaluations in
    if train_file.exists():
        runtime = _read_object(train_file).get("train_runtime")
        if isinstance(runtime, (int, float)):
            out[TRAIN_SECONDS] = float(runtime)
    return out


def _clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour).

    >>> _clock(75), _clock(3725)
    ('1:15', '1:02:05')
    """
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class _Run:
    """One (variant, seed) of a comparison: its folder, flags and record, and what its folder makes of it."""

    name: str
    seed: int
    run_dir: Path
    flags: list[str]
    settings: dict[str, Any]
    request: dict[str, Any]
    mode: str
    why: str
    recorded: dict[str, Any] | None


def _plan(
    recipe: str,
    variants: Mapping[str, list[str]],
    out_dir: Path,
    *,
    seeds: int,
    extra: list[str],
    vary_split: bool,
    force: bool,
    recipe_name: str,
) -> list[_Run]:
    """Every (variant, seed) run, seed-major, with how its folder is to be treated (``run_mode``)."""
    planned = []
    for seed in range(seeds):
        for name, flags in variants.items():
            run_dir = out_dir / name / f"seed-{seed}"
            run_flags = [*flags, *TUNE_FLAGS]
            settings = run_settings(run_argv(recipe, run_dir, seed, run_flags, extra, vary_split))
            asked = {"recipe": recipe_name, "flags": flags, "extra": extra, "vary_split": vary_split}
            request = as_json(mask_secrets(asked))
            mode, why, recorded = _run_mode(run_dir, settings, force)
            planned.append(_Run(name, seed, run_dir, run_flags, settings, request, mode, why, recorded))
    return planned


def _requested(recorded: dict[str, Any] | None) -> dict[str, Any]:
    """What a kept record says the comparison that trained it asked (``REQUEST_KEY``); ``{}`` for a record without it
    (one written before it was kept)."""
    requested = (recorded or {}).get(REQUEST_KEY)
    return requested if isinstance(requested, dict) else {}


def _check_replacements(planned: list[_Run], out_dir: Path) -> None:
    """Refuse, in one line naming ``out_dir``, a comparison that would train again and replace runs another
    comparison made there with other flags (the same variant name defined otherwise, other arguments after ``--``,
    another recipe or ``--vary_split``). A run retrained because the recipe file, a default, the data or the east_hf
    version changed under the same flags is not refused: that is the same comparison, brought up to date."""
    replaced = [
        run
        for run in planned
        if run.mode == "overwrite"
        and _requested(run.recorded).get("asked", run.request) != run.request
        and _record_changes(run.recorded, run.settings)
    ]
    if not replaced:
        return
    names = ", ".join(dict.fromkeys(run.name for run in replaced))
    command = _requested(replaced[0].recorded).get("command") or "another east-compare"
    first = _record_changes(replaced[0].recorded, replaced[0].settings)[0]
    raise OtherFlagsError(
        f"Expected {out_dir} to be compared again with the flags its runs were trained with ({command}), got other "
        f"flags for {names} ({first}): this comparison would train them again and replace their runs in {out_dir}; "
        "pass --output_dir for a folder of its own, or --force to replace them"
    )


def _train(
    recipe: str, run: _Run, mode: str, extra: list[str], vary_split: bool, command: str | None
) -> dict[str, Any]:
    """Train one planned run (``run_one``) after writing its settings and the east-compare command that asked for it
    into its folder; returns what ``run_one`` returns."""
    run.run_dir.mkdir(parents=True, exist_ok=True)
    kept = {**run.settings, REQUEST_KEY: {"asked": run.request, "command": command}}
    write_atomically(run.run_dir / SETTINGS_NAME, json.dumps(kept, indent=2, sort_keys=True) + "\n")
    return run_one(recipe, run.run_dir, run.seed, run.flags, extra, vary_split, mode=mode)


def _entries(run: _Run, metrics: dict[str, Any], info: dict[str, Any], tuned: bool) -> list[dict[str, Any]]:
    """The comparison's entries of one run with its recorded ``metrics``: the run as trained, and with ``tuned`` the
    same model with its decision rule tuned on validation (``<variant>+tuned``, the ``tuned_`` metrics)."""
    as_trained = {key: v for key, v in metrics.items() if not key.startswith("tuned_")}
    record = {
        "seed": run.seed,
        "flags": mask_secrets(run.flags),
        "output_dir": str(run.run_dir),
        "settings": run.settings,
    }
    record.update(info)
    entries = [{"variant": run.name, "metrics": as_trained, **record}]
    if tuned:  # the same model with its decision rule tuned on validation
        tuned_metrics = {key[len("tuned_") :]: v for key, v in metrics.items() if key.startswith("tuned_")}
        if TRAIN_SECONDS in metrics:  # the same training: its cost is the run's
            tuned_metrics[TRAIN_SECONDS] = metrics[TRAIN_SECONDS]
        entries.append({"variant": f"{run.name}+tuned", "metrics": tuned_metrics, **record})
    return entries


def run_comparison(
    recipe: str,
    variants: Mapping[str, list[str]],
    out_dir: Path,
    *,
    seeds: int,
    metric: str,
    extra: list[str],
    tuned: bool,
    vary_split: bool = False,
    force: bool = False,
    recipe_name: str | None = None,
    command: str | None = None,
) -> list[dict[str, Any]]:
    """Every (variant, seed) run, trained or taken as it is (``run_mode``), seed-major so that an interrupted
    comparison leaves every variant with the same seeds. Returns one entry per run: its variant, test metrics and
    record; with ``tuned`` each run has a second entry, ``<variant>+tuned``, with its tuned rule's metrics (every run
    is trained with ``--tune_decision_rule true``, whatever ``tuned`` says). ``recipe_name``: the recipe as the user
    named it (default ``recipe``); ``command``: the east-compare command, recorded beside each run it trains.

    Raises ``OtherFlagsError`` (one line) before training anything when the comparison would replace runs trained in
    ``out_dir`` with other flags (``_check_replacements``)."""
    planned = _plan(
        recipe,
        variants,
        out_dir,
        seeds=seeds,
        extra=extra,
        vary_split=vary_split,
        force=force,
        recipe_name=recipe_name or recipe,
    )
    if not force:
        _check_replacements(planned, out_dir)
    runs: list[dict[str, Any]] = []
    total = len(planned)
    started, trained, trained_seconds = time.monotonic(), 0, 0.0  # the ETA: mean time of a run trained here so far
    for k, run in enumerate(planned, start=1):
        name, seed, run_dir, mode, why = run.name, run.seed, run.run_dir, run.mode, run.why
        if mode == "skip" and tuned and f"tuned_{metric}" not in read_run(run_dir):
            mode, why = "overwrite", "finished without a tuned rule"
        done = mode == "skip"
        state = ("done, skipped" if done else "training") + (f" ({why})" if why else "")
        if not done:  # left: this run and the ones after it, each as long as the mean so far
            eta = f", ETA ~{_clock(trained_seconds / trained * (total - k + 1))}" if trained else ""
            state += f" (elapsed {_clock(time.monotonic() - started)}{eta})"
        _say(f"[{k}/{total}] {name} seed {seed}: {state}")
        info = {}
        if not done:
            start = time.monotonic()
            info = _train(recipe, run, mode, extra, vary_split, command)
            trained, trained_seconds = trained + 1, trained_seconds + time.monotonic() - start
        metrics = read_run(run_dir)
        runs += _entries(run, metrics, info, tuned)
        _say(f"[{k}/{total}] {name} seed {seed}: test {metric}={metrics.get(metric, float('nan')):.4f}")
    return runs
