"""The Hugging Face layer: EASTConfig / EASTTrainer, the annealing callback, model cards, evaluate modules, models and
data, each a thin layer over ``east_hf.core``."""
