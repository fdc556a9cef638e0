"""``east_hf.models``, deprecated: the module is ``east_hf.hf.models``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
Submodules are not re-exported: ``east_hf.models.<module>`` is ``east_hf.hf.models.<module>``.
"""

import warnings

from east_hf.hf.models import *  # noqa: F403
from east_hf.hf.models import __all__  # noqa: F401

warnings.warn(
    "east_hf.models is deprecated: import from east_hf.hf.models; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)
