"""Which model a run trains: ``ModelArguments`` and ``build_model`` (a timm architecture, a checkpoint, or the MLP)."""

from __future__ import annotations

import difflib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TimmWrapperConfig

from east_hf.core.validation import check_range
from east_hf.hf.data.messages import listed
from east_hf.hf.models import (
    TabularMLPConfig,
    TabularMLPForClassification,
    create_image_model,
    image_classifier_from_pretrained,
    label_maps,
)
from east_hf.hf.models.lora import PEFT_EXTRA
from east_hf.hf.models.text import (
    CHECKED_TEXTS,
    TEXT_TINY,
    check_tokenizer,
    text_tiny_model,
    train_wordpiece_tokenizer,
)

__all__ = [
    "DEFAULT_IMAGE_MODEL",
    "MULTI_LABEL",
    "TABULAR_MODEL",
    "ModelArguments",
    "attach_data_config",
    "build_model",
    "split_names",
]

logger = logging.getLogger(__name__)

TABULAR_MODEL = "tabular_mlp"
MULTI_LABEL = "multi_label_classification"  # transformers' config.problem_type of a sigmoid per label
DEFAULT_IMAGE_MODEL = "darknet19"  # the paper's image architecture (its Appendix E)


LOCAL_DIR, HF_HUB = "local-dir:", "hf-hub:"  # timm.create_model's prefixes for a local folder and a Hub id


