"""Image rows as model inputs: the files checked at load, then the checkpoint's or timm's transforms, applied on the
fly."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable
from typing import Any

from east_hf.hf.data.messages import UNREADABLE_IMAGE, listed
from east_hf.hf.data.rows import read_batches
from east_hf.hf.data.sources import DataError

__all__ = ["UNREADABLE_IMAGE", "drop_unreadable_images", "image_transforms", "set_image_transforms"]

logger = logging.getLogger(__name__)

_CHECK_THREADS = 8  # files opened at once: the check waits on the disk more than on Python
_CHECK_ROWS = 1024  # images checked per batch: a data set of image bytes is never held whole in memory


def drop_unreadable_images(splits: dict[str, Any], column: str, dataset_name: str, dropped: dict[str, int]):
    """``splits`` without the rows whose image PIL cannot open (``Image.open`` + ``verify``: not an image, an
    unknown format, a damaged header or PNG chunk), counted in ``dropped`` as ``UNREADABLE_IMAGE`` and named in one
    warning line (the first few files and their count), so that a few broken files neither stop training in its
    first epoch nor go unnoticed. A split left without any readable image is refused in one line.

    Cheap: each file's header and chunks are read, its pixels are not decoded, so a JPEG cut short inside its pixel
    data is found only when training decodes it. Images a ``datasets`` column keeps as bytes are checked in memory;
    one kept as a remote path is left to ``datasets``, which reads it when it decodes."""
    out, names, total = {}, [], 0
    for split, ds in splits.items():
        if ds is None:
            out[split] = None
            continue
        bad, found = [], []  # rows of the split, their files' names
        for start, cells in _image_cells(ds, column):
            for i in _unreadable(cells):
                bad.append(start + i)
                found.append(_cell_name(cells[i], split, start + i))
        if bad and len(bad) == len(ds):
            raise DataError(
                f"Expected images PIL can open in the {split} split of {dataset_name!r}, got {len(bad)} unreadable "
                f"files and no other ({listed(found, 'files')}): convert them to PNG or JPEG"
            )
        if bad:
            names += found
            total += len(bad)
            bad_rows = set(bad)
            ds = ds.select([i for i in range(len(ds)) if i not in bad_rows])
        out[split] = ds
    if total:
        dropped[UNREADABLE_IMAGE] = dropped.get(UNREADABLE_IMAGE, 0) + total
        logger.warning(
            f"skipped {total} image file{'s' if total != 1 else ''} PIL cannot open: {listed(names, 'files')}; fix "
            "or delete them to train on the rest without this warning"
        )
    return out


def _image_cells(ds, column: str):
    """(first row, cells) of ``ds``'s image column in batches of ``_CHECK_ROWS`` rows: each cell the ``datasets``
    storage of one image, ``{"bytes": ..., "path": ...}``, nothing decoded."""
    for start, table in zip(range(0, len(ds), _CHECK_ROWS), read_batches(ds, [column], _CHECK_ROWS)):
        yield start, table.column(column).to_pylist()


def _unreadable(cells: list) -> list[int]:
    """The positions of the cells whose image PIL cannot open, in order."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=_CHECK_THREADS) as pool:
        readable = list(pool.map(_readable, cells))
    return [i for i, ok in enumerate(readable) if not ok]


def _readable(cell: Any) -> bool:
    from PIL import Image

    if not isinstance(cell, dict):  # a missing image: datasets decodes it as None, not a file to check
        return True
    data, path = cell.get("bytes"), cell.get("path")
    if data is not None:
        source = io.BytesIO(data)
    elif path and os.path.isfile(path):
        source = path
    else:  # a remote file: read by datasets when it decodes
        return True
    try:
        with Image.open(source) as image:
            image.verify()
    except Exception:  # noqa: BLE001  (PIL raises many kinds for a damaged file; each means unreadable)
        return False
    return True


def _cell_name(cell: Any, split: str, row: int) -> str:
    path = cell.get("path") if isinstance(cell, dict) else None
    return str(path) if path else f"row {row} of {split}"


def image_transforms(
    model, image_processor=None, image_size: int | None = None, augment: bool = False
) -> tuple[Callable, Callable, dict[str, Any] | None]:
    """(train, eval, timm data config) transforms from a PIL image to a (3, H, W) tensor.

    A timm model (``TimmWrapperForImageClassification``) without an ``image_processor``, or with a
    ``TimmWrapperImageProcessor``: timm's ``resolve_data_config`` / ``create_transform`` of the model, the input
    size replaced by ``image_size``. A transformers checkpoint: its ``image_processor`` for evaluation, and with
    ``augment`` timm's training transform at the processor's size, mean and std. Without ``augment`` training uses
    the evaluation transform (the paper only standardises).
    """
    import timm.data

    timm_model = getattr(model, "timm_model", None)
    if timm_model is not None and (image_processor is None or hasattr(image_processor, "data_config")):
        # A checkpoint's own preprocessing (config.pretrained_cfg: mean, std, input size, crop, interpolation) wins
        # over timm's registry defaults for the architecture's name, which TimmWrapper's timm model carries.
        checkpoint_cfg = getattr(getattr(model, "config", None), "pretrained_cfg", None)
        if isinstance(checkpoint_cfg, dict) and "mean" in checkpoint_cfg:
            data_config = dict(timm.data.resolve_data_config(pretrained_cfg=dict(checkpoint_cfg)))
        else:
            data_config = dict(timm.data.resolve_data_config(model=timm_model))
        if image_size is not None:
            data_config["input_size"] = (3, image_size, image_size)
        eval_tf = timm.data.create_transform(**data_config, is_training=False)
        train_tf = timm.data.create_transform(**data_config, is_training=True) if augment else eval_tf
        return train_tf, eval_tf, data_config
    if image_processor is None:
        raise ValueError(f"Expected a timm model or an image processor for {type(model).__name__}, got neither")
    if image_size is not None:
        image_processor.size = {"height": image_size, "width": image_size}
        if getattr(image_processor, "crop_size", None) is not None:
            image_processor.crop_size = {"height": image_size, "width": image_size}

    def eval_tf(image):
        return image_processor(images=image, return_tensors="pt")["pixel_values"][0]

    if not augment:
        return eval_tf, eval_tf, None
    size = image_processor.crop_size if getattr(image_processor, "crop_size", None) else image_processor.size
    side = size.get("height") or size.get("shortest_edge")
    train_tf = timm.data.create_transform(
        input_size=(3, side, side), mean=image_processor.image_mean, std=image_processor.image_std, is_training=True
    )
    return train_tf, eval_tf, None


def set_image_transforms(data, train_tf: Callable, eval_tf: Callable) -> None:
    """Apply the transforms on the fly (``set_transform``): rows become ``pixel_values`` (3, H, W) and ``labels``."""
    column = data.image_column

    def wrap(tf):
        def apply(batch):
            return {
                "pixel_values": [tf(image.convert("RGB")) for image in batch[column]],
                "labels": batch["label"],
            }

        return apply

    data.train.set_transform(wrap(train_tf))
    for ds in (data.validation, data.test):
        if ds is not None:
            ds.set_transform(wrap(eval_tf))
