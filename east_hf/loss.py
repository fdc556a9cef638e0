"""``east_hf.loss``, deprecated: the module is ``east_hf.core.loss``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.core.loss import *  # noqa: F403
from east_hf.core.loss import __all__  # noqa: F401

warnings.warn(
    "east_hf.loss is deprecated: import from east_hf.core.loss; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
