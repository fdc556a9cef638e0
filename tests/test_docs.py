"""The documentation site builds in strict mode: every page in the nav, every link and anchor, every API reference
(``::: east_hf...``) and every included file resolves (``make docs`` runs the same build). Every committed result
the documentation names exists, and the pages describe the present (the release history is in CHANGELOG.md)."""

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
# the pages that name committed results; docs/api/ is generated from the docstrings
PAGES = [
    ROOT / "README.md",
    ROOT / "benchmarks" / "README.md",
    ROOT / "docs" / "index.md",
    *sorted((ROOT / "docs" / "guide").glob("*.md")),
    *sorted((ROOT / "docs" / "results").glob("*.md")),
]


def _expand_braces(path: str) -> list[str]:
    """``a/{b,c}/d`` -> ``a/b/d``, ``a/c/d`` (the shell's brace expansion, as the pages write paths)."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_result_a_page_names_is_committed(page):
    missing = []
    for path in re.findall(r"benchmarks/results/[\w./{},*-]*[\w/*}]", page.read_text()):
        for one in _expand_braces(path):
            if not any(ROOT.glob(one.rstrip("/"))):
                missing.append(one)
    assert not missing, f"{page.name} names results that are not in the tree: {missing}"


def test_the_pages_and_the_nav_carry_no_release_versions():
    # "0.2's default", "the 0.1 defaults", a nav title "Quality (0.2):", "release 0.1", "What changed in 0.3"
    version_talk = re.compile(r"\b0\.\d+'s\b|\b0\.\d+ defaults?\b|\(0\.\d+\): \S+\.md|release 0\.|What changed in")
    found = [
        f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
        for page in [*PAGES, ROOT / "mkdocs.yml"]
        for n, line in enumerate(page.read_text().splitlines(), 1)
        if version_talk.search(line)
    ]
    assert not found, "\n".join(found)


def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("index.html", "api/trainer/index.html", "api/decision/index.html", "results/quality/index.html"):
        assert (site / page).is_file(), page
    reference = (site / "api" / "trainer" / "index.html").read_text()
    assert "EASTConfig" in reference and "TemperatureAnnealingCallback" in reference
    # docs/griffe_east.py: EASTConfig's field groups become lists, doctests become code blocks
    assert "<strong>Parameters that control the surrogate</strong>" in reference
    assert 'class="language-pycon"' in (site / "api" / "loss" / "index.html").read_text()
