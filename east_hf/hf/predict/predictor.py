"""Predictions from a saved run: a run folder plus raw rows or images in, labels by name (and probabilities) out.

``Predictor(run_dir)`` loads what ``east-train`` saved: the model (``east_hf.hf.models.load_pretrained``), its input
preprocessing (the tokenizer for a text run, read with ``AutoTokenizer``; the ``TabularFeatureExtractor`` of
``preprocessor_config.json`` for a tabular run; for an image run
the transform it evaluated with, built by ``east_hf.hf.data.image_transforms`` from timm's data config in
``config.json`` or the checkpoint's image processor) and its class names (``config.id2label``).
``Predictor.predict(data)`` returns a pandas DataFrame with one row per input: ``path`` for images read from files,
the input's own label column passed through (and on request an id column, or every column the model does not read,
to join the predictions back), ``predicted_label`` by name and, on request, ``probability_<name>`` per class.
``read_inputs`` reads a CSV / Parquet / JSON file, a data folder (an imagefolder) or a datasets id as ``east-train``
reads its data; ``east-predict`` (``east_hf.scripts.east_predict``) is the command over both.

A decision rule tuned on validation (``decision_rule.json``) is already in the saved model: ``east-train`` folds its
offsets into the output bias (``east_hf.core.decision.rule.fold_offsets_into_bias``) before it saves, so the argmax of
the saved model's logits applies the tuned rule and nothing is added again here. The probabilities are the softmax of
those logits: the scores whose argmax is the predicted label (with a tuned rule, shifted by its offsets).

A multi-label run (``config.problem_type == "multi_label_classification"``) predicts each label whose logit is above
0 (sigmoid above 0.5, the tuned per-label offsets already in the bias): ``predicted_label`` is the row's label set
joined by ``LABEL_SEPARATOR`` (``"|"``; empty for a row with no label), and ``probability_<name>`` each label's
sigmoid.

``decision_rule.json`` is a record, not a setting: predictions are the saved model's alone, as with the Auto classes
or a pipeline, so an edit of the file is not applied. ``east-train`` also records the folded offsets in
``config.json`` (``FOLDED_OFFSETS_KEY``); where the file's offsets differ from them, ``Predictor`` says in one warning
line that the edit is not applied and how to apply other offsets. A file that is not JSON is a one-line error naming
it.

    import east_hf, pandas as pd
    frame = east_hf.predict("runs/demo", pd.read_csv("rows.csv"), probabilities=True)
    # columns: predicted_label, probability_negative, probability_positive
    east_hf.Predictor("runs/digits").predict(["a.png", "b.png"])   # images: PIL images or file paths
    east_hf.Predictor("runs/text-tiny").predict(["a text", "another"])   # texts: strings, or rows with the text column
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from east_hf.hf.decision_rule import DECISION_RULE_FILE, FOLDED_OFFSETS_KEY, read_decision_rule, rule_edited
from east_hf.hf.predict.inputs import (
    LABEL_COLUMNS,
    as_numbers,
    decode,
    is_dataset,
    is_image_item,
    name_list,
    one_line,
    passed_columns,
    read_inputs,
    table_frame,
    text_frame,
    text_values,
)

__all__ = [
    "DECISION_RULE_FILE",
    "FOLDED_OFFSETS_KEY",
    "LABEL_COLUMNS",
    "LABEL_SEPARATOR",
    "PREDICTION_COLUMN",
    "PROBABILITY_PREFIX",
    "TEXT_COLUMNS_KEY",
    "Predictor",
    "check_run_folder",
    "predict",
    "read_inputs",
]

PREDICTION_COLUMN = "predicted_label"
LABEL_SEPARATOR = "|"  # joins a multi-label row's predicted labels in PREDICTION_COLUMN
PROBABILITY_PREFIX = "probability_"  # + a class name: one column per class with probabilities=True
TEXT_COLUMNS_KEY = "east_text_columns"  # config.json: the text column and the pair column (or None) of a text run

logger = logging.getLogger(__name__)


def check_run_folder(run_dir: str | os.PathLike) -> Path:
    """``run_dir`` as a ``Path`` where it holds a saved model (``config.json`` and its weights, or a LoRA run's
    ``adapter_config.json`` and adapter: a run folder of ``east-train`` or one of its checkpoints), else a one-line
    ``ValueError`` saying what the folder is instead: missing, a file, an east-compare table (naming one of its runs),
    a run that never saved its final model (naming its last complete checkpoint) or any other folder
    (naming what it holds)."""
    from east_hf.hf.training.checkpoints import WEIGHT_FILES, comparison_files, last_complete_checkpoint

    folder = Path(run_dir).expanduser()
    expected = f"Expected a run folder written by east-train (config.json and model.safetensors), got {str(run_dir)!r}"
    if not folder.exists():
        raise ValueError(f"{expected}, which does not exist")
    if not folder.is_dir():
        raise ValueError(f"{expected}, which is a file")
    has_config = (folder / "config.json").is_file() or (folder / "adapter_config.json").is_file()  # LoRA: peft's
    has_weights = any((folder / name).is_file() for name in WEIGHT_FILES)
    if has_config and has_weights:
        return folder
    if comparison_files(folder):
        runs = sorted(p.parent for p in folder.glob("*/*/config.json"))
        hint = f"; pass one of its runs, such as {runs[0]}" if runs else ""
        raise ValueError(f"{expected}, which holds an east-compare comparison{hint}")
    last = last_complete_checkpoint(folder)
    if last is not None:
        raise ValueError(
            f"{expected}, which holds checkpoints but no final model (an interrupted run?); pass its last complete "
            f"checkpoint {last}, or resume the run with east-train --resume_from_checkpoint true"
        )
    missing = [name for name, ok in (("config.json", has_config), ("model.safetensors", has_weights)) if not ok]
    held = sorted(p.name for p in folder.iterdir())
    raise ValueError(f"{expected}, which lacks {' and '.join(missing)} (it holds: {name_list(held, 5)})")


def _device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device`` this machine has; default ``cuda`` where available, else ``cpu``."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"Expected a device such as cpu or cuda:0, got {device!r} ({one_line(e)})") from None
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"Expected a device this machine has, got {str(device)!r} ({torch.cuda.device_count()} GPUs)")
    return device


@contextlib.contextmanager
def _quiet_loading():
    """transformers' progress bars off while a run's weights load: predictions end in one summary line, not a bar."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


