"""Darknet-19 as a transformers model whose saved folder carries its code.

``DarknetForImageClassification`` is transformers' ``TimmWrapperForImageClassification`` with its own config,
``DarknetConfig`` (model type ``"east_darknet"``): the same timm model under ``timm_model``, the same weights and
``config.json`` keys (``architecture``, ``model_args``, ``pretrained_cfg``), so timm's ``local-dir:`` loader and
transformers' ``TimmWrapperImageProcessor`` read the folder as any timm checkpoint's. What the own config adds:
``save_pretrained`` copies this file and ``darknet.py`` (its only relative import; both import only torch, timm and
transformers) beside the weights and writes an ``auto_map`` into ``config.json``. Importing this file registers
``darknet19`` with timm, so where east_hf is not installed::

    AutoModelForImageClassification.from_pretrained(folder, trust_remote_code=True)

loads the model, and without ``trust_remote_code=True`` transformers stops with its own "contains custom code ...
pass the argument `trust_remote_code=True`" instead of a stock TimmWrapper's "not supported in your version of timm"
(a ``"timm_wrapper"`` model type sends a folder to the stock class, which cannot find ``darknet19`` in timm).
``config.json`` also names ``TimmWrapperImageProcessor``, so ``AutoImageProcessor.from_pretrained(folder)`` needs
neither east_hf nor the code.

>>> model = DarknetForImageClassification(DarknetConfig(architecture="darknet19_tiny", num_labels=3))
>>> model.config.model_type, model.timm_model.num_classes
('east_darknet', 3)
"""

from transformers import (
    AutoConfig,
    AutoModelForImageClassification,
    TimmWrapperConfig,
    TimmWrapperForImageClassification,
)

from .darknet import Darknet19

__all__ = ["DARKNET_ARCHITECTURES", "DarknetConfig", "DarknetForImageClassification", "is_darknet"]

DARKNET_ARCHITECTURES = ("darknet19", "darknet19_tiny")  # the names darknet.py registers with timm


def is_darknet(architecture: str | None) -> bool:
    """Whether a timm model name (``"darknet19"``, ``"darknet19_tiny.cifar"``) is one of darknet.py's."""
    return isinstance(architecture, str) and architecture.split(".")[0] in DARKNET_ARCHITECTURES


class DarknetConfig(TimmWrapperConfig):
    """``TimmWrapperConfig`` of a Darknet-19 (``architecture`` is ``darknet19``, ``darknet19_tiny`` or a tagged
    name such as ``darknet19.cifar``); its own model type lets a saved folder name the code it needs."""

    model_type = "east_darknet"

    architecture: str = "darknet19"
    # AutoImageProcessor reads a timm folder's config.json: this key picks the processor without loading the config
    image_processor_type: str = "TimmWrapperImageProcessor"

    def __post_init__(self, **kwargs):
        if not is_darknet(self.architecture):
            raise ValueError(f"Expected a Darknet-19 architecture {DARKNET_ARCHITECTURES}, got {self.architecture!r}")
        super().__post_init__(**kwargs)


class DarknetForImageClassification(TimmWrapperForImageClassification):
    """``TimmWrapperForImageClassification`` of a ``DarknetConfig``: ``timm_model`` is a ``Darknet19``."""

    config_class = DarknetConfig
    config: DarknetConfig

    def __init__(self, config: DarknetConfig):
        super().__init__(config)
        if not isinstance(self.timm_model, Darknet19):
            raise TypeError(f"Expected timm to build a Darknet19, got {type(self.timm_model).__name__}")


AutoConfig.register(DarknetConfig.model_type, DarknetConfig, exist_ok=True)
AutoModelForImageClassification.register(DarknetConfig, DarknetForImageClassification, exist_ok=True)
# save_pretrained copies this file and darknet.py beside the weights and writes their auto_map into config.json.
DarknetConfig.register_for_auto_class()
DarknetForImageClassification.register_for_auto_class("AutoModelForImageClassification")
