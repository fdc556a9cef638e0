"""``east_hf.data``, deprecated: the module is ``east_hf.hf.data``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
Submodules are not re-exported: ``east_hf.data.<module>`` is ``east_hf.hf.data.<module>``.
"""

import warnings

from east_hf.hf.data import *  # noqa: F403
from east_hf.hf.data import __all__  # noqa: F401

warnings.warn(
    "east_hf.data is deprecated: import from east_hf.hf.data; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
