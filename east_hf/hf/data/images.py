"""Image rows as model inputs: the checkpoint's or timm's transforms, applied on the fly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["image_transforms", "set_image_transforms"]


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