@dataclass
class ModelArguments:
    """Which model: a timm architecture (random init), a Hub or local checkpoint (new head), or the tabular MLP."""

    _argument_group_name = "model"

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "timm architecture, Hub id or checkpoint folder (timm's hf-hub: and local-dir: prefixes too), "
            "tabular_mlp or text_tiny; default: darknet19 / tabular_mlp / text_tiny (images / tables / texts)."
        },
    )
    model_revision: str = field(default="main", metadata={"help": "Revision of a Hub checkpoint."})
    hidden_sizes: list[int] = field(
        default_factory=lambda: [512, 256, 128],
        metadata={"help": "Hidden layer widths of tabular_mlp (paper: 512 256 128)."},
    )
    dropout: float | None = field(
        default=None,
        metadata={"help": "Dropout of tabular_mlp's hidden layers (default 0.25), or timm's drop_rate."},
    )

    # LoRA adapters (peft), named as trl.ModelConfig names them
    use_peft: bool = field(
        default=False,
        metadata={
            "help": "Fine-tune LoRA adapters of a pretrained checkpoint (and its head in full) instead of every "
            f"weight; needs peft ({PEFT_EXTRA})."
        },
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(
        default=32, metadata={"help": "LoRA alpha: the adapters are scaled by lora_alpha / lora_r."}
    )
    lora_dropout: float = field(default=0.05, metadata={"help": "Dropout on the LoRA adapters' inputs."})
    lora_target_modules: list[str] | None = field(
        default=None,
        metadata={
            "help": "Module names to adapt, space- or comma-separated (query value, or query,value), or all-linear; "
            "default: peft's for the architecture, else every linear layer but the head, else (a convolutional "
            "network) its ungrouped convolutions."
        },
    )

    def __post_init__(self):
        if self.dropout is not None:
            check_range("dropout", self.dropout, 0, 1, "[)")
        self.lora_target_modules = split_names(self.lora_target_modules)
        self.model_name_or_path = resolve_timm_prefix(self.model_name_or_path)
        check_weights(self.model_name_or_path)
        if self.use_peft:
            self._check_lora()

    def _check_lora(self) -> None:
        """LoRA adapts a pretrained checkpoint: refuse the models built from scratch, bad ranks, and a missing peft."""
        from east_hf.hf.models.lora import require_peft

        if not isinstance(self.lora_r, int) or self.lora_r < 1:
            raise ValueError(f"Expected lora_r an integer >= 1, got {self.lora_r!r}")
        check_range("lora_alpha", self.lora_alpha, 0, float("inf"), "()")
        check_range("lora_dropout", self.lora_dropout, 0, 1, "[)")
        name = self.model_name_or_path
        if name is None or name in (TABULAR_MODEL, TEXT_TINY) or _is_timm_architecture(name):
            raise ValueError(
                "Expected a pretrained checkpoint (a Hub id or a folder) with use_peft, "
                f"got {name or 'the default'!r}, which is built from scratch: LoRA adapts pretrained weights"
            )
        require_peft()


def split_names(names: str | list[str] | None) -> list[str] | None:
    """A list of names given as a YAML or command-line list, a comma list (``"query,value"``, as a YAML string or
    one command-line word) or both, as one list of names.

    >>> split_names(["query,value"]), split_names("query, value"), split_names(["query", "value"]), split_names(None)
    (['query', 'value'], ['query', 'value'], ['query', 'value'], None)
    """
    if names is None:
        return None
    items = [names] if isinstance(names, str) else list(names)
    return [part.strip() for item in items for part in str(item).split(",") if part.strip()] or None


def resolve_timm_prefix(name: str | None) -> str | None:
    """A checkpoint named as ``timm.create_model`` names it: ``local-dir:FOLDER`` is the folder (which must exist) and
    ``hf-hub:OWNER/NAME`` the Hub id; every loader here takes the plain form.

    >>> resolve_timm_prefix("hf-hub:timm/resnet18.a1_in1k"), resolve_timm_prefix("resnet18")
    ('timm/resnet18.a1_in1k', 'resnet18')
    """
    if name is None or not name.startswith((LOCAL_DIR, HF_HUB)):
        return name
    if name.startswith(HF_HUB):
        return name.removeprefix(HF_HUB)
    folder = os.path.expanduser(name.removeprefix(LOCAL_DIR))
    if not os.path.isdir(folder):
        raise ValueError(f"Expected {LOCAL_DIR}FOLDER to name a checkpoint folder, got {name!r}: no such folder")
    return folder


def check_weights(name: str | None) -> None:
    """Refuse, in one line before any data is read, a checkpoint folder without model weights (transformers would say
    it is neither a folder nor a Hub id). A LoRA adapter's folder (``adapter_config.json``) is left to peft."""
    if name is None or name in (TABULAR_MODEL, TEXT_TINY) or not os.path.isdir(name):
        return
    from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME

    weights = (SAFE_WEIGHTS_NAME, WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME)
    folder = Path(name)
    if any((folder / f).is_file() for f in (*weights, "adapter_config.json")):
        return
    held = sorted(p.name for p in folder.iterdir())
    raise ValueError(
        f"Expected model weights in checkpoint folder {name!r} ({', '.join(weights)}), got "
        f"{'an empty folder' if not held else 'no weights: it holds ' + listed(held, 'files')}; save the model into "
        "it with save_pretrained (or copy its weights file there), or name the folder that holds the weights"
    )


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _unreachable(kind: str, name: str, error: Exception) -> ValueError:
    if _offline():
        return ValueError(
            f"{kind} {name!r} is not a local folder and could not be reached on the Hub "
            "(HF_HUB_OFFLINE is set: only checkpoints already in the cache load)"
        )
    return ValueError(f"could not load {kind} {name!r}: {' '.join(str(error).split())}")


def _is_timm_architecture(name: str) -> bool:
    import timm

    return "/" not in name and not os.path.exists(name) and timm.is_model(name)


def _text_model(name: str, data, id2label, label2id, revision: str, max_length: int | None):
    """(model, tokenizer, base model id or None) for text: ``text_tiny`` from scratch, else a checkpoint."""
    if name == TEXT_TINY:
        from east_hf.hf.data.rows import read_column

        texts = read_column(data.train, data.text_column).to_pylist()
        if data.text_pair_column is not None:
            texts += read_column(data.train, data.text_pair_column).to_pylist()
        tokenizer = train_wordpiece_tokenizer(texts, max_length=max_length or 128)
        return text_tiny_model(tokenizer, id2label, max_length=max_length or 128), tokenizer, None
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name, revision=revision)
        config = AutoConfig.from_pretrained(name, revision=revision)
        check_tokenizer(name, tokenizer, getattr(config, "vocab_size", None), _first_texts(data))
        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # the head's report is the one line below
        try:
            model = _sequence_classifier(name, data.num_labels, id2label, label2id, revision)
        finally:
            transformers.logging.set_verbosity(verbosity)
    except OSError as e:
        raise _unreachable("model", name, e) from None
    has_head = any(a.endswith("ForSequenceClassification") for a in getattr(config, "architectures", None) or [])
    if not has_head or config.num_labels != data.num_labels:
        what = f"a head of {config.num_labels} classes" if has_head else "no classification head"
        logger.warning(f"{name} has {what}: a new head of {data.num_labels} classes is trained from scratch")
    return model, tokenizer, name


def _first_texts(data) -> list[str]:
    """The first ``CHECKED_TEXTS`` training texts, which a checkpoint's tokenizer is tried on (``check_tokenizer``)."""
    from east_hf.hf.data.rows import read_column

    return read_column(data.train, data.text_column).slice(0, CHECKED_TEXTS).to_pylist()


