"""Tiny models and data sets shared by the Trainer-level tests (CPU, offline, seconds)."""

from __future__ import annotations

import torch
from torch import nn


class TinyImages(torch.utils.data.Dataset):
    """Learnable synthetic images: the class is which of the 3 channels is brightest. (3, size, size) floats."""

    def __init__(self, n: int = 64, size: int = 16, num_classes: int = 3, seed: int = 0, imbalance: bool = False):
        g = torch.Generator().manual_seed(seed)
        weights = torch.tensor([0.6, 0.3, 0.1][:num_classes]) if imbalance else torch.ones(num_classes)
        self.labels = torch.multinomial(weights, n, replacement=True, generator=g)
        self.images = torch.randn(n, 3, size, size, generator=g) * 0.5
        self.images[torch.arange(n), self.labels % 3] += 1.0

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"pixel_values": self.images[i], "labels": self.labels[i]}


class TinyTabular(torch.utils.data.Dataset):
    """Linearly separable-ish 3-class tabular data. input_values: (d,) floats."""

    def __init__(self, n: int = 96, d: int = 6, num_classes: int = 3, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, d, generator=g)
        w = torch.randn(d, num_classes, generator=g)
        self.y = (self.x @ w).argmax(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"input_values": self.x[i], "labels": self.y[i]}


class PlainClassifier(nn.Module):
    """A plain nn.Module that returns a logits tensor (no config, no .logits)."""

    def __init__(self, d: int = 6, num_classes: int = 3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, num_classes))

    def forward(self, input_values):
        return self.net(input_values)


def tiny_vit(num_labels: int = 3, size: int = 16):
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        image_size=size,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=num_labels,
        id2label={i: name for i, name in enumerate(["cat", "dog", "frog"][:num_labels])},
        label2id={name: i for i, name in enumerate(["cat", "dog", "frog"][:num_labels])},
    )
    return ViTForImageClassification(config)


def tiny_timm(num_labels: int = 3):
    from transformers import TimmWrapperConfig, TimmWrapperForImageClassification

    return TimmWrapperForImageClassification(TimmWrapperConfig(architecture="test_resnet", num_labels=num_labels))


def east_args(tmp_path, **overrides):
    from east_hf import EASTConfig

    defaults = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to=[],
        per_device_train_batch_size=16,
        per_device_eval_batch_size=16,
        learning_rate=1e-2,
        max_steps=10,
        logging_strategy="steps",  # TrainingArguments' step-based defaults: these tests count steps, not epochs
        logging_steps=5,
        eval_strategy="no",
        save_strategy="no",
        load_best_model_at_end=False,
        east_annealing=False,
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    defaults.update(overrides)
    return EASTConfig(**defaults)
