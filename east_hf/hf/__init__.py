"""The Hugging Face layer, each part a thin layer over ``east_hf.core``, in the order a run flows:

- ``data``: loading through ``datasets``, relabelling, splits, and rows turned into model inputs;
- ``models``: timm / transformers models (Darknet-19, the tabular MLP, LoRA adapters);
- ``config``: ``EASTConfig`` (``TrainingArguments`` plus the surrogate's and the annealing's settings), its checks,
  and the builder that turns a config and the data's facts into what the trainer trains with;
- ``training``: ``EASTTrainer``, the annealing callback and what the trainer composes (evaluation from additive
  statistics, checkpoints and resumes, non-finite stops, the checks of what it is given);
- ``metrics``: the evaluate modules and ``compute_metrics``;
- ``cards``: the model card of a run;
- ``predict``: predictions from a saved run (``Predictor``) and the inputs it reads.

Beside them: ``decision_rule`` (the rule a run tunes on validation and records), ``devices`` (what a process runs
on, and sums across processes), ``secret_masking`` (what never reaches a file or a log line) and ``package_data``
(the recipes and card templates, installed or in a source tree).
"""
