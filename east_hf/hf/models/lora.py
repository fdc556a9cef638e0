"""LoRA adapters (``peft``) on the classifier a run fine-tunes, and the files that rebuild it from its base checkpoint.

``lora_model`` wraps a pretrained classifier in a ``peft`` model: low-rank adapters on ``target_modules`` (peft's own
default for the architecture where it has one, else every linear layer but the head: peft's ``"all-linear"``), and
the classification head trained in full through ``modules_to_save`` (a new head has no pretrained weights to adapt).
A text classifier gets peft's ``SEQ_CLS`` task type, so ``peft.AutoPeftModelForSequenceClassification`` loads the
saved adapter; any other model is saved with peft's auto mapping and loads with ``peft.AutoPeftModel``.

The Trainer saves a peft model as peft does: ``adapter_config.json`` (which names the base checkpoint) and
``adapter_model.safetensors`` (the adapters and the head), with no ``config.json``: a ``config.json`` beside the
adapter would make transformers read the folder as a whole model. What the run changed in the base checkpoint's
config (the number of labels, their names, the problem type, the folded decision offsets, the text columns) is
written to ``CLASSIFIER_CONFIG_NAME`` instead. Its keys that the base config has (``num_labels``, ``id2label``,
``label2id``, ``problem_type``, a timm model's ``model_args``) are the keyword arguments that rebuild the run's
classifier from the base (``loading_kwargs``), ``AutoPeftModelForSequenceClassification.from_pretrained(run,
num_labels=3, id2label=..., label2id=..., ignore_mismatched_sizes=True)`` (the card writes them out); the ``east_*``
keys are east_hf's records, which ``load_peft_run`` (``east_hf.hf.models.load_pretrained``) sets on the loaded
model's config.

An adapter is only right on the base it was trained on. A local base is named by its absolute path in
``adapter_config.json`` (a relative path would load whatever sits there from where the adapter is loaded), and
``BASE_WEIGHTS_KEY`` in ``classifier_config.json`` records the names, shapes and hashes of the base weights the
adapters apply to; ``load_peft_run`` refuses a base whose weights differ (another model, or the same folder edited)
in one line (``AdapterBaseError``).

A timm model keeps its preprocessing in its ``config.json`` (``pretrained_cfg``), which an adapter folder has not:
the save writes it as the image processor's ``preprocessor_config.json`` (``TimmWrapperImageProcessor``), so
``AutoImageProcessor.from_pretrained(adapter_folder)`` loads it as it loads a full fine-tune's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = [
    "ADAPTER_CONFIG_NAME",
    "AdapterBaseError",
    "BASE_WEIGHTS_KEY",
    "adapter_files",
    "base_weights",
    "check_base_weights",
    "CLASSIFIER_CONFIG_NAME",
    "default_target_modules",
    "PEFT_EXTRA",
    "classifier_config",
    "is_peft_model",
    "is_peft_run",
    "load_peft_run",
    "loading_kwargs",
    "lora_model",
    "require_peft",
    "resolve_base_path",
    "write_classifier_config",
    "write_image_processor",
]

ADAPTER_CONFIG_NAME = "adapter_config.json"  # peft's name for an adapter's settings
CLASSIFIER_CONFIG_NAME = "classifier_config.json"
# classifier_config.json: the base checkpoint the adapter was saved on and, per base weight its adapters apply to,
# [shape, hash]: what load_peft_run checks the loaded base against
BASE_WEIGHTS_KEY = "east_base_weights"
IMAGE_PROCESSOR_NAME = "preprocessor_config.json"  # transformers' name for an image processor's settings
PEFT_EXTRA = "pip install peft, or pip install '.[peft]' in east_hf's clone"  # east_hf installs from a clone
# Keys of a config that say how it was saved, not what the classifier is: left out of the classifier's config.
_BOOKKEEPING = frozenset(
    {"_name_or_path", "architectures", "transformers_version", "dtype", "torch_dtype", "auto_map"}
)


def require_peft(what: str = "--use_peft") -> None:
    """One line naming the extra where ``peft`` is not installed."""
    try:
        import peft  # noqa: F401
    except ImportError as e:
        raise ValueError(f"Expected the peft package for {what} ({PEFT_EXTRA}), got ImportError: {e}") from None


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` is a ``peft`` model (a ``PeftModel`` or one of its task classes)."""
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


