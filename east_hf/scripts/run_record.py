"""A run's record: what a finished ``east-train`` run's results depend on, and what changed between two records.

``run_record`` holds every setting that affects training (defaults included), the east_hf version and a fingerprint
of the data. ``east-train --dry_run`` prints ``resolved_settings`` (the settings that differ from the defaults);
``east-train`` keeps its run's record in its output folder (``run_settings.json``, ``write_record``, at its first
checkpoint) and refuses to resume a run whose data or model settings changed since (``check_resumed_record``);
``east-compare`` keeps each run's record beside it as well and trains a run again when ``record_changes`` finds a
difference, never when only a setting that does not affect training changed (``RECORD_LEAVES_OUT``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from east_hf.hf.data.arguments import DataArguments

if TYPE_CHECKING:
    from east_hf.scripts.arguments import ParsedArguments

__all__ = [
    "RECORD_LEAVES_OUT",
    "REQUEST_KEY",
    "SETTINGS_GROUPS",
    "SETTINGS_NAME",
    "RecordAtFirstSave",
    "as_json",
    "check_resumed_record",
    "data_fingerprint",
    "default_settings",
    "record_changes",
    "resolved_settings",
    "run_record",
    "settings_changes",
    "unrecorded",
    "write_atomically",
    "write_record",
]

SETTINGS_NAME = "run_settings.json"
"""A run's record, in its output folder."""
REQUEST_KEY = "requested"
"""The key of ``run_settings.json`` beside the record: what the comparison asked of the run (recipe, flags)."""
RESUME_CHECKED = ("data", "model")
"""The groups of settings a resumed run must share with the run it resumes: what its rows, split, tokenizer and
weights' shapes come from (the training settings may change, e.g. a longer budget)."""
RESUME_LEAVES_OUT = frozenset({"preprocessing_num_workers"})
"""Data settings that change how the data is prepared, not what it is."""

SETTINGS_GROUPS = ("script", "data", "model", "training")
"""The groups of settings in a run record; beside them it holds ``east_hf_version`` and ``data_fingerprint``."""

RECORD_LEAVES_OUT = frozenset(
    {"output_dir", "logging_dir", "run_name", "resume_from_checkpoint", "overwrite_output_dir", "dry_run"}
    | {"report_to", "disable_tqdm", "project", "log_level", "log_level_replica", "log_on_each_node", "local_rank"}
    | {"ddp_find_unused_parameters"}  # how DDP runs the model east-train builds, not what it trains
    | {"push_to_hub", "hub_model_id", "hub_strategy", "hub_token", "hub_private_repo", "hub_always_push"}
    | {"hub_revision", "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id", "skip_memory_metrics"}
    | {"license", "model_card", "print_metrics"}
)
"""Settings that do not change what a run trains or measures: where it writes and reports, how it resumes, where it
pushes, how it launches, what its card says. A run record leaves them out, so changing one never makes east-compare
train again."""


def as_json(value: Any) -> Any:
    """``value`` as it reads back from a JSON file (keys sorted, other objects as their ``str``): the form a record
    is kept and compared in.

    >>> as_json({"b": (1, 2), "a": Path("x")})
    {'a': 'x', 'b': [1, 2]}
    """
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def default_settings() -> dict[str, dict[str, Any]]:
    """The default value of every field of each dataclass, by group (what ``resolved_settings`` leaves out)."""
    from east_hf.hf.config.east_config import EASTConfig
    from east_hf.hf.models.build import ModelArguments
    from east_hf.scripts.arguments import ScriptArguments

    out = {
        title: {f.name: getattr(cls(), f.name) for f in fields(cls)}
        for title, cls in (("script", ScriptArguments), ("data", DataArguments), ("model", ModelArguments))
    }
    out["training"] = EASTConfig(output_dir="x").to_dict()
    return out


def resolved_settings(parsed: ParsedArguments, full: bool = False) -> dict[str, dict[str, Any]]:
    """The fields of each dataclass that differ from its defaults (what a dry run prints), by group; with ``full``
    every field that affects training (all but ``RECORD_LEAVES_OUT``), so that a record stays exact when a default
    changes. Secrets are masked (``east_hf.hf.secret_masking.mask_secrets``)."""
    from east_hf.hf.secret_masking import mask_secrets

    defaults = default_settings()
    out = {
        title: {f.name: getattr(obj, f.name) for f in fields(obj)}
        for title, obj in (("script", parsed.script), ("data", parsed.data), ("model", parsed.model))
    }
    out["training"] = parsed.training.to_dict()
    for title, values in out.items():
        if full:
            out[title] = {k: v for k, v in values.items() if k not in RECORD_LEAVES_OUT}
        else:
            out[title] = {k: v for k, v in values.items() if v != defaults[title].get(k)}
    return mask_secrets(out)


