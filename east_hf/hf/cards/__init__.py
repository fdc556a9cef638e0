"""Model cards of a run: the card itself (``model_card``), its YAML metadata (``metadata``), the annealing plot
(``plot``) and where a card is written and signed (``files``)."""
