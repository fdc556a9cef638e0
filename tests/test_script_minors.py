"""east-compare and east-cache: the interrupt line of a comparison, multi-label variants, a read-only cache."""

import errno
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABULAR = ROOT / "recipes" / "breast_cancer_imbalanced_f1.yaml"
COMPARE_LINE = (
    "east-compare: interrupted; run the same command again to go on (finished runs are kept, an interrupted one "
    "resumes from its last complete checkpoint)"
)


def test_a_comparison_interrupted_inside_a_run_says_to_run_the_same_east_compare_again(tmp_path, capsys, monkeypatch):
    """Ctrl-C while one of its runs trains: east-compare's line, not the east-train command that resumes that run."""
    from east_hf.scripts import east_compare

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("east_hf.scripts.east_train._run", interrupted)
    with pytest.raises(SystemExit) as exc:
        east_compare.main([str(TABULAR), "--losses", "ce", "--output_dir", str(tmp_path / "cmp")])
    assert exc.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == COMPARE_LINE


@pytest.mark.parametrize("flags", ["--loss dice", "--east_loss=ldam", "--loss ce --loss dice"])
def test_a_single_label_variant_on_multi_label_data_is_refused_before_any_run(flags):
    from east_hf.scripts.compare_plan import parse_variants

    with pytest.raises(ValueError) as error:
        parse_variants("ce", [f"mine:{flags}"], multi_label=True)
    loss = flags.split()[-1].split("=")[-1]
    assert str(error.value) == (
        f"Expected multi-label losses among {['east', 'ce', 'wce', 'la', 'asl', 'focal']} for multi-label data, got "
        f"{loss!r} in variant 'mine' (single-label only)"
    )
    assert parse_variants(None, ["mine:--loss dice"], multi_label=False) == {"mine": ["--loss", "dice"]}


def test_east_cache_clear_on_a_read_only_cache_is_one_plain_line(capsys, monkeypatch):
    from east_hf.hf.data import cache_store
    from east_hf.scripts.east_cache import main

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", "/cache/east_hf/src-1")

    monkeypatch.setattr(cache_store, "clear", read_only)
    with pytest.raises(SystemExit) as exc:
        main(["clear"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "east-cache: error: Expected a writable cache to clear, got a read-only file system at /cache/east_hf/src-1 "
        "(EROFS): nothing more was removed; make the folder writable, or remove it yourself"
    ), err
