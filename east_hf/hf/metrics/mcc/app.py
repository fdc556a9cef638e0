"""The Hub Space's page for this metric: evaluate's widget over the script beside this file."""

import evaluate
from evaluate.utils import launch_gradio_widget

launch_gradio_widget(evaluate.load("mcc.py"))
