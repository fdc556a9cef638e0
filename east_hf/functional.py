"""``east_hf.functional``, deprecated: the module is ``east_hf.core``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
Submodules are not re-exported: ``east_hf.functional.<module>`` is ``east_hf.core.<module>``.
"""

import warnings

from east_hf.core import *  # noqa: F403
from east_hf.core import __all__  # noqa: F401

warnings.warn(
    "east_hf.functional is deprecated: import from east_hf.core; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
