"""Darknet-19

The YOLOv2 classification network: 18 convolutions (3x3, with 1x1 bottlenecks between them), each followed by
BatchNorm and LeakyReLU(0.1) (timm's ``ConvNormAct``), five 2x2 max-pools, and the original classifier, the 19th
conv: a 1x1 convolution to ``num_classes`` on every cell of the last feature map, then global average pooling.
20,842,376 parameters with 1000 classes (the paper's ~20.8 M). No weights are published for it here.

Paper:
* `YOLO9000: Better, Faster, Stronger` - https://arxiv.org/abs/1612.08242

Importing ``east_hf.hf.models`` registers ``darknet19`` and ``darknet19_tiny`` (width 1/8, one conv per stage, for
fast tests) in timm's registry, with the pretrained cfgs ``darknet19`` (3x224x224, ImageNet) and
``darknet19.cifar`` (3x32x32, CIFAR-10 mean/std, 10 classes). Five pools need inputs of at least 32x32, where the
last feature map is 1x1.

>>> import timm, torch
>>> model = timm.create_model("darknet19_tiny", num_classes=10)
>>> model(torch.randn(2, 3, 32, 32)).shape
torch.Size([2, 10])

Through transformers: ``DarknetForImageClassification`` (``east_hf.hf.models.darknet_hf``, what ``east-train`` and
``create_image_model`` build) is transformers' ``TimmWrapperForImageClassification`` with its own model type, and
``save_pretrained`` copies this file beside the weights, so a saved folder loads where east_hf is not installed::

    model = AutoModelForImageClassification.from_pretrained("out", trust_remote_code=True)

A stock ``TimmWrapperForImageClassification(TimmWrapperConfig(architecture="darknet19"))`` saves no code: its folder
reloads only after ``import east_hf.hf.models``. Without it, transformers' ``_create_timm_model_with_error_handling``
(``transformers/models/timm_wrapper/modeling_timm_wrapper.py``) turns timm's ``RuntimeError: Unknown model
(darknet19)`` into ``ImportError: The model architecture 'darknet19' is not supported in your version of timm``:
upgrading timm does not help, importing ``east_hf.hf.models`` does. Neither timm (no entry-point discovery) nor the
wrapper (a private module-level function) offers a hook to register the name lazily.

With timm alone, ``import east_hf.hf.models`` first: timm discovers no architecture it does not ship, so
``timm.create_model("local-dir:out")`` stops with ``Unknown model (darknet19)`` until this file has registered it
(the Auto classes with ``trust_remote_code=True`` need no import: they load the folder's own copy of this file). A
folder saved by ``east-train`` or by ``create_image_model(...).save_pretrained`` is then a timm ``local-dir``
checkpoint (its ``config.json`` carries ``architecture``, ``num_classes``,
``model_args`` and the ``pretrained_cfg`` it was trained with; ``checkpoint_filter_fn`` drops the wrapper's
``timm_model.`` key prefix)::

    import east_hf.hf.models, timm
    model = timm.create_model("local-dir:out", pretrained=True)  # the trained head, num_classes from the folder
    timm.create_model("darknet19", pretrained=True, num_classes=10,
                      pretrained_cfg_overlay=dict(file="out/model.safetensors"))  # the same weights

Note that ``TimmWrapperForImageClassification(config)`` re-initialises every conv with N(0, 0.02) and every
BatchNorm with (1, 0) (transformers' ``_init_weights``); ``timm.create_model`` keeps PyTorch's default init.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import ConvNormAct, SelectAdaptivePool2d, get_device_dtype
from timm.models import build_model_with_cfg, checkpoint_seq, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices

__all__ = ["Darknet19"]

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)

# (out_chs, kernel_size) of each conv, one tuple per stage; every stage but the first opens with a 2x2 max-pool.
DARKNET19_LAYERS = (
    ((32, 3),),
    ((64, 3),),
    ((128, 3), (64, 1), (128, 3)),
    ((256, 3), (128, 1), (256, 3)),
    ((512, 3), (256, 1), (512, 3), (256, 1), (512, 3)),
    ((1024, 3), (512, 1), (1024, 3), (512, 1), (1024, 3)),
)


class Darknet19(nn.Module):
    """Darknet-19 with its conv 1x1 + global-average-pool classifier.

    Args:
        layers: (out_chs, kernel_size) per conv, one tuple per stage; stages 1.. open with a 2x2 max-pool.
        width_multiplier: scales every conv's width (``darknet19_tiny`` uses 1/8).
        in_chans: input channels; other widths are refused with a ``ValueError``.
        num_classes: classifier outputs; 0 gives a headless model whose ``forward`` returns pooled features.
        global_pool: timm pool type ('avg' as the paper; '' keeps the map).
        drop_rate: dropout before the classifier.
    """

    def __init__(
        self,
        layers: Sequence[Sequence[tuple[int, int]]] = DARKNET19_LAYERS,
        width_multiplier: float = 1.0,
        in_chans: int = 3,
        num_classes: int = 1000,
        global_pool: str = "avg",
        drop_rate: float = 0.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        self.num_classes = num_classes
        self.in_chans = in_chans
        self.drop_rate = drop_rate
        self.grad_checkpointing = False

        stages = []
        self.feature_info = []
        prev_chs = in_chans
        for stage_idx, stage_layers in enumerate(layers):
            modules = [nn.MaxPool2d(kernel_size=2, stride=2)] if stage_idx > 0 else []
            for out_chs, kernel_size in stage_layers:
                out_chs = max(1, round(out_chs * width_multiplier))
                # timm's conv-bn-act; its norm keeps the name `bn`, so the keys are stages.i.j.conv / stages.i.j.bn
                modules.append(
                    ConvNormAct(
                        prev_chs,
                        out_chs,
                        kernel_size,
                        act_layer="leaky_relu",
                        act_kwargs={"negative_slope": 0.1},
                        **dd,
                    )
                )
                prev_chs = out_chs
            stages.append(nn.Sequential(*modules))
            self.feature_info.append(dict(num_chs=prev_chs, reduction=2**stage_idx, module=f"stages.{stage_idx}"))
        self.stages = nn.Sequential(*stages)
        self.min_input_size = 2 ** (len(stages) - 1)
        self.num_features = self.head_hidden_size = prev_chs

        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Conv2d(self.num_features, num_classes, 1, **dd) if num_classes > 0 else nn.Identity()
        self.global_pool = SelectAdaptivePool2d(pool_type=global_pool, flatten=bool(global_pool))

    @torch.jit.ignore
    def group_matcher(self, coarse=False):
        return dict(stem=r"^stages\.0", blocks=r"^stages\.(\d+)" if coarse else r"^stages\.(\d+)\.(\d+)")

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable=True):
        self.grad_checkpointing = enable

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: str | None = None):
        dd = get_device_dtype(self)
        self.num_classes = num_classes
        if global_pool is not None:
            self.global_pool = SelectAdaptivePool2d(pool_type=global_pool, flatten=bool(global_pool))
            self.global_pool.train(self.training)
        self.head = nn.Conv2d(self.num_features, num_classes, 1, **dd) if num_classes > 0 else nn.Identity()
        self.head.train(self.training)

    def _check_input(self, x: torch.Tensor) -> None:
        if x.ndim != 4 or x.shape[1] != self.in_chans:
            raise ValueError(
                f"Expected input with {self.in_chans} channels (B, {self.in_chans}, H, W), got shape {tuple(x.shape)}"
            )
        if min(x.shape[-2:]) < self.min_input_size:
            raise ValueError(
                f"Expected H and W of at least {self.min_input_size} ({len(self.stages) - 1} 2x2 max-pools), "
                f"got shape {tuple(x.shape)}"
            )

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: int | list[int] | None = None,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ) -> list[torch.Tensor] | tuple[torch.Tensor, list[torch.Tensor]]:
        """Forward features that returns intermediates.

        Args:
            x: (B, in_chans, H, W) images.
            indices: Take last n stages if int, all if None, select matching indices if sequence.
                Index i is the output of stage i (reduction 2**i).
            norm: Unused, no final norm.
            stop_early: Stop iterating over stages when last desired intermediate hit.
            output_fmt: Only 'NCHW'.
            intermediates_only: Only return intermediate features.
        """
        if output_fmt != "NCHW":
            raise ValueError(f"Expected output_fmt 'NCHW', got {output_fmt!r}")
        self._check_input(x)
        intermediates = []
        take_indices, max_index = feature_take_indices(len(self.stages), indices)
        stages = self.stages if torch.jit.is_scripting() or not stop_early else self.stages[: max_index + 1]
        for i, stage in enumerate(stages):
            x = stage(x)
            if i in take_indices:
                intermediates.append(x)
        if intermediates_only:
            return intermediates
        return x, intermediates

    def prune_intermediate_layers(
        self,
        indices: int | list[int] = 1,
        prune_norm: bool = False,
        prune_head: bool = True,
    ) -> list[int]:
        """Prune the stages after the last requested intermediate (and the head); returns the kept indices."""
        take_indices, max_index = feature_take_indices(len(self.stages), indices)
        self.stages = self.stages[: max_index + 1]
        if prune_head:
            self.reset_classifier(0, "")
        return take_indices

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, in_chans, H, W) -> (B, num_features, H / 32, W / 32)."""
        self._check_input(x)
        if self.grad_checkpointing and not torch.jit.is_scripting():
            return checkpoint_seq(self.stages, x)
        return self.stages(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """x: (B, num_features, h, w) -> (B, num_classes), or (B, num_features) with ``pre_logits``."""
        x = self.head_drop(x)
        if pre_logits:
            return self.global_pool(x)
        # Darknet's order: a 1x1 conv classifies every cell, then the scores are averaged (equal to GAP + linear).
        return self.global_pool(self.head(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.forward_features(x)
        x = self.forward_head(x)
        return x


def checkpoint_filter_fn(state_dict: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """Accept the state dict of a transformers ``TimmWrapper`` (every key prefixed ``timm_model.``, as east-train
    saves darknet19) as well as timm's own: timm's loaders (``local-dir:``, ``pretrained_cfg_overlay=dict(file=...)``)
    then load a saved run's ``model.safetensors`` as they are."""
    prefix = "timm_model."
    return {k[len(prefix) :] if k.startswith(prefix) else k: v for k, v in state_dict.items()}


def _create_darknet19(variant, pretrained=False, **kwargs):
    out_indices = kwargs.pop("out_indices", (1, 2, 3, 4, 5))
    return build_model_with_cfg(
        Darknet19,
        variant,
        pretrained,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(out_indices=out_indices, feature_cls="getter"),
        **kwargs,
    )


def _cfg(url="", **kwargs):
    return {
        "url": url,
        "num_classes": 1000,
        "input_size": (3, 224, 224),
        "pool_size": (7, 7),
        "crop_pct": 0.875,
        "interpolation": "bilinear",
        "mean": IMAGENET_DEFAULT_MEAN,
        "std": IMAGENET_DEFAULT_STD,
        "first_conv": "stages.0.0.conv",
        "classifier": "head",
        **kwargs,
    }


def _cifar_cfg(**kwargs):
    return _cfg(
        num_classes=10,
        input_size=(3, 32, 32),
        pool_size=(1, 1),
        crop_pct=1.0,
        mean=CIFAR10_MEAN,
        std=CIFAR10_STD,
        **kwargs,
    )


# No url / hf_hub_id: these cfgs describe the inputs, there are no weights to download.
default_cfgs = generate_default_cfgs(
    {
        "darknet19": _cfg(),
        "darknet19.cifar": _cifar_cfg(),
        "darknet19_tiny": _cfg(),
        "darknet19_tiny.cifar": _cifar_cfg(),
    }
)


@register_model
def darknet19(pretrained=False, **kwargs) -> Darknet19:
    model_args = dict(layers=DARKNET19_LAYERS, **kwargs)
    return _create_darknet19("darknet19", pretrained, **model_args)


@register_model
def darknet19_tiny(pretrained=False, **kwargs) -> Darknet19:
    model_args = dict(layers=tuple(stage[:1] for stage in DARKNET19_LAYERS), width_multiplier=0.125, **kwargs)
    return _create_darknet19("darknet19_tiny", pretrained, **model_args)
