"""east-train recipes (YAML), installed as east_hf.recipes: `east-train NAME` runs recipes/NAME.yaml."""
