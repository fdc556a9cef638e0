"""The documentation's Python snippets run as written (except those marked as needing the Hub): the quick start
page's and every other guide page's, and any in the README or the home page. The README is a user guide that links
to the quick start page for its examples; it keeps the set-up commands. The results pages hold measurements and shell
commands, not snippets, and are not run."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
QUICKSTART = ROOT / "docs" / "guide" / "quickstart.md"
GUIDE = sorted((ROOT / "docs" / "guide").glob("*.md"))
PAGES = [README, ROOT / "docs" / "index.md", *GUIDE]


def python_blocks(page: Path) -> list[str]:
    """Every ```python block of a page, except those marked "needs the Hub"."""
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    return [b for b in blocks if "needs the Hub" not in b]


CASES = [(page, i, code) for page in PAGES for i, code in enumerate(python_blocks(page))]


@pytest.mark.parametrize(
    "page, code", [(p, c) for p, _, c in CASES], ids=[f"{p.relative_to(ROOT)}:block{i}" for p, i, _ in CASES]
)
def test_snippet_runs(page, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the Trainer quick start writes runs/quickstart here
    namespace: dict = {}
    exec(compile(code, str(page), "exec"), namespace)
    if "trainer" in namespace:  # the Trainer quick start learned something
        metrics = namespace["trainer"].evaluate()
        assert metrics["eval_fbeta"] > 0.8 and (tmp_path / "runs" / "quickstart").is_dir()
    if "schedule" in namespace:  # the plain-PyTorch loop ran the annealing to its end
        assert namespace["schedule"].finished and namespace["schedule"].stage > 0


def test_the_quick_start_page_has_its_snippets_and_the_readme_links_to_it():
    code = "\n".join(python_blocks(QUICKSTART))
    assert len(python_blocks(QUICKSTART)) >= 3
    assert "EASTTrainer(" in code and "AnnealingSchedule(" in code  # the Trainer and the plain PyTorch loop
    assert "(docs/guide/quickstart.md)" in README.read_text()


def test_readme_has_the_setup_commands_a_pip_install_line_and_no_placeholder():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    assert re.search(r"^pip install (\.|-e )", text, flags=re.M), "a pip install line for one's own environment"
    assert "Python 3.10" in text and "torch 2.1" in text and "transformers 5" in text
    assert "PLACEHOLDER" not in text
