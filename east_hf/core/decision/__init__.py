"""The decision-rule tuner: per-class logit offsets tuned for a metric. ``rule`` (its API: ``DecisionRule``,
``tune_logit_offsets``), ``sweep`` (one offset's sweep), ``scorers`` (candidate scoring), ``ascent`` (the coordinate
ascent and its work bound), ``logits`` (the validation logits in memory or in a temporary file) and ``multilabel``
(one offset per label)."""