class Predictor:
    """A saved run, ready to predict: ``Predictor(run_dir).predict(data) -> pandas.DataFrame``.

    Args:
        run_dir: a folder ``east-train`` wrote, or one of its checkpoints: ``config.json``, the weights and, for a
            tabular run, ``preprocessor_config.json``; or a LoRA run's adapter, loaded on its base checkpoint, which
            must be the one it was saved on (``east_hf.hf.models.lora.check_base_weights``: else a one-line
            ``ValueError``).
        device: where the model runs; default ``cuda`` where available, else ``cpu``.
        batch_size: inputs per forward pass; images are read and transformed one batch at a time.

    Attributes: ``model``; ``modality`` (``"tabular"``, ``"text"`` or ``"image"``); ``label_names`` (class k's name);
    ``multi_label`` (the model predicts a set of labels per row: see the module docstring);
    ``feature_extractor`` (tabular: raw rows -> ``input_features`` (N, F)) or ``transform`` (image: a PIL image ->
    (3, H, W)); ``decision_rule``: ``decision_rule.json`` as a dict where the run tuned a rule (already in the
    model's bias: see the module docstring), else None; ``decision_rule_edited``: whether its offsets differ from
    those ``config.json`` records as folded into the bias (then they are not applied, and a warning says so).
    """

    def __init__(self, run_dir: str | os.PathLike, device: str | torch.device | None = None, batch_size: int = 256):
        from east_hf.hf.data.tabular import LEGACY_PREPROCESSOR_NAME, load_tabular_features
        from east_hf.hf.models import TabularMLPConfig, load_pretrained  # also registers east_hf's Auto classes
        from east_hf.hf.models.lora import AdapterBaseError

        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"Expected batch_size an integer >= 1, got {batch_size!r}")
        self.run_dir = check_run_folder(run_dir)
        self.batch_size = batch_size
        self.device = _device(device)
        try:
            with _quiet_loading():
                self.model = load_pretrained(str(self.run_dir)).eval()
        except AdapterBaseError:  # a LoRA run's adapter on another base: its own line names both checkpoints
            raise
        except Exception as e:  # noqa: BLE001 - transformers raises many kinds for a folder it cannot read
            raise ValueError(
                f"Expected a model east_hf can load in {self.run_dir}, got {type(e).__name__}: {one_line(e)}"
            ) from None
        self.model.to(self.device)
        config = self.model.config
        self.label_names = [str(config.id2label[k]) for k in range(config.num_labels)]
        self.multi_label = getattr(config, "problem_type", None) == "multi_label_classification"
        processor_file = self.run_dir / "preprocessor_config.json"
        saved = json.loads(processor_file.read_text()) if processor_file.is_file() else {}
        tabular = (
            isinstance(config, TabularMLPConfig)
            or saved.get("feature_extractor_type") == "TabularFeatureExtractor"
            or (self.run_dir / LEGACY_PREPROCESSOR_NAME).is_file()
        )
        text = not tabular and getattr(self.model, "main_input_name", None) == "input_ids"
        self.modality = "tabular" if tabular else "text" if text else "image"
        self.feature_extractor = self.transform = self.tokenizer = None
        if text:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(self.run_dir)
            self.text_columns = [c for c in getattr(config, TEXT_COLUMNS_KEY, None) or ["text"] if c]
        elif tabular:
            try:
                self.feature_extractor = load_tabular_features(self.run_dir)
            except FileNotFoundError as e:
                raise ValueError(str(e)) from None
        else:
            from transformers import AutoImageProcessor

            from east_hf.hf.data.images import image_transforms

            # a timm model's transform comes from its config's pretrained_cfg (a LoRA run's processor file repeats it)
            timm = hasattr(self.model, "timm_model")
            processor = None
            if processor_file.is_file() and not timm:
                processor = AutoImageProcessor.from_pretrained(self.run_dir)
            _, self.transform, _ = image_transforms(self.model, processor)  # what the run evaluated with
        self.decision_rule = read_decision_rule(self.run_dir / DECISION_RULE_FILE)
        self.decision_rule_edited = self.decision_rule is not None and rule_edited(
            self.decision_rule, getattr(config, FOLDED_OFFSETS_KEY, None), self.run_dir / DECISION_RULE_FILE
        )

    def predict(
        self,
        data: Any,
        probabilities: bool = False,
        label_column: str | None = None,
        image_column: str | None = None,
        id_column: str | None = None,
        keep_columns: bool = False,
    ):
        """One row per input: ``path`` (images read from files), the input's ``id_column`` (which must be there),
        its label column (``label_column``, else ``label`` or ``labels`` where present; class names for a
        ``ClassLabel``), with ``keep_columns`` every other input column the model does not read, then
        ``predicted_label`` and, with ``probabilities``, ``probability_<name>`` per class. A column passed through
        whose name is one of these output columns is a one-line ``ValueError``.

        ``data``: for a text run a list of strings, or a DataFrame / ``datasets.Dataset`` holding the run's text
        column (and pair column), whose values must be strings (a number is refused as east-train refuses it; a
        missing, empty or blank text is predicted from an empty input, with one warning counting such rows); for a
        tabular run a pandas DataFrame, a dict of columns, one row as a dict, a list of row dicts or a
        ``datasets.Dataset`` holding the run's feature columns (extra columns are ignored); for an image run a list of
        PIL images or image file paths, or a ``datasets.Dataset`` with an ``Image`` column (``image_column``, else the
        first).
        """
        import pandas as pd

        probability_columns = [f"{PROBABILITY_PREFIX}{n}" for n in self.label_names] if probabilities else []
        outputs = [PREDICTION_COLUMN, *probability_columns]  # a column passed through must not be replaced by one
        passing = dict(label_column=label_column, id_column=id_column, keep_columns=keep_columns, reserved=outputs)
        if self.modality == "text":
            batches, n, columns = self._texts(data, passing)
        elif self.modality == "tabular":
            batches, n, columns = self._tabular(data, passing)
        else:
            batches, n, columns = self._images(data, passing, image_column)
        logits = []
        with torch.no_grad():
            for inputs in batches:
                logits.append(self.model(**{k: v.to(self.device) for k, v in inputs.items()}).logits.float().cpu())
        logits = torch.cat(logits) if logits else torch.empty(0, len(self.label_names))  # (N, C)
        if self.multi_label:
            columns[PREDICTION_COLUMN] = [
                LABEL_SEPARATOR.join(self.label_names[k] for k in row.nonzero().flatten().tolist())
                for row in logits > 0
            ]
        else:
            columns[PREDICTION_COLUMN] = [self.label_names[k] for k in logits.argmax(-1).tolist()]
        if probabilities:
            probs = (logits.sigmoid() if self.multi_label else logits.softmax(-1)).numpy()  # (N, C)
            for k, name in enumerate(self.label_names):
                columns[f"{PROBABILITY_PREFIX}{name}"] = probs[:, k]
        return pd.DataFrame(columns, index=range(n))

    def _tabular(self, data: Any, passing: dict[str, Any]) -> tuple[Iterator[dict], int, dict[str, list]]:
        """(batches of ``input_features``, number of rows, the columns passed through) for a tabular run."""
        frame = table_frame(data)
        present = [str(c) for c in frame.columns]
        wanted = self.feature_extractor.columns
        missing = [c for c in wanted if c not in present]
        if missing:
            raise ValueError(
                f"Expected the run's feature columns {name_list(wanted)}, got an input without {name_list(missing)} "
                f"(its columns: {name_list(present)})"
            )
        columns = passed_columns(data, frame, wanted, **passing)
        frame = as_numbers(frame, self.feature_extractor.numeric)
        features = torch.from_numpy(self.feature_extractor.transform(frame, "input"))  # (N, F) float32
        batches = ({"input_features": x} for x in features.split(self.batch_size))
        return batches, len(frame), columns

    def _texts(self, data: Any, passing: dict[str, Any]) -> tuple[Iterator[dict], int, dict[str, list]]:
        """(batches of the tokenizer's inputs, padded per batch and truncated as in training, number of texts, the
        columns passed through) for a text run: a list of strings, or rows holding the run's text column(s)."""
        if isinstance(data, str):
            data = [data]
        frame = text_frame(data, self.text_columns)
        present = [str(c) for c in frame.columns]
        missing = [c for c in self.text_columns if c not in present]
        if missing:
            raise ValueError(
                f"Expected the run's text column(s) {name_list(self.text_columns)}, got an input without "
                f"{name_list(missing)} (its columns: {name_list(present)})"
            )
        columns = passed_columns(data, frame, self.text_columns, **passing)
        texts, empty = [], np.zeros(len(frame), dtype=bool)  # (N,): rows without text in some column
        for column, what in zip(self.text_columns, ("text column", "text pair column")):
            values, blank = text_values(frame, column, what)
            texts.append(values)
            empty |= blank
        if empty.any():  # kept, so that the predictions align with the input; east-train drops such rows
            self._warn_empty_texts(int(empty.sum()), len(frame))

        def batches():
            for start in range(0, len(frame), self.batch_size):
                chunk = [t[start : start + self.batch_size] for t in texts]
                yield dict(self.tokenizer(*chunk, truncation=True, padding=True, return_tensors="pt"))

        return batches(), len(frame), columns

    def _warn_empty_texts(self, n: int, total: int) -> None:
        """One warning for the ``n`` of ``total`` input rows without text, predicted from an empty input."""
        rows, theirs = (
            (f"{n} of {total} rows have", "their predictions come")
            if n > 1
            else (f"1 of {total} rows has", "its prediction comes")
        )
        logger.warning(
            f"{rows} no text in {name_list(self.text_columns)} (missing, empty or blank): {theirs} from an empty input"
        )

    def _images(
        self, data: Any, passing: dict[str, Any], image_column: str | None
    ) -> tuple[Iterator[dict], int, dict[str, list]]:
        """(batches of ``pixel_values`` (B, 3, H, W), decoded and transformed one batch at a time, number of
        images, the columns passed through) for an image run."""
        import datasets

        columns: dict[str, list] = {}
        if is_dataset(data):
            found = [c for c, f in data.features.items() if isinstance(f, datasets.Image)]
            column = image_column or (found[0] if found else None)
            if column is None or column not in data.column_names:
                raise ValueError(
                    f"Expected an image column{f' {image_column!r}' if image_column else ''} in the input of an image "
                    f"run, got the columns {name_list(data.column_names)}"
                )
            items = list(data.cast_column(column, datasets.Image(decode=False)).with_format(None)[column])
            paths = [item.get("path") if isinstance(item, Mapping) else None for item in items]
            reserved = [*passing["reserved"], "path"] if any(p is not None for p in paths) else passing["reserved"]
            columns = passed_columns(data, None, [column], **{**passing, "reserved": reserved})
        elif isinstance(data, Sequence) and not isinstance(data, (str, bytes)) and all(map(is_image_item, data)):
            for what, name in (("a label column", passing["label_column"]), ("an id column", passing["id_column"])):
                if name is not None:
                    raise ValueError(f"Expected a data set with {what} {name!r}, got a list of images")
            items = list(data)
            paths = [os.fspath(item) if isinstance(item, (str, os.PathLike)) else None for item in items]
        elif is_image_item(data):
            return self._images([data], passing, image_column)
        else:
            raise TypeError(
                "Expected images for an image run (a list of PIL images or image file paths, or a datasets.Dataset "
                f"with an Image column), got {type(data).__name__}"
            )
        if any(p is not None for p in paths):
            columns = {"path": paths, **columns}

        def batches():
            for start in range(0, len(items), self.batch_size):
                images = [decode(item).convert("RGB") for item in items[start : start + self.batch_size]]
                yield {"pixel_values": torch.stack([self.transform(image) for image in images])}

        return batches(), len(items), columns


def predict(
    run_dir: str | os.PathLike,
    data: Any,
    probabilities: bool = False,
    label_column: str | None = None,
    image_column: str | None = None,
    device: str | torch.device | None = None,
    batch_size: int = 256,
    id_column: str | None = None,
    keep_columns: bool = False,
):
    """``Predictor(run_dir, device, batch_size).predict(data, ...)``: a pandas DataFrame with one row per input and
    the predicted label by name, the columns passed through first (see ``Predictor.predict``)."""
    return Predictor(run_dir, device=device, batch_size=batch_size).predict(
        data,
        probabilities=probabilities,
        label_column=label_column,
        image_column=image_column,
        id_column=id_column,
        keep_columns=keep_columns,
    )
