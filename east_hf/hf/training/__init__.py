"""Training: ``EASTTrainer`` (``trainer``), the annealing callback (``callbacks``), and what the trainer composes:
evaluation from additive statistics (``evaluation``), the data's facts it reads (``dataset_stats``), the checks of
what it is given (``inputs``), checkpoints and resumes (``checkpoints``, ``resume``, ``weight_copies``),
non-finite stops (``nonfinite``), the warnings about the model it keeps (``kept_model_warnings``) and the sentence
that says how training ended (``ending``)."""
