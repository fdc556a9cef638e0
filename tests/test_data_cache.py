"""east_hf's data cache: keyed on content, checked before use, bounded, cleared by east-cache, image folders once."""

import hashlib
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import one_line_error, write_csv

from east_hf.hf.data import DataArguments, load_data
from east_hf.hf.data.fingerprint import file_sha256
from east_hf.scripts.east_cache import main as east_cache
from east_hf.scripts.run_record import data_fingerprint


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """east_hf's data cache in a folder of the test's own, and the datasets cache (where old versions kept prepared
    folders) in another."""
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.mktemp("datasets_cache"))
    folder = tmp_path_factory.mktemp("east_hf_cache")
    monkeypatch.setenv("EAST_HF_CACHE", str(folder))
    monkeypatch.delenv("EAST_HF_CACHE_VERSIONS", raising=False)
    return folder


def _rows(classes: list[str], n: int = 60) -> list[str]:
    return [f"{i * 0.1:.2f},{i % 7 * 0.3:.2f},{classes[i % len(classes)]}" for i in range(n)]


def _versions(cache: Path, kind: str) -> list[Path]:
    return sorted(cache.glob(f"*/{kind}-*"))


def _features(data) -> dict[str, np.ndarray]:
    return {s: getattr(data, s).with_format("numpy")[:]["input_features"] for s in ("train", "validation", "test")}


