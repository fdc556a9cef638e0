"""Predictions from a saved run: ``Predictor`` and ``predict`` (``predictor``) and the inputs they read
(``inputs``)."""
