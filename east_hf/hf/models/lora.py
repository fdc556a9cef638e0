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
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import nn

__all__ = [
    "ADAPTER_CONFIG_NAME",
    "adapter_files",
    "CLASSIFIER_CONFIG_NAME",
    "PEFT_EXTRA",
    "classifier_config",
    "is_peft_model",
    "is_peft_run",
    "load_peft_run",
    "loading_kwargs",
    "lora_model",
    "require_peft",
    "write_classifier_config",
]

ADAPTER_CONFIG_NAME = "adapter_config.json"  # peft's name for an adapter's settings
CLASSIFIER_CONFIG_NAME = "classifier_config.json"
PEFT_EXTRA = "pip install 'east_hf[peft]'"
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


def lora_model(
    model: nn.Module,
    r: int,
    alpha: float,
    dropout: float,
    target_modules: list[str] | None = None,
    text: bool = False,
) -> nn.Module:
    """``model`` with LoRA adapters of rank ``r`` (scaled by ``alpha / r``, ``dropout`` on their inputs) on
    ``target_modules`` and its classification head (``east_hf.hf.models.classifier_head``) trained in full.

    ``target_modules`` None: peft's default for the architecture (BERT's ``query`` and ``value``), or, where peft has
    none (a timm model, for one), every linear layer but the head (``"all-linear"``). A convolutional network has few
    linear layers: name its convolutions (``lora_target_modules``) to adapt them. ``text`` gives the adapter peft's
    ``SEQ_CLS`` task type."""
    require_peft()
    from peft import LoraConfig, TaskType, get_peft_model
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING

    from east_hf.hf.models import classifier_head

    head = _module_name(model, classifier_head(model))
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    exclude = None
    if not target_modules and model_type not in TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING:
        target_modules, exclude = "all-linear", [head]
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=target_modules or None,
        exclude_modules=exclude,
        modules_to_save=[head],
        task_type=TaskType.SEQ_CLS if text else None,
    )
    try:
        return get_peft_model(model, config)
    except ValueError as e:  # e.g. a target module name the model does not have
        message = " ".join(str(e).split())
        raise ValueError(f"Expected LoRA target modules of {type(model).__name__}, got {message}") from None


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
    ``id2label`` keys are strings, as in a ``config.json``)."""
    path = Path(folder) / CLASSIFIER_CONFIG_NAME
    path.write_text(json.dumps(classifier_config(model), indent=2, sort_keys=True) + "\n")
    return path


@contextlib.contextmanager
def adapter_files(model: nn.Module, folder: str | os.PathLike, should_save: bool = True) -> Iterator[None]:
    """Around a save of ``model`` into ``folder``: for a peft model, write ``classifier_config.json`` after it, and
    leave the folder's ``README.md`` as it was before (peft's ``save_pretrained`` writes its card template there,
    over the card east_hf writes, or where there was none). Nothing for any other model, or where ``should_save`` is
    False (a process other than the one that saves)."""
    if not should_save or not is_peft_model(model):
        yield
        return
    card = Path(folder) / "README.md"
    before = card.read_bytes() if card.is_file() else None
    yield
    write_classifier_config(model, folder)
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
    ``from_pretrained``)."""
    require_peft("a LoRA run's adapter")
    from peft import AutoPeftModel, AutoPeftModelForSequenceClassification, PeftConfig
    from transformers import AutoConfig

    folder = Path(folder)
    path = folder / CLASSIFIER_CONFIG_NAME
    overrides = json.loads(path.read_text()) if path.is_file() else {}
    peft_config = PeftConfig.from_pretrained(folder)
    known = loading_kwargs(overrides, AutoConfig.from_pretrained(peft_config.base_model_name_or_path))
    auto = AutoPeftModelForSequenceClassification if peft_config.task_type == "SEQ_CLS" else AutoPeftModel
    model = auto.from_pretrained(folder, **{**known, **kwargs})
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
