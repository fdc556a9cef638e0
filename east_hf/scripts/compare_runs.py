"""The runs of an ``east-compare``: one ``east-train`` run per (variant, seed), trained, resumed, retrained or
skipped by what its folder holds, and its test metrics read back.

Each run's record (``east_hf.scripts.run_record``) is kept in its folder as ``run_settings.json``; a run whose record
changed since is trained again from scratch, never reused. Each run starts with a line on stderr, ``[k/n] VARIANT
seed S: training (elapsed m:ss, ETA ~m:ss)``, the ETA from the mean time of the runs trained so far.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from east_hf.hf.secret_masking import mask_secrets
from east_hf.scripts.run_record import as_json, default_settings, record_changes, run_record, unrecorded

__all__ = ["SETTINGS_NAME", "read_run", "run_argv", "run_comparison", "run_mode", "run_one", "run_settings"]

SETTINGS_NAME = "run_settings.json"


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

    argv = run_argv(recipe, run_dir, seed, flags, extra, vary_split)
    if mode == "resume":
        argv += ["--resume_from_checkpoint", "true"]
    elif mode == "overwrite":
        argv += ["--overwrite_output_dir", "true"]
    start = time.time()
    code = east_train(argv)
    if code:
        raise RuntimeError(f"east-train exited with {code} for {' '.join(mask_secrets(argv))}")
    return {"wall_seconds": round(time.time() - start, 1)}


def run_mode(run_dir: Path, settings: dict[str, Any], force: bool) -> tuple[str, str]:
    """How to treat a run folder: ``"skip"`` (finished with this record), ``"resume"``, ``"overwrite"`` or
    ``"fresh"``, and why (empty when nothing needs saying; for an older record, what it leaves unchecked)."""
    from east_hf.hf.checkpoints import last_complete_checkpoint, run_files

    if not run_files(run_dir):
        return "fresh", ""
    if force:
        return "overwrite", "--force"
    recorded_file = run_dir / SETTINGS_NAME
    if not recorded_file.is_file():
        return "overwrite", f"no {SETTINGS_NAME} records how the earlier run was trained"
    recorded = json.loads(recorded_file.read_text())
    changes = record_changes(recorded, settings, as_json(default_settings()))
    if changes:
        return "overwrite", "; ".join(changes)
    note = unrecorded(recorded)
    if (run_dir / "test_results.json").is_file():
        return "skip", note
    if last_complete_checkpoint(run_dir) is not None:
        return "resume", "; ".join(filter(None, ["resuming from the last complete checkpoint", note]))
    return "overwrite", "no complete checkpoint to resume"


def read_run(run_dir: Path) -> dict[str, Any]:
    """A finished run's test metrics (``test_`` left off), its number of steps and its last EAST temperature."""
    metrics = json.loads((run_dir / "test_results.json").read_text())
    out = {k[len("test_") :]: v for k, v in metrics.items() if k.startswith("test_") and isinstance(v, (int, float))}
    state_file = run_dir / "trainer_state.json"
    if state_file.exists():
        state = json.loads(state_file.read_text())
        out["steps"] = state.get("global_step")
        temps = [  # each EAST evaluation's temperature (not the warm start's), under either key a saved log uses
            e.get("eval_east_temperature", e.get("east_temperature"))
            for e in state.get("log_history", [])
            if "eval_loss" in e and e.get("eval_east_stage", e.get("east_stage", 0)) >= 0
        ]
        out["final_temperature"] = temps[-1] if temps else None
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
) -> list[dict[str, Any]]:
    """Every (variant, seed) run, trained or taken as it is (``run_mode``), seed-major so that an interrupted
    comparison leaves every variant with the same seeds. Returns one entry per run: its variant, test metrics and
    record; with ``tuned`` each run is trained with ``--tune_decision_rule true`` and has a second entry,
    ``<variant>+tuned``, with the tuned rule's metrics."""
    runs: list[dict[str, Any]] = []
    total, k = len(variants) * seeds, 0
    started, trained, trained_seconds = time.monotonic(), 0, 0.0  # the ETA: mean time of a run trained here so far
    for seed in range(seeds):
        for name, flags in variants.items():
            k += 1
            run_dir = out_dir / name / f"seed-{seed}"
            run_flags = [*flags, "--tune_decision_rule", "true"] if tuned else flags
            settings = run_settings(run_argv(recipe, run_dir, seed, run_flags, extra, vary_split))
            mode, why = run_mode(run_dir, settings, force)
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
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / SETTINGS_NAME).write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
                start = time.monotonic()
                info = run_one(recipe, run_dir, seed, run_flags, extra, vary_split, mode=mode)
                trained, trained_seconds = trained + 1, trained_seconds + time.monotonic() - start
            metrics = read_run(run_dir)
            record = {"seed": seed, "flags": mask_secrets(run_flags), "output_dir": str(run_dir), "settings": settings}
            record.update(info)
            runs.append({"variant": name, "metrics": metrics, **record})
            if tuned:  # the same model with its decision rule tuned on validation
                tuned_metrics = {key[len("tuned_") :]: v for key, v in metrics.items() if key.startswith("tuned_")}
                runs.append({"variant": f"{name}+tuned", "metrics": tuned_metrics, **record})
            _say(f"[{k}/{total}] {name} seed {seed}: test {metric}={metrics.get(metric, float('nan')):.4f}")
    return runs