# ---- keyed on content: an edit that keeps the mtime is read ----
def test_a_csv_edited_in_place_with_its_mtime_restored_loads_the_new_rows(tmp_path):
    csv = write_csv(tmp_path / "d.csv", "x1,x2,label", _rows(["c0", "c1", "c2"]))
    args = DataArguments(dataset_name=str(csv))
    before, fingerprint = load_data(args), data_fingerprint(str(csv))
    assert before.label_names == ["c0", "c1", "c2"]
    stat = csv.stat()
    write_csv(csv, "x1,x2,label", _rows(["c0", "c1", "c1"]))  # the same size: c2 -> c1
    os.utime(csv, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # cp -p, rsync -t, touch -r
    assert csv.stat().st_size == stat.st_size and csv.stat().st_mtime_ns == stat.st_mtime_ns
    after = load_data(args)
    assert after.label_names == ["c0", "c1"]
    total = [sum(after.class_counts(s)[k] for s in ("train", "validation", "test")) for k in range(2)]
    assert total == [20, 40]
    changed = data_fingerprint(str(csv))
    assert changed["sha256"] == hashlib.sha256(csv.read_bytes()).hexdigest() != fingerprint["sha256"]
    assert changed["mtime_ns"] == fingerprint["mtime_ns"]


def test_a_file_is_hashed_once_per_process_while_it_is_unchanged(tmp_path, monkeypatch):
    import east_hf.hf.data.fingerprint as fp

    path = tmp_path / "d.bin"
    path.write_bytes(os.urandom(3 << 20))
    monkeypatch.setattr(fp, "SETTLED_NS", 0)  # remember even a file written just now
    reads = []
    real_open = open
    monkeypatch.setattr(fp, "open", lambda *a, **k: reads.append(a[0]) or real_open(*a, **k), raising=False)
    assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest() == file_sha256(path)
    assert len(reads) == 1
    os.utime(path)  # a new ctime: read again
    file_sha256(path)
    assert len(reads) == 2


# ---- checked before use: damage is rebuilt with one warning ----
def _truncate(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def _garble(path: Path) -> None:
    """Overwrite bytes in the middle of a file, keeping its size and mtime."""
    stat = path.stat()
    with path.open("r+b") as f:
        f.seek(stat.st_size // 2)
        f.write(b"\x7f" * 64)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


DAMAGES = {
    "truncated train.arrow": ("prepared", "train.arrow", _truncate),
    "deleted train.arrow": ("prepared", "train.arrow", Path.unlink),
    "deleted prepared.json": ("prepared", "prepared.json", Path.unlink),
    "garbled train.arrow": ("prepared", "train.arrow", _garble),
    "garbled preprocessor_config.json": ("prepared", "preprocessor_config.json", _garble),
    "garbled rows of the raw cache": ("raw", "*/*/*/*/*-train.arrow", _garble),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_cache_is_rebuilt_with_one_warning_and_the_right_data(tmp_path, cache, caplog, damage):
    csv = write_csv(tmp_path / "d.csv", "x1,x2,label", _rows(["c0", "c1", "c2"], 300))
    args = DataArguments(dataset_name=str(csv))
    first = _features(load_data(args))
    kind, pattern, harm = DAMAGES[damage]
    (folder,) = _versions(cache, kind)
    (target,) = folder.glob(pattern)
    harm(target)
    if kind == "raw":  # the raw rows are read again when the splits are prepared again
        shutil.rmtree(_versions(cache, "prepared")[0])
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        again = load_data(args)
    (record,) = caplog.records
    assert record.name == "east_hf.hf.data.cache_store"
    assert record.getMessage().startswith(f"east_hf cache folder {folder} is damaged (expected ")
    assert record.getMessage().endswith("): rebuilding it")
    for split, x in _features(again).items():
        np.testing.assert_array_equal(x, first[split])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        load_data(args)  # rebuilt whole: no warning
    assert caplog.records == [] and _versions(cache, kind) == [folder]


# ---- bounded: the newest K versions of each source ----
def test_ten_versions_of_a_file_keep_the_newest_three_and_the_newest_loads_unprepared(tmp_path, cache, monkeypatch):
    import east_hf.hf.data.pipeline as pipeline

    csv = tmp_path / "d.csv"
    args = DataArguments(dataset_name=str(csv))
    for version in range(10):
        write_csv(csv, "x1,x2,label", _rows(["c0", "c1"], 60 + version))
        load_data(args)
        assert len(_versions(cache, "prepared")) == len(_versions(cache, "raw")) == min(version + 1, 3)
    assert len(list(cache.iterdir())) == 1  # one source
    load_data(DataArguments(dataset_name=str(csv), split_seed=1))  # another argument: another prepared version
    newest = _versions(cache, "prepared")
    with monkeypatch.context() as m:
        m.setattr(pipeline, "_prepare", lambda *a: pytest.fail("prepared again"))
        assert len(load_data(args).train) + len(load_data(args).validation) + len(load_data(args).test) == 69
    assert _versions(cache, "prepared") == newest and len(newest) == 3
    monkeypatch.setenv("EAST_HF_CACHE_VERSIONS", "1")
    write_csv(csv, "x1,x2,label", _rows(["c0", "c1"], 80))
    load_data(args)
    assert len(_versions(cache, "prepared")) == len(_versions(cache, "raw")) == 1
    monkeypatch.setenv("EAST_HF_CACHE_VERSIONS", "none")
    with pytest.raises(ValueError, match=r"^Expected EAST_HF_CACHE_VERSIONS to be an integer >= 1, got 'none'$"):
        load_data(args)


def test_a_relative_cache_path_caches_the_rows_in_the_working_directory(tmp_path, monkeypatch):
    import east_hf.hf.data.rows_cache as raw

    write_csv(tmp_path / "d.csv", "x1,x2,label", _rows(["c0", "c1"]))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EAST_HF_CACHE", "relative_cache")
    first = load_data(DataArguments(dataset_name="d.csv", split_seed=0))
    assert len(_versions(tmp_path / "relative_cache", "raw")) == 1
    assert [p.name for p in _versions(tmp_path / "relative_cache", "raw")[0].glob(raw.RECORD_NAME)] == ["raw.json"]
    with monkeypatch.context() as m:  # the rows come from the record, without asking datasets to load the file
        m.setattr("datasets.load_dataset", lambda *a, **k: pytest.fail("loaded again"))
        again = load_data(DataArguments(dataset_name="d.csv", split_seed=1))
    assert sum(map(len, (again.train, again.validation, again.test))) == 60
    assert sum(map(len, (first.train, first.validation, first.test))) == 60


# ---- east-cache ls / clear: frees what east_hf made, nothing else ----
def test_east_cache_lists_and_clears_only_what_east_hf_made(tmp_path, cache, capsys):
    import datasets.config

    one = write_csv(tmp_path / "one.csv", "x1,x2,label", _rows(["c0", "c1"]))
    two = write_csv(tmp_path / "two.csv", "x1,x2,label", _rows(["a", "b", "c"]))
    for csv in (one, two):
        load_data(DataArguments(dataset_name=str(csv)))
    foreign = [cache / "notes.txt", cache / "other" / "data.bin", next(cache.glob("one.csv-*")) / "mine.txt"]
    old = Path(datasets.config.HF_DATASETS_CACHE) / "csv" / "default-1" / "0.0.0" / "abc"
    legacy = old / f"east_hf_prepared-{'0' * 24}"
    for path in [*foreign, old / "csv-train.arrow", legacy / "prepared.json", legacy / "train.arrow"]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 1000)

    assert east_cache(["ls"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"east_hf data cache: {cache} (each source keeps 3 versions of each kind")
    assert [line.split()[:3] for line in out[2:4]] == [[str(two.resolve()), "1", "1"], [str(one.resolve()), "1", "1"]]
    assert out[4].startswith("2 sources, ") and out[5].startswith("and 1 prepared folder of earlier east_hf versions")

    assert east_cache(["clear", str(one), "--dry_run"]) == 0
    assert capsys.readouterr().out.startswith("east-cache: would free ")
    assert len(_versions(cache, "prepared")) == 2
    assert east_cache(["clear", str(one)]) == 0
    assert f"the cache of {one}" in capsys.readouterr().out
    assert [p.parent.name.split("-")[0] for p in _versions(cache, "prepared")] == ["two.csv"]
    assert east_cache(["clear"]) == 0
    assert capsys.readouterr().out.startswith("east-cache: freed ")
    assert _versions(cache, "prepared") == _versions(cache, "raw") == [] and not legacy.exists()
    assert all(p.read_bytes() == b"x" * 1000 for p in [*foreign, old / "csv-train.arrow"])
    assert not list(cache.glob("two.csv-*"))  # emptied, so removed; one.csv's folder holds mine.txt
    assert sorted(p.name for p in next(cache.glob("one.csv-*")).iterdir()) == ["mine.txt"]
    assert east_cache(["clear"]) == 0
    assert capsys.readouterr().out.startswith("east-cache: nothing to clear")
    assert load_data(DataArguments(dataset_name=str(one))).label_names == ["c0", "c1"]  # and the cache works again


# ---- image folders: read once, then mapped ----
def _images(folder: Path, n: int, classes=("cat", "dog")) -> Path:
    from PIL import Image

    for i in range(n):
        (folder / classes[i % len(classes)]).mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (4, 4), (i % 256, 0, 0)).save(folder / classes[i % len(classes)] / f"{i}.png")
    return folder


def test_an_image_folder_is_read_by_datasets_once_then_mapped_without_decoding(tmp_path, cache, monkeypatch):
    import datasets

    folder = _images(tmp_path / "imgs", 40)
    args = DataArguments(dataset_name=str(folder))
    first = load_data(args)

    def refuse(*a, **k):
        raise AssertionError("datasets read the folder again")

    with monkeypatch.context() as m:
        m.setattr(datasets, "load_dataset", refuse)
        m.setattr(datasets, "load_dataset_builder", refuse)
        m.setattr(datasets.features.Image, "decode_example", refuse)
        again = load_data(args)
        assert again.label_names == ["cat", "dog"] and again.class_counts("test") == first.class_counts("test")
        for split in ("train", "validation", "test"):
            paths = getattr(again, split).data.table.column("image").combine_chunks().field("path").to_pylist()
            assert paths == getattr(first, split).data.table.column("image").combine_chunks().field("path").to_pylist()
    _images(tmp_path / "imgs", 50)  # ten more images: read again
    assert sum(len(getattr(load_data(args), s)) for s in ("train", "validation", "test")) == 50
    assert len(_versions(cache, "raw")) == 2


def test_east_cache_marks_and_clears_the_sources_that_are_gone(tmp_path, cache, capsys):
    kept = write_csv(tmp_path / "kept.csv", "x1,x2,label", _rows(["c0", "c1"]))
    gone = write_csv(tmp_path / "gone.csv", "x1,x2,label", _rows(["a", "b"]))
    for csv in (kept, gone):
        load_data(DataArguments(dataset_name=str(csv)))
    gone.unlink()
    assert east_cache(["ls"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:4]}
    assert rows[str(gone.resolve())].endswith("(missing: clear --missing)")
    assert "missing" not in rows[str(kept.resolve())]
    err = one_line_error(capsys, east_cache, ["clear", str(kept), "--missing"])
    assert "Expected sources or --missing, not both" in err
    assert east_cache(["clear", "--missing"]) == 0
    assert "the cache of local sources no longer there" in capsys.readouterr().out
    assert [p.parent.name.split("-")[0] for p in _versions(cache, "prepared")] == ["kept.csv"]


def test_an_image_folder_with_its_labels_file_edited_in_place_reads_the_new_labels(tmp_path):
    folder = tmp_path / "imgs"
    _images(folder, 30, classes=("all",))
    (folder / "all").rename(folder / "pics")
    labels = folder / "metadata.csv"
    labels.write_text("file_name,label\n" + "".join(f"pics/{i}.png,{'ab'[i % 2]}\n" for i in range(30)))
    stat = labels.stat()
    args = DataArguments(dataset_name=str(folder))
    assert load_data(args).label_names == ["a", "b"]
    labels.write_text("file_name,label\n" + "".join(f"pics/{i}.png,{'ac'[i % 2]}\n" for i in range(30)))
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_data(args).label_names == ["a", "c"]
