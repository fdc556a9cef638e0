"""Configuration: ``EASTConfig`` (``east_config``), the checks of its fields (``checks``), how its fields map onto
the core objects that own them (``fields``), and the builder of what ``EASTTrainer`` trains with (``build``)."""