def _module_name(model: nn.Module, module: nn.Module) -> str:
    return next(name for name, m in model.named_modules() if m is module)


def _inside(name: str, owner: str) -> bool:
    return name == owner or name.startswith(f"{owner}.")


def _short_names(model: nn.Module, chosen: list[str]) -> list[str]:
    """``chosen`` module names as peft matches them (a name, or the end of a name after a dot): each module's own
    name (``conv_pw``) where every module of that name is chosen, else its full name."""
    leaves: dict[str, set[str]] = {}
    for name, _ in model.named_modules():
        leaves.setdefault(name.rsplit(".", 1)[-1], set()).add(name)
    picked = set(chosen)
    return sorted({n.rsplit(".", 1)[-1] if leaves[n.rsplit(".", 1)[-1]] <= picked else n for n in chosen})


_ADAPTABLE = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Embedding)  # layers peft's LoRA wraps
_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


def default_target_modules(model: nn.Module, head: str) -> list[str] | str | None:
    """LoRA's target modules where none are given: None (peft's default) for an architecture peft knows (BERT's
    ``query`` and ``value``); else ``"all-linear"`` (every linear layer but the head) where the model has linear
    layers besides its head (a ViT); else its convolutions that are neither grouped (depthwise) nor a subclass that
    pads in its forward (timm's ``Conv2dSame``), whose padding peft's LoRA convolution does not copy: a
    convolutional network's (an EfficientNet's pointwise ``conv_pw``, ``conv_pwl`` and ``conv_head``).
    A model with none of these is a one-line ``ValueError`` naming the layers it has."""
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING

    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type in TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING:
        return None
    body = [(name, m) for name, m in model.named_modules() if name and not _inside(name, head)]
    if any(isinstance(m, nn.Linear) for _, m in body):
        return "all-linear"
    convs = [name for name, m in body if type(m) in (nn.Conv1d, nn.Conv2d, nn.Conv3d) and m.groups == 1]
    if convs:
        return _short_names(model, convs)
    raise ValueError(
        f"Expected linear layers or convolutions besides the head in {type(model).__name__} for LoRA's default "
        f"target modules, got none: pass --lora_target_modules naming layers to adapt ({_adaptable(model, head)})"
    )


def _adaptable(model: nn.Module, head: str) -> str:
    """The names of ``model``'s layers LoRA can adapt, for a message: ``its layers LoRA can adapt: a, b, ...``."""
    names = sorted(
        {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, _ADAPTABLE) and not _inside(n, head)}
    )
    shown = ", ".join(names[:12]) + (f", ... ({len(names)} names)" if len(names) > 12 else "")
    return f"its layers LoRA can adapt: {shown}" if names else "it has no layer LoRA can adapt"


def _check_target_modules(model: nn.Module, target_modules: list[str], head: str) -> None:
    """Each name in ``target_modules`` must match a module of ``model`` as peft matches it (the whole name, or its
    end after a dot), and not the head (which trains in full): else a one-line ``ValueError`` naming the layers."""
    names = [name for name, _ in model.named_modules() if name]
    unknown = [t for t in target_modules if not any(n == t or n.endswith(f".{t}") for n in names)]
    in_head = [t for t in target_modules if t not in unknown and all(
        _inside(n, head) for n in names if n == t or n.endswith(f".{t}")
    )]  # fmt: skip
    if unknown or in_head:
        what = (
            f"{', '.join(map(repr, unknown))}: no module has that name"
            if unknown
            else f"{', '.join(map(repr, in_head))}: the head, which trains in full"
        )
        raise ValueError(
            f"Expected lora_target_modules naming layers of {type(model).__name__} (space- or comma-separated), got "
            f"{what} ({_adaptable(model, head)})"
        )


