"""``east_hf.callbacks``, deprecated: the module is ``east_hf.hf.callbacks``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.hf.callbacks import *  # noqa: F403
from east_hf.hf.callbacks import __all__  # noqa: F401

warnings.warn(
    "east_hf.callbacks is deprecated: import from east_hf.hf.callbacks; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
