"""The command-line scripts ``east-train`` and ``east-compare``, over the Hugging Face layer."""
