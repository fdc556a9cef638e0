"""``east_hf.cli``, deprecated: the module is ``east_hf.scripts.arguments``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.scripts.arguments import *  # noqa: F403
from east_hf.scripts.arguments import __all__  # noqa: F401

warnings.warn(
    "east_hf.cli is deprecated: import from east_hf.scripts.arguments; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
