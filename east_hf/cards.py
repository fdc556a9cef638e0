"""``east_hf.cards``, deprecated: the module is ``east_hf.hf.cards``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.hf.cards import *  # noqa: F403
from east_hf.hf.cards import __all__  # noqa: F401

warnings.warn(
    "east_hf.cards is deprecated: import from east_hf.hf.cards; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
