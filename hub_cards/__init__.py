"""Model-card templates for east_hf (Jinja, rendered with huggingface_hub.ModelCard.from_template)."""
