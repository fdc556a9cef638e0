"""``east_hf.trainer``, deprecated: the module is ``east_hf.hf.trainer``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.hf.trainer import *  # noqa: F403
from east_hf.hf.trainer import __all__  # noqa: F401

warnings.warn(
    "east_hf.trainer is deprecated: import from east_hf.hf.trainer; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
