"""Test configuration: offline, deterministic, CPU."""

import os
import shutil
import tempfile

# Hub look-ups otherwise retry for up to a minute each on a machine without network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
# east_hf's data cache in a folder of the session's own (subprocesses inherit it), not the user's ~/.cache: the tests'
# temporary data files would otherwise stay listed there after pytest deletes them.
_OWN_CACHE = "EAST_HF_CACHE" not in os.environ
if _OWN_CACHE:
    os.environ["EAST_HF_CACHE"] = tempfile.mkdtemp(prefix="east_hf_test_cache_")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _session_cache():
    yield
    if _OWN_CACHE:
        shutil.rmtree(os.environ["EAST_HF_CACHE"], ignore_errors=True)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module's training tests (``pytestmark = pytest.mark.usefixtures("one_thread")``)."""
    # Two shared cores: intra-op threads only add contention for these tiny tensors.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
