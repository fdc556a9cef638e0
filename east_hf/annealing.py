"""``east_hf.annealing``, deprecated: the module is ``east_hf.core.annealing``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.core.annealing import *  # noqa: F403
from east_hf.core.annealing import __all__  # noqa: F401

warnings.warn(
    "east_hf.annealing is deprecated: import from east_hf.core.annealing; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
