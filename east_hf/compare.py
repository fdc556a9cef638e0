"""``east_hf.compare``, deprecated: the module is ``east_hf.scripts.east_compare``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.scripts.east_compare import *  # noqa: F403
from east_hf.scripts.east_compare import __all__  # noqa: F401

warnings.warn(
    "east_hf.compare is deprecated: import from east_hf.scripts.east_compare; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)

if __name__ == "__main__":  # the script itself moved: say where, rather than exit 0 having run nothing
    raise SystemExit(
        "python -m east_hf.compare is removed: run `east-compare` or `python -m east_hf.scripts.east_compare`"
    )
