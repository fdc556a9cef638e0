"""The README's Python snippets run as written (except the one marked as needing the Hub)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"
BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S) if "needs the Hub" not in b]


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_snippet_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the Trainer quick start writes runs/quickstart here
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    if "trainer" in namespace:  # the Trainer quick start learned something
        metrics = namespace["trainer"].evaluate()
        assert metrics["eval_fbeta"] > 0.8 and (tmp_path / "runs" / "quickstart").is_dir()
    if "schedule" in namespace:  # the plain-PyTorch loop ran the annealing to its end
        assert namespace["schedule"].finished and namespace["schedule"].stage > 0


def test_readme_has_the_two_setup_commands_and_no_placeholder():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    assert "PLACEHOLDER" not in text
