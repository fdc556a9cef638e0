"""Models for EAST experiments, and thin helpers to fine-tune image classifiers.

Importing this package registers ``darknet19`` / ``darknet19_tiny`` in timm, model type ``"east_darknet"``
(``DarknetConfig``, ``DarknetForImageClassification``: transformers' ``TimmWrapper`` of a Darknet-19) with
``AutoConfig`` and ``AutoModelForImageClassification``, model type ``"east_tabular_mlp"`` with ``AutoConfig`` and
``AutoModelForSequenceClassification``, and the MLP's input encoding ``TabularFeatureExtractor``
(``east_hf.hf.data.tabular_features``) with ``AutoFeatureExtractor``. A checkpoint of either reloads with
``load_pretrained(path)``, or with transformers' Auto classes after ``import east_hf.hf.models``; where east_hf is
not installed, with the Auto classes and ``trust_remote_code=True``, since ``save_pretrained`` copies the model's
code beside its weights (see ``east_hf.hf.models.darknet_hf`` and ``east_hf.hf.models.tabular``). timm's own
``timm.create_model("local-dir:RUN")`` has no such route: timm discovers no architecture it does not ship, so it needs
``import east_hf.hf.models`` first.
"""

from collections.abc import Mapping, Sequence

from torch import nn
from transformers import (
    AutoConfig,
    AutoFeatureExtractor,
    AutoModelForImageClassification,
    AutoModelForSequenceClassification,
    PreTrainedModel,
    TimmWrapperConfig,
    TimmWrapperForImageClassification,
)

from east_hf.hf.data.tabular_features import TabularFeatureExtractor
from east_hf.hf.models.darknet import Darknet19
from east_hf.hf.models.darknet_hf import DarknetConfig, DarknetForImageClassification, is_darknet
from east_hf.hf.models.tabular import TabularMLPConfig, TabularMLPForClassification

# A run folder's preprocessor_config.json names TabularFeatureExtractor: registered, AutoFeatureExtractor finds the
# class here (and for a TabularMLPConfig without one); saved, the class file travels with an auto_map
# (east_hf.hf.data.tabular_features), so AutoFeatureExtractor.from_pretrained(folder, trust_remote_code=True) also
# works where east_hf is not installed.
AutoFeatureExtractor.register(TabularMLPConfig, TabularFeatureExtractor, exist_ok=True)

__all__ = [
    "Darknet19",
    "DarknetConfig",
    "DarknetForImageClassification",
    "TabularFeatureExtractor",
    "TabularMLPConfig",
    "TabularMLPForClassification",
    "classifier_head",
    "create_image_model",
    "image_classifier_from_pretrained",
    "label_maps",
    "load_pretrained",
]


def label_maps(
    num_labels: int, id2label: Mapping[int, str] | Sequence[str] | None = None
) -> tuple[dict[int, str], dict[str, int]]:
    """(id2label, label2id) for ``num_labels`` classes; ``id2label`` may be a list of names (``ClassLabel.names``).

    >>> label_maps(2, ["cat", "dog"])
    ({0: 'cat', 1: 'dog'}, {'cat': 0, 'dog': 1})
    """
    if id2label is None:
        id2label = {i: f"LABEL_{i}" for i in range(num_labels)}
    elif isinstance(id2label, Mapping):
        id2label = {int(i): str(name) for i, name in id2label.items()}
    else:
        id2label = dict(enumerate(map(str, id2label)))
    if sorted(id2label) != list(range(num_labels)):
        raise ValueError(f"Expected id2label for the ids 0..{num_labels - 1}, got ids {sorted(id2label)}")
    return id2label, {name: i for i, name in id2label.items()}


def image_classifier_from_pretrained(
    name_or_path: str,
    num_labels: int,
    id2label: Mapping[int, str] | Sequence[str] | None = None,
    **kwargs,
) -> PreTrainedModel:
    """A Hub or local image classifier with a fresh ``num_labels``-way head (the old head is dropped).

    A thin ``AutoModelForImageClassification.from_pretrained(..., ignore_mismatched_sizes=True)``; ``kwargs``
    go to it (``dtype``, ``revision``, ...). For ``timm/...`` checkpoints it also replaces the config's stale
    ``label_names``, so ``save_pretrained`` keeps the new class names.
    """
    id2label, label2id = label_maps(num_labels, id2label)
    revision = {"revision": kwargs["revision"]} if "revision" in kwargs else {}
    config = AutoConfig.from_pretrained(
        name_or_path, num_labels=num_labels, id2label=id2label, label2id=label2id, **revision
    )
    if isinstance(config, TimmWrapperConfig):
        # A folder written by timm's save_for_hf keeps num_classes in model_args, which TimmWrapper passes to timm
        # beside num_labels ("multiple values for keyword argument 'num_classes'"): the new head's size wins. And
        # {} rather than None, which timm's create_model("local-dir:...") cannot read in the saved fine-tune.
        config.model_args = {k: v for k, v in (config.model_args or {}).items() if k != "num_classes"}
        if is_darknet(config.architecture) and not isinstance(config, DarknetConfig):
            # A darknet folder written by a stock TimmWrapper: the fine-tune is a DarknetForImageClassification,
            # which saves its code beside the weights (east_hf.hf.models.darknet_hf).
            stock = {k: v for k, v in config.to_dict().items() if k != "model_type"}
            config = DarknetConfig.from_dict(stock, num_labels=num_labels, id2label=id2label, label2id=label2id)
    model = AutoModelForImageClassification.from_pretrained(
        name_or_path, config=config, ignore_mismatched_sizes=True, **kwargs
    )
    if isinstance(model.config, TimmWrapperConfig):
        # TimmWrapperConfig.to_dict writes a checkpoint's old `label_names` over the new id2label (setdefault):
        # without this, the saved fine-tune would reload with the pretrained class names.
        model.config.label_names = list(id2label.values())
    return model


