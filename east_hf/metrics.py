"""``east_hf.metrics``, deprecated: the module is ``east_hf.hf.metrics``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
Submodules are not re-exported: ``east_hf.metrics.<module>`` is ``east_hf.hf.metrics.<module>``.
"""

import warnings

from east_hf.hf.metrics import *  # noqa: F403
from east_hf.hf.metrics import __all__  # noqa: F401

warnings.warn(
    "east_hf.metrics is deprecated: import from east_hf.hf.metrics; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