def lora_model(
    model: nn.Module,
    r: int,
    alpha: float,
    dropout: float,
    target_modules: list[str] | str | None = None,
    text: bool = False,
) -> nn.Module:
    """``model`` with LoRA adapters of rank ``r`` (scaled by ``alpha / r``, ``dropout`` on their inputs) on
    ``target_modules`` and its classification head (``east_hf.hf.models.classifier_head``) trained in full.

    ``target_modules``: module names as peft matches them, or peft's ``"all-linear"``; None: ``default_target_modules``
    (peft's default for the architecture, else every linear layer but the head, else a convolutional network's
    ungrouped convolutions). A name that matches no module is a one-line ``ValueError`` naming the model's layers.
    Batch norm layers train in full too (peft's ``modules_to_save``, as peft's own examples for convolutional
    networks do): their running statistics move in training, and the adapter then saves them. ``text`` gives the
    adapter peft's ``SEQ_CLS`` task type. A local base checkpoint is named by its absolute path in the adapter's
    config (``resolve_base_path``)."""
    require_peft()
    from peft import LoraConfig, TaskType, get_peft_model

    from east_hf.hf.models import classifier_head

    head = _module_name(model, classifier_head(model))
    if isinstance(target_modules, (list, tuple)) and list(target_modules) == ["all-linear"]:
        target_modules = "all-linear"  # peft's shorthand, which the command line gives as a one-name list
    if not target_modules:
        target_modules = default_target_modules(model, head)
    elif not isinstance(target_modules, str):
        _check_target_modules(model, list(target_modules), head)
    norms = [n for n, m in model.named_modules() if isinstance(m, _BATCH_NORMS) and not _inside(n, head)]
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=target_modules,
        exclude_modules=[head] if target_modules == "all-linear" else None,
        modules_to_save=[head, *(_short_names(model, norms) if norms else [])],
        task_type=TaskType.SEQ_CLS if text else None,
    )
    try:
        wrapped = get_peft_model(model, config)
    except ValueError as e:  # e.g. a regular expression that matches no module
        message = " ".join(str(e).split())
        raise ValueError(
            f"Expected LoRA target modules peft can adapt in {type(model).__name__} ({_adaptable(model, head)}), "
            f"got {target_modules!r}: peft says: {message}"
        ) from None
    resolve_base_path(wrapped)
    return wrapped


def resolve_base_path(model: nn.Module) -> None:
    """Name a peft model's local base checkpoint by its absolute path in its adapter configs: a relative path in
    ``adapter_config.json`` would load whatever sits at that path from where the adapter is loaded. A Hub id (no
    such folder here) is kept as given."""
    for config in model.peft_config.values():
        name = config.base_model_name_or_path
        if name and not os.path.isabs(name) and os.path.isdir(name):
            config.base_model_name_or_path = os.path.abspath(name)


class AdapterBaseError(ValueError):
    """The base checkpoint a saved adapter is loaded onto is not the one it was saved on."""


def _digest(tensor: torch.Tensor) -> str:
    """A hash of ``tensor``'s values: floating point rounded to bfloat16 first, so that a base loaded in another
    float dtype (bfloat16 instead of float32) hashes the same."""
    values = tensor.detach()
    if values.is_floating_point():
        values = values.to(torch.bfloat16)
    data = values.contiguous().cpu().reshape(-1).view(torch.uint8).numpy()
    return hashlib.sha256(data.tobytes()).hexdigest()[:16]


def base_weights(model: nn.Module) -> dict[str, list] | None:
    """``{name: [shape, hash]}`` of the base weights a peft model's LoRA layers apply to (each adapted layer's own
    weight and bias, named as in the base model): what identifies the base an adapter belongs to. None where a
    process holds no whole weight to hash (a sharded or offloaded model)."""
    from peft.tuners.lora import LoraLayer

    record: dict[str, list] = {}
    for name, module in model.get_base_model().named_modules():
        if not isinstance(module, LoraLayer):
            continue
        for key, weight in module.get_base_layer().named_parameters(recurse=False):
            if type(weight.data) is not torch.Tensor or weight.is_meta or hasattr(weight, "ds_id"):
                return None  # a DTensor shard, a DeepSpeed placeholder, an offloaded weight
            record[f"{name}.{key}"] = [list(weight.shape), _digest(weight)]
    return record


