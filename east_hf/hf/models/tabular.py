"""A tabular MLP classifier that is an ordinary transformers model.

``TabularMLPForClassification`` saves with ``save_pretrained`` (config.json + model.safetensors), reloads with
``AutoModelForSequenceClassification.from_pretrained`` once ``east_hf.hf.models`` is imported (this module registers
model type ``"east_tabular_mlp"`` with ``AutoConfig`` and ``AutoModelForSequenceClassification``), and trains in a
``Trainer`` like any sequence classifier.

Its input is ``input_features``: a float tensor (B, num_features). With ``datasets``, keep the features of a row in
one fixed-length float column named ``input_features`` (e.g. ``ds.map(lambda r: {"input_features": [r[c] for c in
cols]})``) and the class index in ``labels`` (or ``label``, which the default collator renames); the Trainer's
``remove_unused_columns`` drops every other column because ``forward`` takes only these two. From raw rows (text
columns, missing values), ``east_hf.hf.data.tabular_features.TabularFeatureExtractor`` builds ``input_features``: the
encoding ``east-train`` fits and saves beside the model.

>>> import torch
>>> config = TabularMLPConfig(num_features=4, hidden_sizes=(8,), num_labels=3)
>>> model = TabularMLPForClassification(config)
>>> out = model(input_features=torch.randn(5, 4), labels=torch.tensor([0, 1, 2, 0, 1]))
>>> out.logits.shape, out.loss.ndim
(torch.Size([5, 3]), 0)
"""

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModelForSequenceClassification, PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput

__all__ = ["TabularMLPConfig", "TabularMLPForClassification"]


class TabularMLPConfig(PreTrainedConfig):
    """Configuration of ``TabularMLPForClassification``.

    Args:
        num_features: width of one row of ``input_features``; required to build a model.
        hidden_sizes: widths of the hidden layers (Linear + ReLU + Dropout each); ``()`` gives logistic regression.
        dropout: dropout probability after every hidden layer, in [0, 1).
        num_labels, id2label, label2id: the classes, as for any transformers classifier.
    """

    model_type = "east_tabular_mlp"

    num_features: int | None = None
    hidden_sizes: list[int] | tuple[int, ...] = (512, 256, 128)
    dropout: float = 0.25

    def __post_init__(self, **kwargs):
        if self.num_features is not None and (isinstance(self.num_features, bool) or self.num_features < 1):
            raise ValueError(f"Expected num_features to be a positive int, got {self.num_features!r}")
        if any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in self.hidden_sizes):
            raise ValueError(f"Expected hidden_sizes to be positive ints, got {self.hidden_sizes!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"Expected dropout in [0, 1), got {self.dropout}")
        self.hidden_sizes = list(self.hidden_sizes)  # JSON gives a list back: keep save/reload configs equal
        super().__post_init__(**kwargs)
        if self.label2id is None:
            self.label2id = {name: i for i, name in self.id2label.items()}


class TabularMLPForClassification(PreTrainedModel):
    """MLP ``num_features -> hidden_sizes... -> num_labels`` with ReLU and dropout on the hidden layers.

    ``forward(input_features (B, num_features), labels (B,) | None)`` returns a ``SequenceClassifierOutput`` with
    ``logits`` (B, num_labels) and, when ``labels`` are given, the mean cross-entropy ``loss``. With
    ``config.problem_type == "multi_label_classification"`` the labels are (B, num_labels) multi-hot floats and the
    loss is the mean binary cross-entropy over the entries that count (-100 entries left out), as transformers'
    sequence classifiers do for that problem type.
    """

    config_class = TabularMLPConfig
    config: TabularMLPConfig
    main_input_name = "input_features"
    # forward takes no **kwargs: the Trainer must not pass num_items_in_batch to it
    accepts_loss_kwargs = False

    def __init__(self, config: TabularMLPConfig):
        super().__init__(config)
        if config.num_features is None:
            raise ValueError("Expected TabularMLPConfig.num_features (the width of input_features), got None")
        layers = []
        width = config.num_features
        for hidden in config.hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(config.dropout)]
            width = hidden
        self.mlp = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, config.num_labels)
        self.post_init()

    def _init_weights(self, module):
        # He init suits the ReLU layers; transformers' default N(0, 0.02) shrinks activations layer by layer.
        if isinstance(module, nn.Linear):
            init.kaiming_normal_(module.weight, nonlinearity="relu")
            init.zeros_(module.bias)

    def forward(
        self, input_features: torch.Tensor, labels: torch.LongTensor | None = None
    ) -> SequenceClassifierOutput:
        """input_features: (B, num_features), labels: (B,) class indices (multi-label: (B, num_labels) 0/1 floats)
        -> logits (B, num_labels)."""
        expected = self.config.num_features
        if input_features.ndim != 2 or input_features.shape[1] != expected:
            got = input_features.shape[-1] if input_features.ndim else None
            raise ValueError(
                f"Expected input_features of shape (B, {expected}) with {expected} features per row, "
                f"got {got} (shape {tuple(input_features.shape)})"
            )
        logits = self.classifier(self.mlp(input_features.to(self.classifier.weight.dtype)))
        if labels is None:
            return SequenceClassifierOutput(logits=logits)
        labels = labels.to(logits.device)
        if self.config.problem_type == "multi_label_classification":
            counted = labels != -100  # (B, num_labels): the entries that count
            loss = F.binary_cross_entropy_with_logits(logits[counted], labels[counted].to(logits.dtype))
        else:
            loss = F.cross_entropy(logits, labels.long())
        return SequenceClassifierOutput(loss=loss, logits=logits)


AutoConfig.register(TabularMLPConfig.model_type, TabularMLPConfig, exist_ok=True)
AutoModelForSequenceClassification.register(TabularMLPConfig, TabularMLPForClassification, exist_ok=True)
# save_pretrained also copies this file (it imports only torch and transformers) beside the weights and writes an
# auto_map into config.json, so a saved model loads where east_hf is not installed:
# AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).
TabularMLPConfig.register_for_auto_class()
TabularMLPForClassification.register_for_auto_class("AutoModelForSequenceClassification")