def data_fingerprint(dataset_name: str | None, dataset_config: str | None = None) -> dict[str, Any]:
    """What identifies the data a run reads, so that an edit of it is noticed: for a local file its size, mtime and
    SHA-256 of its bytes; for a local folder the same over every file in it (a missing path: its name only); for
    ``sklearn:<name>`` the name and the generator's parameters; for a Hub id the id, configuration and revision.

    The bytes are hashed by ``east_hf.hf.data.fingerprint.file_sha256``, the content fingerprint that east_hf's data
    caches are keyed on, once per file and process while the file is unchanged: data that changed here is data that
    ``load_data`` reads afresh, even when an edit kept the file's mtime."""
    from east_hf.hf.data.fingerprint import file_sha256
    from east_hf.hf.data.sources import FILE_BUILDERS, SYNTHETIC_SETS

    name = str(dataset_name)
    if name.startswith("sklearn:"):
        return {"kind": "sklearn", "name": name, "parameters": SYNTHETIC_SETS.get(name.split(":", 1)[1])}
    path = Path(name).expanduser()
    if path.is_file():
        stat = path.stat()
        digest = file_sha256(path)
        return {"kind": "file", "path": name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        combined, size = hashlib.sha256(), 0
        for file in files:
            stat = file.stat()
            size += stat.st_size
            digest = file_sha256(file)
            combined.update(f"{file.relative_to(path).as_posix()}\0{stat.st_size}\0{digest}\n".encode())
        return {"kind": "folder", "path": name, "files": len(files), "size": size, "sha256": combined.hexdigest()}
    if name.startswith(("/", "./", "../", "~")) or path.suffix.lower() in FILE_BUILDERS:
        return {"kind": "missing", "path": name}  # a local path that is not there (yet): the run itself says so
    # a Hub id: its own fingerprint would mean a download or a network call for every run; the data loads from
    # the default branch, so no revision is pinned
    return {"kind": "hub", "id": name, "config": dataset_config, "revision": None}


def run_record(parsed: ParsedArguments) -> dict[str, Any]:
    """What a finished run's results depend on: every setting that affects training (``resolved_settings(parsed,
    full=True)``, by group), the east_hf version that trained it and the fingerprint of its data."""
    from east_hf import __version__

    return {
        **resolved_settings(parsed, full=True),
        "east_hf_version": __version__,
        "data_fingerprint": data_fingerprint(parsed.data.dataset_name, parsed.data.dataset_config),
    }


def settings_changes(old: dict[str, Any], new: dict[str, Any], defaults: dict[str, Any] | None = None) -> list[str]:
    """``key: old -> new`` for every setting that differs. A record written before records were complete lists only
    the fields that differed from the defaults of its day, so a field missing from one side has its value in
    ``defaults`` (today's), where given. Settings that do not affect training (``RECORD_LEAVES_OUT``) are not
    compared: older records hold some of them.

    >>> settings_changes({"training": {"learning_rate": 0.001}}, {"training": {"learning_rate": 0.01}})
    ['learning_rate: 0.001 -> 0.01']
    >>> settings_changes({"training": {"optim": "adamw_torch"}}, {"training": {}},
    ...                  {"training": {"optim": "adamw_torch"}})
    []
    """
    out = []
    for group in [g for g in SETTINGS_GROUPS if g in old or g in new]:
        a, b, default = old.get(group, {}), new.get(group, {}), (defaults or {}).get(group, {})
        for k in sorted((set(a) | set(b)) - RECORD_LEAVES_OUT):
            before, after = a.get(k, default.get(k, "(default)")), b.get(k, default.get(k, "(default)"))
            if before != after:
                out.append(f"{k}: {before} -> {after}")
    return out


def _describe_data(fingerprint: dict[str, Any], path: bool = True) -> str:
    """A data fingerprint in words: ``data.csv (1234 bytes, sha256 0123456789ab)``; without ``path`` the part in
    parentheses only."""
    kind = fingerprint.get("kind")
    if kind in ("file", "folder"):
        files = f"{fingerprint['files']} files, " if kind == "folder" else ""
        contents = f"{files}{fingerprint['size']} bytes, sha256 {fingerprint['sha256'][:12]}"
        return f"{fingerprint['path']} ({contents})" if path else contents
    if kind == "missing":
        return f"{fingerprint['path']} (missing)"
    if kind == "sklearn":
        return fingerprint["name"] + (f" {fingerprint['parameters']}" if fingerprint.get("parameters") else "")
    if kind == "hub":
        config = f" ({fingerprint['config']})" if fingerprint.get("config") else ""
        return fingerprint["id"] + config + (f" at {fingerprint['revision']}" if fingerprint.get("revision") else "")
    return json.dumps(fingerprint, sort_keys=True)


def record_changes(old: dict[str, Any], new: dict[str, Any], defaults: dict[str, Any] | None = None) -> list[str]:
    """Why a run recorded as ``old`` is not the run ``new`` describes: ``settings changed: ...``, ``data changed:
    ...`` (the bytes, not the mtime: a file touched but not edited is the same data), ``east_hf 0.2.0 -> 0.3.0``;
    empty when they agree. A version or a fingerprint that ``old`` does not hold (an older record) is not compared.

    >>> record_changes({"east_hf_version": "0.2.0"}, {"east_hf_version": "0.3.0"})
    ['east_hf 0.2.0 -> 0.3.0']
    """
    out = []
    changes = settings_changes(old, new, defaults)
    if changes:
        out.append("settings changed: " + "; ".join(changes))
    before, after = old.get("data_fingerprint"), new.get("data_fingerprint")
    content = [{k: v for k, v in (fp or {}).items() if k != "mtime_ns"} for fp in (before, after)]
    if before is not None and after is not None and content[0] != content[1]:
        where = before.get("path")
        if where is not None and where == after.get("path"):  # the same file, edited
            out.append(f"data changed: {where}: {_describe_data(before, False)} -> {_describe_data(after, False)}")
        else:
            out.append(f"data changed: {_describe_data(before)} -> {_describe_data(after)}")
    version = old.get("east_hf_version")
    if version is not None and new.get("east_hf_version") is not None and version != new["east_hf_version"]:
        out.append(f"east_hf {version} -> {new['east_hf_version']}")
    return out


def unrecorded(old: dict[str, Any]) -> str:
    """The note for a record that predates data fingerprints or versions: what is therefore not checked ("" if none).

    >>> unrecorded({"training": {}})
    'its data and east_hf version were not recorded, so they are not checked'
    """
    recorded = (("data_fingerprint", "data"), ("east_hf_version", "east_hf version"))
    missing = [what for key, what in recorded if key not in old]
    if not missing:
        return ""
    verb, pronoun = ("were", "they are") if len(missing) > 1 else ("was", "it is")
    return f"its {' and '.join(missing)} {verb} not recorded, so {pronoun} not checked"


def write_atomically(file: Path, text: str) -> None:
    """Write ``text`` to ``file`` through a temporary file renamed over it: a kill leaves the old file or the new.
    The temporary file is beside the run's folder, not in it, where east-train would take it for a user's file."""
    partial = file.parent.with_name(f".{file.parent.name}.{file.name}.partial")
    partial.write_text(text)
    os.replace(partial, file)


def _resume_view(record: dict[str, Any]) -> dict[str, Any]:
    view = {g: {k: v for k, v in record.get(g, {}).items() if k not in RESUME_LEAVES_OUT} for g in RESUME_CHECKED}
    return {**view, "data_fingerprint": record.get("data_fingerprint")}


def check_resumed_record(parsed: ParsedArguments) -> None:
    """Refuse (a ``ValueError``, one line) to resume a run whose record (``SETTINGS_NAME`` in its output folder) has
    other data or model settings, or other data: another split, data file, tokenizer or model shape would continue
    the checkpoint on other rows, or fail late on weights that do not fit. The training settings may change (e.g. a
    longer budget). A folder without a record (a run from before records, or from elsewhere) resumes unchecked."""
    folder = Path(parsed.training.output_dir)
    saved = _read_record(folder / SETTINGS_NAME)
    if saved is None:
        return
    changes = record_changes(_resume_view(saved), _resume_view(as_json(run_record(parsed))))
    if changes:
        raise ValueError(
            f"Expected the data and model settings that the run in {folder} was started with, to resume it; got "
            f"{'; '.join(changes)}: resume with its settings, or start a new run (--overwrite_output_dir true or "
            "another output_dir)"
        )


def write_record(output_dir: str | os.PathLike, record: dict[str, Any]) -> None:
    """Keep a run's record (``as_json(run_record(parsed))``) in its output folder (``SETTINGS_NAME``); one that
    east-compare wrote for the same settings is kept as it is, with its request."""
    file = Path(output_dir) / SETTINGS_NAME
    saved = _read_record(file)
    if saved is not None and {k: v for k, v in saved.items() if k != REQUEST_KEY} == record:
        return
    write_atomically(file, json.dumps(record, indent=2, sort_keys=True) + "\n")


class RecordAtFirstSave(TrainerCallback):
    """Writes the run's record (``write_record``) when the Trainer saves its first checkpoint, from the main process:
    from then on the folder holds a run that resumes only with the same data and model settings. A run stopped
    before any checkpoint leaves nothing to resume and no record. The record is made before training (``run_record``
    builds a default ``EASTConfig``, which must not happen while the Trainer's accelerator is in use)."""

    def __init__(self, parsed: ParsedArguments):
        self.output_dir = parsed.training.output_dir
        self.record = as_json(run_record(parsed)) if parsed.training.process_index == 0 else None
        self.written = False

    def on_save(self, args, state, control, **kwargs):
        if not self.written and state.is_world_process_zero and self.record is not None:
            write_record(self.output_dir, self.record)
            self.written = True


def _read_record(file: Path) -> dict[str, Any] | None:
    try:
        saved = json.loads(file.read_text()) if file.is_file() else None
    except (OSError, ValueError):  # unreadable: not a record to check against; a new one replaces it
        return None
    return saved if isinstance(saved, dict) else None
