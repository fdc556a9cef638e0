"""``east_hf.config``, deprecated: the module is ``east_hf.hf.config``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.hf.config import *  # noqa: F403
from east_hf.hf.config import __all__  # noqa: F401

warnings.warn(
    "east_hf.config is deprecated: import from east_hf.hf.config; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