def check_base_weights(model: nn.Module, recorded: dict[str, Any], run: str | os.PathLike) -> None:
    """Refuse (``AdapterBaseError``, one line) a peft model loaded from ``run`` whose base weights are not those the
    adapter was saved on (``recorded``: ``classifier_config.json``'s ``BASE_WEIGHTS_KEY``), naming both checkpoints
    and what differs: a missing or extra adapted weight, a shape, or the values."""
    loaded = base_weights(model)
    saved = recorded.get("weights")
    if loaded is None or not isinstance(saved, dict):
        return
    base = model.peft_config[model.active_adapter].base_model_name_or_path
    missing, extra = sorted(saved.keys() - loaded.keys()), sorted(loaded.keys() - saved.keys())
    shapes = [k for k in sorted(saved.keys() & loaded.keys()) if list(saved[k][0]) != loaded[k][0]]
    values = [k for k in sorted(saved.keys() & loaded.keys()) if k not in shapes and saved[k][1] != loaded[k][1]]
    if missing or extra:
        names = missing or extra
        what = f"{'lacks' if missing else 'has extra'} adapted weights ({len(names)}, first {names[0]})"
    elif shapes:
        k = shapes[0]
        what = f"has {k} of shape {tuple(loaded[k][0])}, the run's base {tuple(saved[k][0])} ({len(shapes)} differ)"
    elif values:
        what = f"has other values in {len(values)} of the {len(saved)} adapted weights (first {values[0]})"
    else:
        return
    raise AdapterBaseError(
        f"Expected the base checkpoint the adapter in {run} was saved on ({recorded.get('checkpoint')}), got "
        f"{base}, which {what}: put that checkpoint back there, or point base_model_name_or_path in "
        f"{Path(run) / ADAPTER_CONFIG_NAME} at a copy of it"
    )


def classifier_config(model: nn.Module) -> dict[str, Any]:
    """The values of ``model``'s config (a peft model's base) that differ from its base checkpoint's config, and the
    labels always: what makes ``from_pretrained(base)`` build this classifier (``loading_kwargs`` picks the keys it
    takes). The base checkpoint is the one named in the adapter's config (a local folder or the Hub cache)."""
    from transformers import AutoConfig

    config = model.config
    base = model.peft_config[model.active_adapter].base_model_name_or_path
    try:
        original = AutoConfig.from_pretrained(base).to_dict()
    except OSError:  # the base is out of reach: everything but the bookkeeping
        original = {}
    changed = {k: v for k, v in config.to_dict().items() if k not in _BOOKKEEPING and original.get(k, object()) != v}
    labels = {"num_labels": config.num_labels, "id2label": config.id2label, "label2id": config.label2id}
    return {**json.loads(json.dumps(labels)), **changed}  # the labels always (a timm config writes label_names)


def write_classifier_config(model: nn.Module, folder: str | os.PathLike) -> Path:
    """Write ``classifier_config(model)`` to ``folder / CLASSIFIER_CONFIG_NAME`` (the labels as JSON writes them:
    ``id2label`` keys are strings, as in a ``config.json``), with the record of the base it was saved on
    (``BASE_WEIGHTS_KEY``: the checkpoint, and ``base_weights``)."""
    record = classifier_config(model)
    weights = base_weights(model)
    if weights is not None:
        base = model.peft_config[model.active_adapter].base_model_name_or_path
        record[BASE_WEIGHTS_KEY] = {"checkpoint": base, "weights": weights}
    path = Path(folder) / CLASSIFIER_CONFIG_NAME
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def write_image_processor(model: nn.Module, folder: str | os.PathLike) -> Path | None:
    """For a timm model (``TimmWrapperForImageClassification``), write its preprocessing (``config.pretrained_cfg``,
    timm's data config the run trained with) as a ``TimmWrapperImageProcessor``'s ``preprocessor_config.json``, which
    ``AutoImageProcessor.from_pretrained(folder)`` loads; a full model's ``config.json`` carries the same. Nothing
    for any other model."""
    config = getattr(model, "config", None)
    pretrained_cfg = getattr(config, "pretrained_cfg", None)
    if getattr(config, "model_type", None) != "timm_wrapper" or not isinstance(pretrained_cfg, dict):
        return None
    processor = {
        "image_processor_type": "TimmWrapperImageProcessor",
        "architecture": config.architecture,
        "pretrained_cfg": pretrained_cfg,
    }
    path = Path(folder) / IMAGE_PROCESSOR_NAME
    path.write_text(json.dumps(processor, indent=2, sort_keys=True) + "\n")
    return path