def create_image_model(
    name: str,
    num_labels: int,
    id2label: Mapping[int, str] | Sequence[str] | None = None,
    model_args: dict | None = None,
) -> TimmWrapperForImageClassification:
    """A randomly initialised ``TimmWrapperForImageClassification`` of timm architecture ``name``.

    ``name`` is any timm model name (``"darknet19"``, ``"darknet19.cifar"``, ``"resnet18"``); nothing is
    downloaded. A Darknet-19 is a ``DarknetForImageClassification``, whose saved folder carries its code and loads
    with ``trust_remote_code=True`` where east_hf is not installed. ``model_args`` go to ``timm.create_model``
    (e.g. ``{"drop_rate": 0.2}``). The config keeps the architecture's ``pretrained_cfg`` (its input size, mean,
    std) and ``model_args`` (``{}`` rather than None), which timm's own ``create_model("local-dir:...")`` needs to
    read a saved folder (see ``east_hf.hf.models.darknet``).

    >>> model = create_image_model("darknet19_tiny", num_labels=3)
    >>> model.config.architecture, model.config.num_labels, type(model).__name__
    ('darknet19_tiny', 3, 'DarknetForImageClassification')
    """
    id2label, label2id = label_maps(num_labels, id2label)
    config_class, model_class = (
        (DarknetConfig, DarknetForImageClassification)
        if is_darknet(name)
        else (TimmWrapperConfig, TimmWrapperForImageClassification)
    )
    config = config_class(architecture=name, id2label=id2label, label2id=label2id, model_args=dict(model_args or {}))
    model = model_class(config)
    cfg = {k: v for k, v in model.timm_model.pretrained_cfg.items() if k != "num_classes"}  # the new head's size wins
    model.config.pretrained_cfg = cfg
    return model


def load_pretrained(path: str, **kwargs) -> PreTrainedModel:
    """Reload a ``save_pretrained`` directory of a model this package defines or registers.

    An image config (an ``east_darknet`` or any ``TimmWrapper`` folder) loads with
    ``AutoModelForImageClassification``, anything else (an ``east_tabular_mlp``, a text model) with
    ``AutoModelForSequenceClassification``; a LoRA run's adapter (``adapter_config.json``) with peft's Auto classes on
    its base checkpoint (``east_hf.hf.models.lora.load_peft_run``). ``kwargs`` go to ``from_pretrained``.
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING

    from east_hf.hf.models.lora import is_peft_run, load_peft_run

    if is_peft_run(path):
        return load_peft_run(path, **kwargs)
    config = AutoConfig.from_pretrained(path)
    image = not isinstance(config, TabularMLPConfig) and type(config) in MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING
    auto_cls = AutoModelForImageClassification if image else AutoModelForSequenceClassification
    return auto_cls.from_pretrained(path, **kwargs)


def classifier_head(model: nn.Module, num_classes: int | None = None) -> nn.Module:
    """The layer whose outputs are the model's logits: an ``nn.Linear`` or a 1x1 ``nn.Conv2d`` with a bias.

    Found as timm's ``get_classifier()`` (a ``TimmWrapper`` model or a timm model), else the model's ``classifier``
    attribute (transformers' convention, and ``TabularMLPForClassification``), else the last such layer; of a peft
    model's head trained in full (``modules_to_save``), the copy that trains. Adding a
    vector to its bias adds it to every logit row (for darknet19's 1x1 conv, before the global average pool, which
    commutes with it), which is how a tuned decision rule is folded into a saved model
    (``east_hf.core.decision.rule``).

    >>> head = classifier_head(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    >>> head.out_features
    3
    """
    num_classes = num_classes or getattr(getattr(model, "config", None), "num_labels", None)
    owner = getattr(model, "timm_model", model)
    if callable(getattr(owner, "get_classifier", None)):
        head = owner.get_classifier()
    elif isinstance(getattr(model, "classifier", None), nn.Module):
        head = model.classifier
    else:
        head = model
    trained = getattr(head, "modules_to_save", None)  # peft's ModulesToSaveWrapper: the copy that trains and saves
    if isinstance(trained, nn.ModuleDict) and head.active_adapter in trained:
        head = trained[head.active_adapter]
    if not isinstance(head, (nn.Linear, nn.Conv2d)):  # a container: its last linear or conv layer
        layers = [m for m in head.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
        head = layers[-1] if layers else head
    width = head.out_features if isinstance(head, nn.Linear) else getattr(head, "out_channels", None)
    is_1x1 = not isinstance(head, nn.Conv2d) or tuple(head.kernel_size) == (1, 1)
    if not isinstance(head, (nn.Linear, nn.Conv2d)) or not is_1x1 or (num_classes and width != num_classes):
        raise ValueError(
            f"Expected a classifier head (nn.Linear or 1x1 nn.Conv2d with {num_classes or 'C'} outputs) in "
            f"{type(model).__name__}, got {type(head).__name__}"
        )
    if head.bias is None:
        raise ValueError(
            f"Expected a classifier head with a bias to fold a decision rule into, got {type(head).__name__}"
            f"(bias=False) in {type(model).__name__}; apply DecisionRule.predict(logits) to its logits instead"
        )
    return head