def build_model(
    model_args, data, revision: str = "main", max_length: int | None = None
) -> tuple[Any, Any, str | None]:
    """(model, processor or None, base model id or None) for the data's modality and ``ModelArguments``.

    Tables: ``tabular_mlp`` (``TabularMLPForClassification``, the paper's 512-256-128 MLP) or a saved checkpoint;
    the processor is the data's fitted ``TabularFeatureExtractor``, which the Trainer saves beside the model.
    Text: ``text_tiny`` (a small BERT and a WordPiece tokenizer trained on the training texts, ``max_length`` tokens
    long) or any ``AutoModelForSequenceClassification`` checkpoint with its ``AutoTokenizer``; the processor is the
    tokenizer. Images: a timm architecture name builds a randomly initialised ``TimmWrapperForImageClassification``;
    a Hub id or folder is fine-tuned with a new ``num_labels`` head and its own image processor.

    Multi-label data (``data.multi_label``): one logit per label (``num_labels`` = L, ``id2label`` the label names) and
    ``config.problem_type = "multi_label_classification"``, which transformers' models,
    ``TabularMLPForClassification``, ``pipeline()`` (sigmoid scores) and east_hf's trainer read as
    "a sigmoid per label".

    ``use_peft``: the checkpoint wrapped in LoRA adapters, its head trained in full (``east_hf.hf.models.lora``).
    """
    model, processor, base_model = _build_model(model_args, data, revision, max_length)
    if getattr(data, "multi_label", False):
        model.config.problem_type = MULTI_LABEL
    if getattr(model_args, "use_peft", False):
        from east_hf.hf.models.lora import lora_model

        model = lora_model(
            model, model_args.lora_r, model_args.lora_alpha, model_args.lora_dropout, model_args.lora_target_modules,
            text=data.modality == "text",
        )  # fmt: skip
    return model, processor, base_model


def _build_model(model_args, data, revision: str, max_length: int | None) -> tuple[Any, Any, str | None]:
    id2label, label2id = label_maps(data.num_labels, data.label_names)
    image = data.modality == "image"
    if data.modality == "text":
        name = model_args.model_name_or_path or TEXT_TINY
        if name == TABULAR_MODEL or (name != TEXT_TINY and _is_timm_architecture(name)):
            raise ValueError(f"model {name!r} does not take text: use {TEXT_TINY!r} or a text checkpoint")
        return _text_model(name, data, id2label, label2id, revision, max_length)
    name = model_args.model_name_or_path or (DEFAULT_IMAGE_MODEL if image else TABULAR_MODEL)
    if name == TABULAR_MODEL:
        if image:
            raise ValueError(
                f"model {TABULAR_MODEL!r} takes tabular data, got an image data set: "
                "use a timm architecture or an image checkpoint"
            )
        config = TabularMLPConfig(
            num_features=len(data.preprocessor.feature_names),
            hidden_sizes=list(model_args.hidden_sizes),
            dropout=0.25 if model_args.dropout is None else model_args.dropout,
            num_labels=data.num_labels,
            id2label=id2label,
            label2id=label2id,
        )
        return TabularMLPForClassification(config), data.preprocessor, None
    if image and _is_timm_architecture(name):
        extra = None if model_args.dropout is None else {"drop_rate": model_args.dropout}
        return create_image_model(name, data.num_labels, id2label, model_args=extra), None, None
    if "/" not in name and not os.path.exists(name):
        import timm

        close = difflib.get_close_matches(name, [TABULAR_MODEL, TEXT_TINY, *timm.list_models()], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown model {name!r}: not a timm architecture, {TABULAR_MODEL!r}, {TEXT_TINY!r}, "
            f"a local folder or a Hub id (owner/name){hint}"
        )
    try:
        if not image:
            model = _sequence_classifier(name, data.num_labels, id2label, label2id, revision)
            return model, data.preprocessor, name
        model = _image_classifier(name, data.num_labels, id2label, revision)
        processor = None
        if not isinstance(model.config, TimmWrapperConfig):  # timm checkpoints keep their data config
            from transformers import AutoImageProcessor

            processor = AutoImageProcessor.from_pretrained(name, revision=revision)
    except OSError as e:
        raise _unreachable("model", name, e) from None
    return model, processor, name


def _image_classifier(name: str, num_labels: int, id2label, revision: str):
    """An image checkpoint with a head for the data's classes; a head of another size is replaced, said in one line
    as for text (transformers' load report would list the head's weights in a table)."""
    import transformers
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(name, revision=revision)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        model = image_classifier_from_pretrained(name, num_labels, id2label, revision=revision)
    finally:
        transformers.logging.set_verbosity(verbosity)
    if config.num_labels != num_labels:
        logger.warning(
            f"{name} has a head of {config.num_labels} classes: "
            f"a new head of {num_labels} classes is trained from scratch"
        )
    return model


def attach_data_config(model, data_config: dict[str, Any] | None) -> None:
    """Store the timm data config used for training in ``config.pretrained_cfg``: ``config.json`` then reloads
    with ``AutoImageProcessor.from_pretrained`` (``TimmWrapperImageProcessor``) into the same transforms."""
    if data_config is None or not isinstance(model.config, TimmWrapperConfig):
        return
    base = dict(getattr(model.timm_model, "pretrained_cfg", None) or {})
    base.pop("num_classes", None)  # the pretrained head's size, stale after a new head
    model.config.pretrained_cfg = {**base, **data_config}


def _sequence_classifier(name: str, num_labels: int, id2label, label2id, revision: str | None):
    """``AutoModelForSequenceClassification`` of a checkpoint with a head for the data's classes: a head of another
    size is replaced (``ignore_mismatched_sizes``)."""
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(
        name, num_labels=num_labels, id2label=id2label, label2id=label2id, ignore_mismatched_sizes=True,
        revision=revision,
    )  # fmt: skip
