"""``east_hf.decision``, deprecated: the module is ``east_hf.core.decision``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.core.decision import *  # noqa: F403
from east_hf.core.decision import __all__  # noqa: F401

warnings.warn(
    "east_hf.decision is deprecated: import from east_hf.core.decision; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
