"""``east_hf.train``, deprecated: the module is ``east_hf.scripts.east_train``.

Re-exports its public names and warns on import (FutureWarning); the old path is removed in east_hf 0.5.
"""

import warnings

from east_hf.scripts.east_train import *  # noqa: F403
from east_hf.scripts.east_train import __all__  # noqa: F401

warnings.warn(
    "east_hf.train is deprecated: import from east_hf.scripts.east_train; the old path is removed in east_hf 0.5",
    FutureWarning,
    stacklevel=2,
)

if __name__ == "__main__":  # the script itself moved: say where, rather than exit 0 having run nothing
    raise SystemExit("python -m east_hf.train is removed: run `east-train` or `python -m east_hf.scripts.east_train`")
