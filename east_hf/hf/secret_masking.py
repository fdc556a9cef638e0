"""Secrets masked out of everything east_hf writes: run records, result tables, model cards, log lines.

A setting, flag or environment variable is a secret when its name holds the word token, password or secret
(``hub_token``, ``HF_TOKEN``, ``--api-token``), not ``tokens`` or ``tokenizer``. Its value becomes ``***``.
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["MASK", "is_secret", "mask_secrets"]

# the word token, password or secret in a name (hub_token, HF_TOKEN, --api-token), not tokens or tokenizer
_SECRET = re.compile(r"(?<![a-z0-9])(?:token|password|passwd|secret)(?![a-z0-9])", re.IGNORECASE)
_FLAG_VALUE = re.compile(r"(?<![\w-])(--?[\w-]+)(=|\s+)(?!-)(\S+)")
MASK = "***"


def is_secret(name: str) -> bool:
    """True for a setting, flag or environment variable named like a secret (``hub_token``, ``HF_TOKEN``, ...).

    >>> is_secret("hub_token"), is_secret("--api-token"), is_secret("include_num_input_tokens_seen")
    (True, True, False)
    """
    return _SECRET.search(str(name)) is not None


def _environment_secrets() -> list[str]:
    """The values of environment variables named like a secret (``HF_TOKEN``); short ones (flags, ``1``) are not."""
    return [v for k, v in os.environ.items() if is_secret(k) and len(v) >= 8]


def mask_secrets(value: Any) -> Any:
    """``value`` with every secret replaced by ``***``, so that no file or log east_hf writes holds one.

    Masked: the string value of a mapping key named like a secret (token, password, secret), the argument after
    such a flag in a list of arguments (``["--hub_token", "hf_x"]``) or after ``=`` (``--hub_token=hf_x``), the same
    inside a command-line string, and the value of an environment secret (``HF_TOKEN``) wherever it appears.
    Lists, tuples and mappings are masked throughout; other values are returned as they are.

    >>> mask_secrets(["--hub_token", "hf_x", "--seed", "1", "--api-token=abc"])
    ['--hub_token', '***', '--seed', '1', '--api-token=***']
    >>> mask_secrets({"hub_token": "hf_x", "average_tokens_across_devices": True,
    ...               "cmd": "east-train r.yaml --hub_token hf_x"})
    {'hub_token': '***', 'average_tokens_across_devices': True, 'cmd': 'east-train r.yaml --hub_token ***'}
    """
    if isinstance(value, str):
        value = _FLAG_VALUE.sub(lambda m: m[1] + m[2] + MASK if is_secret(m[1]) else m[0], value)
        for secret in _environment_secrets():
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {k: MASK if is_secret(k) and isinstance(v, str) and v else mask_secrets(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out = [mask_secrets(v) for v in value]
        for i, arg in enumerate(value[:-1]):
            if isinstance(arg, str) and arg.startswith("-") and "=" not in arg and is_secret(arg):
                out[i + 1] = MASK
        return type(value)(out)
    return value