@contextlib.contextmanager
def adapter_files(model: nn.Module, folder: str | os.PathLike, should_save: bool = True) -> Iterator[None]:
    """Around a save of ``model`` into ``folder``: for a peft model, name a local base by its absolute path
    (``resolve_base_path``) before it, write ``classifier_config.json`` (and a timm model's image processor,
    ``write_image_processor``) after it, and leave the folder's ``README.md`` as it was before (peft's
    ``save_pretrained`` writes its card template there, over the card east_hf writes, or where there was none).
    Nothing for any other model, or where ``should_save`` is False (a process other than the one that saves)."""
    if not should_save or not is_peft_model(model):
        yield
        return
    resolve_base_path(model)
    card = Path(folder) / "README.md"
    before = card.read_bytes() if card.is_file() else None
    yield
    write_classifier_config(model, folder)
    write_image_processor(model.get_base_model(), folder)
    if before is None:
        card.unlink(missing_ok=True)
    else:
        card.write_bytes(before)


def is_peft_run(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds a saved adapter (``adapter_config.json``) rather than a whole model."""
    folder = Path(folder)
    return (folder / ADAPTER_CONFIG_NAME).is_file() and not (folder / "config.json").is_file()


def load_peft_run(folder: str | os.PathLike, **kwargs) -> nn.Module:
    """The classifier a LoRA run saved in ``folder``: its base checkpoint (named in ``adapter_config.json``) with the
    run's ``classifier_config.json`` and the adapter loaded, through peft's Auto classes (``kwargs`` go to
    ``from_pretrained``). A base whose weights are not those the adapter was saved on is refused in one line
    (``check_base_weights``, ``AdapterBaseError``)."""
    require_peft("a LoRA run's adapter")
    from peft import AutoPeftModel, AutoPeftModelForSequenceClassification, PeftConfig
    from transformers import AutoConfig

    folder = Path(folder)
    path = folder / CLASSIFIER_CONFIG_NAME
    overrides = json.loads(path.read_text()) if path.is_file() else {}
    recorded = overrides.pop(BASE_WEIGHTS_KEY, None)
    peft_config = PeftConfig.from_pretrained(folder)
    known = loading_kwargs(overrides, AutoConfig.from_pretrained(peft_config.base_model_name_or_path))
    auto = AutoPeftModelForSequenceClassification if peft_config.task_type == "SEQ_CLS" else AutoPeftModel
    model = auto.from_pretrained(folder, **{**known, **kwargs})
    if isinstance(recorded, dict):
        check_base_weights(model, recorded, folder)
    for key in overrides.keys() - known.keys():  # east_hf's records (text columns, folded offsets): on the config
        setattr(model.config, key, overrides[key])
    return model


def loading_kwargs(classifier: dict[str, Any], base_config: Any) -> dict[str, Any]:
    """The keyword arguments of ``from_pretrained`` that rebuild a run's classifier from its base checkpoint: the
    keys of its ``classifier_config`` that the base config has (``num_labels``, the labels, a timm model's
    ``model_args``; not east_hf's records), and ``ignore_mismatched_sizes`` (a head of another size in the base
    checkpoint is replaced by the adapter's)."""
    labels = ("num_labels", "id2label", "label2id", "problem_type")  # what any config takes, its base's out of reach
    known = {
        k: v for k, v in classifier.items() if k in labels or (base_config is not None and hasattr(base_config, k))
    }
    if "id2label" in known:  # JSON's string keys, as transformers' own reading of a config.json turns them back
        known["id2label"] = {int(k): v for k, v in known["id2label"].items()}
    return {**known, "ignore_mismatched_sizes": True}
