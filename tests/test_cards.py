"""Model cards from a real tiny run, parsed back; the push path up to the network boundary."""

import errno
import json
import os
from unittest import mock

import pytest
import torch
from helpers import TinyImages, east_args, tiny_vit
from huggingface_hub import ModelCard, RepoUrl

from east_hf import EASTTrainer, build_compute_metrics

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(tmp_path, **overrides):
    torch.manual_seed(0)
    model = tiny_vit()
    args = east_args(tmp_path, eval_strategy="steps", eval_steps=3, max_steps=9, east_beta='{"dog": 0.5}', **overrides)
    trainer = EASTTrainer(
        model=model,
        args=args,
        train_dataset=TinyImages(48),
        eval_dataset=TinyImages(24, seed=1),
        compute_metrics=build_compute_metrics(
            3, beta={"dog": 0.5}, id2label=model.config.id2label, report_classes=["dog"]
        ),
    )
    trainer.train()
    return trainer


def test_card_round_trip_matches_test_results(tmp_path):
    trainer = _run(tmp_path)
    metrics = trainer.evaluate(TinyImages(30, seed=2), metric_key_prefix="test")
    trainer.save_metrics("test", metrics)
    trainer.east_card_info = {
        "test_metrics": metrics,
        "dataset_name": "synthetic-tiny-images",
        "recipe": {"model_name_or_path": "vit-tiny", "east_metric": "fbeta", "hub_token": "hf_SECRET_DO_NOT_LEAK"},
    }
    path = trainer.create_model_card()
    text = path.read_text()
    card = ModelCard.load(path)
    saved = json.loads((tmp_path / "test_results.json").read_text())
    results = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert results == {
        "fbeta": saved["test_fbeta"],  # per-class beta: F-beta, not F1
        "matthews_correlation": saved["test_mcc"],
        "accuracy": saved["test_accuracy"],
    }
    fbeta = next(r for r in card.data.eval_results if r.metric_type == "fbeta")
    assert fbeta.metric_args == {"average": "macro", "beta": {"dog": 0.5}} and fbeta.metric_name == "F-beta (macro)"
    assert "generated_from_trainer" in card.data.tags and card.data.metrics == [
        "fbeta",
        "matthews_correlation",
        "accuracy",
    ]
    assert all(r.dataset_split == "test" and r.dataset_name == "synthetic-tiny-images" for r in card.data.eval_results)
    assert "east" in card.data.tags and "fbeta" in card.data.tags
    assert card.data.pipeline_tag == "image-classification" and card.data.library_name == "transformers"
    png = tmp_path / "annealing.png"
    assert png.read_bytes()[:8] == PNG_MAGIC and "](annealing.png)" in text
    assert "| dog | 0.5 |" in text  # the per-class beta table
    assert "precision_dog" not in text and "| dog |" in text  # the per-class precision/recall table
    assert text.count("| 3 |") >= 1 and "Annealing trajectory" in text  # an evaluation row at step 3
    assert "hf_SECRET_DO_NOT_LEAK" not in text
    assert "| warm start | none |" in text  # the warm start belongs to the annealing, off here
    assert "Aligning Multiclass Neural Network Classifier Criterion" in text


def test_card_names_the_default_warm_start_and_its_evaluations(tmp_path):
    # 48 samples, batch 16: 3 steps per epoch, so the default 2-epoch warm start is steps 1-6
    trainer = _run(tmp_path, east_annealing=True)
    trainer.east_card_info = {"test_metrics": trainer.evaluate(metric_key_prefix="test")}
    text = trainer.create_model_card().read_text()
    assert trainer.warm_start_loss.name == "la"  # the default warm start, named as such
    assert "| warm start | logit-adjusted cross-entropy for 2 epochs |" in text
    assert "| 3 | CE warm start |" in text and "| 6 | CE warm start |" in text and "| 9 | 0 |" in text
    assert "| stages | 1 |" in text  # the warm start is not an annealing stage


def test_a_baseline_card_describes_its_own_loss_without_temperatures(tmp_path):
    trainer = _run(tmp_path, east_loss="ce")
    trainer.east_card_info = {"test_metrics": trainer.evaluate(metric_key_prefix="test")}
    text = trainer.create_model_card().read_text()
    assert "trained with cross-entropy (baseline) through the `east_hf` library" in text
    assert "temperature" not in text and "| stages |" not in text and "surrogate" not in text
    assert "## Training trajectory" in text and "| 3 | " in text  # the validation row at step 3, without a stage


def test_an_east_card_names_the_annealed_cross_entropy_mix(tmp_path):
    trainer = _run(tmp_path, east_ce_weight=1.0)
    trainer.east_card_info = {"test_metrics": trainer.evaluate(metric_key_prefix="test")}
    text = trainer.create_model_card().read_text()
    mix = "1 x logit-adjusted cross-entropy, tau = 1 (Menon et al., 2021), its weight x0.5 at every stage"
    assert f"| loss | EAST surrogate, 1 - soft fbeta + {mix} |" in text
    assert "| initial temperature T0 | 0.2 |" in text


def test_push_uploads_weights_card_and_plot_without_leaking_the_token(tmp_path, caplog):
    uploads = []

    def fake_upload_folder(self, **kwargs):
        folder = kwargs["folder_path"]
        from pathlib import Path

        files = {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()}
        uploads.append({"repo_id": kwargs["repo_id"], "files": files})
        return mock.MagicMock()

    token = "hf_FAKE_TOKEN_1234567890"
    with (
        mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", False),
        mock.patch("huggingface_hub.HfApi.whoami", return_value={"name": "someone"}),
        mock.patch(
            "huggingface_hub.HfApi.create_repo", return_value=RepoUrl("https://huggingface.co/someone/east-tiny")
        ),
        mock.patch("huggingface_hub.HfApi.upload_folder", fake_upload_folder),
    ):
        trainer = _run(
            tmp_path, push_to_hub=True, hub_model_id="someone/east-tiny", hub_token=token, hub_strategy="end"
        )
        trainer.east_card_info = {
            "test_metrics": trainer.evaluate(metric_key_prefix="test"),
            "recipe": {"hub_token": token},
        }
        trainer.push_to_hub()
    final = uploads[-1]
    assert final["repo_id"] == "someone/east-tiny"
    assert {"README.md", "annealing.png", "model.safetensors", "config.json"} <= set(final["files"])
    readme = final["files"]["README.md"].decode()
    assert "model-index" in readme and token not in readme
    assert token not in caplog.text
    assert all(token.encode() not in content for content in final["files"].values() if len(content) < 1_000_000)


def test_one_masking_covers_argument_lists_commands_records_and_the_card_recipe(monkeypatch):
    from east_hf.hf.cards.model_card import _clean_recipe
    from east_hf.hf.secret_masking import mask_secrets

    monkeypatch.setenv("HF_TOKEN", "hf_FROM_ENV")
    argv = ["r.yaml", "--hub_token", "hf_A1", "--api-token=hf_B2", "--seed", "1", "--", "--x", "hf_FROM_ENV"]
    assert mask_secrets(argv) == ["r.yaml", "--hub_token", "***", "--api-token=***", "--seed", "1", "--", "--x", "***"]
    kept = {"include_num_input_tokens_seen": "no", "average_tokens_across_devices": True}
    record = {
        "training": {"hub_token": "hf_A1", **kept},
        "command": "east-train r.yaml --hub_token hf_A1 --db_password=p4ss --seed 1",
        "flags": [["--east_loss", "ce"], ("--hub_token", "hf_A1")],
    }
    assert mask_secrets(record) == {  # a setting named like tokens, not a token, is kept as it is
        "training": {"hub_token": "***", **kept},
        "command": "east-train r.yaml --hub_token *** --db_password=*** --seed 1",
        "flags": [["--east_loss", "ce"], ("--hub_token", "***")],
    }
    card_recipe = _clean_recipe({"dataset_name": "sklearn:iris", "hub_token": "hf_A1", "hub_model_id": "me/model"})
    assert card_recipe == "dataset_name: sklearn:iris\nhub_token: '***'\nhub_model_id: me/model"


def test_push_fails_before_training_when_offline_or_without_token(tmp_path):
    with mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", True):
        with pytest.raises(ValueError, match="HF_HUB_OFFLINE"):
            EASTTrainer(model=tiny_vit(), args=east_args(tmp_path, push_to_hub=True, hub_model_id="a/b"))
    with (
        mock.patch("huggingface_hub.constants.HF_HUB_OFFLINE", False),
        mock.patch("huggingface_hub.get_token", return_value=None),
    ):
        with pytest.raises(ValueError, match="token"):
            EASTTrainer(model=tiny_vit(), args=east_args(tmp_path, push_to_hub=True, hub_model_id="a/b"))


def test_trajectory_names_the_warm_start_rows():
    from east_hf.hf.cards.model_card import annealing_trajectory

    history = [
        {"step": 8, "east_stage": -1, "east_temperature": 0.2, "eval_loss": 2.29, "eval_fbeta": 0.1},
        {"step": 8, "loss": 2.3, "east_stage": -1},  # a training log: not a row
        {
            "step": 16,
            "east_stage": 0,
            "eval_east_stage": 0,
            "eval_east_temperature": 0.2,
            "eval_loss": 0.9,
            "eval_fbeta": 0.5,
        },
    ]
    rows = annealing_trajectory(history, "fbeta")
    assert [(r["step"], r["stage"], r["temperature"], r["metric"]) for r in rows] == [
        (8, "CE warm start", None, 0.1),
        (16, 0, 0.2, 0.5),
    ]


def test_python_trainer_card_keeps_license_language_and_types_a_binary_f1(tmp_path):
    """create_model_card(license=..., language=...) as transformers' Trainer takes them; without east-train's test
    results the model-index comes from the last validation evaluation; binary F1 is typed f1 with average binary."""
    from huggingface_hub import metadata_eval_result

    torch.manual_seed(0)
    model = tiny_vit(num_labels=2)
    args = east_args(tmp_path, eval_strategy="steps", eval_steps=3, max_steps=6, east_average="binary")
    trainer = EASTTrainer(
        model=model,
        args=args,
        train_dataset=TinyImages(32, num_classes=2),
        eval_dataset=TinyImages(16, num_classes=2, seed=1),
        compute_metrics=build_compute_metrics(2, average="binary", id2label=model.config.id2label),
    )
    trainer.train()
    path = trainer.create_model_card(license="apache-2.0", language="en", finetuned_from=str(tmp_path))
    card = ModelCard.load(path)
    assert card.data.license == "apache-2.0" and card.data.language == "en"
    assert card.data.base_model is None and f"local checkpoint (`{tmp_path}`)" in path.read_text()
    last = [e for e in trainer.state.log_history if "eval_loss" in e][-1]
    f1 = next(r for r in card.data.eval_results if r.metric_type == "f1")
    assert f1.metric_value == last["eval_fbeta"] and f1.dataset_split == "validation"
    positive = model.config.id2label[1]
    assert f1.metric_args == {"average": "binary", "pos_label": 1}
    assert f1.metric_name == f"F1 (binary, positive class {positive})"
    expected = metadata_eval_result(
        model_pretty_name=card.data.model_name,
        task_pretty_name="image-classification",
        task_id="image-classification",
        metrics_pretty_name=f1.metric_name,
        metrics_id="f1",
        metrics_value=f1.metric_value,
        dataset_pretty_name="custom",
        dataset_id="custom",
        metrics_config=None,
        dataset_split="validation",
    )["model-index"][0]["results"][0]
    written = card.data.to_dict()["model-index"][0]["results"]
    assert any(
        r["metrics"][0]["type"] == "f1" and r["metrics"][0]["value"] == expected["metrics"][0]["value"]
        for r in written
    )


# ---- a full disk while the card is written ----
def _full_disk(write_part):
    """A writer that creates its file, writes part of it and fails as a full disk does."""

    def write(self, path, *args, **kwargs):
        with open(path, "wb") as f:
            f.write(write_part)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    return write


def test_a_full_disk_leaves_no_partial_plot_or_card(tmp_path, monkeypatch):
    from east_hf.hf.cards.model_card import write_model_card

    trainer = _run(tmp_path)
    earlier = write_model_card(trainer, tmp_path).read_bytes()
    (tmp_path / "annealing.png").unlink()
    with monkeypatch.context() as patch:
        patch.setattr("matplotlib.figure.Figure.savefig", _full_disk(PNG_MAGIC))
        with pytest.raises(OSError, match=r"No space left on device: '.*annealing\.png'") as error:
            write_model_card(trainer, tmp_path)
    assert error.value.errno == errno.ENOSPC and not (tmp_path / "annealing.png").exists()

    def full_disk(path, data):  # Path.write_bytes: the card's temporary file, cut short
        _full_disk(data[:12])(None, path)

    with monkeypatch.context() as patch:
        patch.setattr("pathlib.Path.write_bytes", full_disk)
        with pytest.raises(OSError, match=r"No space left on device: '.*README\.md'"):
            write_model_card(trainer, tmp_path)
    assert (tmp_path / "README.md").read_bytes() == earlier  # the earlier card, whole
    assert (tmp_path / "annealing.png").read_bytes()[:8] == PNG_MAGIC  # written whole before the card failed
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert write_model_card(trainer, tmp_path).read_text().startswith("---\n")  # space again: the card is written


# ---- the license, and the annealing plot's axes ----
def test_east_train_license_is_in_the_card_and_in_the_card_push_to_hub_writes(tmp_path):
    """east-train's --license reaches the card's metadata, and trainer.east_card_info carries it to the card that
    push_to_hub writes again (Trainer.push_to_hub calls create_model_card with only model_name)."""
    from types import SimpleNamespace

    from helpers import write_text

    from east_hf.scripts.arguments import EASTArgumentParser
    from east_hf.scripts.east_train import _write_model_card

    trainer = _run(tmp_path)
    metrics = trainer.evaluate(TinyImages(30, seed=2), metric_key_prefix="test")
    recipe = write_text(tmp_path / "r.yaml", "dataset_name: sklearn:iris\n")
    parsed = EASTArgumentParser().parse([str(recipe), "--license", "mit", "--output_dir", str(tmp_path)])
    path = _write_model_card(trainer, parsed, SimpleNamespace(modality="image"), metrics, None)
    assert path is not None and ModelCard.load(path).data.license == "mit"
    path.unlink()
    pushed = trainer.create_model_card(model_name="east-tiny")  # what push_to_hub calls
    assert ModelCard.load(pushed).data.license == "mit" and "\nlicense: mit\n" in pushed.read_text().split("---")[1]


def test_a_license_the_hub_would_refuse_is_one_line_before_training(tmp_path):
    from east_hf.hf.cards.model_card import check_license

    assert check_license("apache-2.0") == "apache-2.0" and check_license(None) is None
    assert check_license("llama3.1") == "llama3.1" and check_license("other") == "other"
    with pytest.raises(
        ValueError, match=r"^Expected a Hub license id .*got 'Apache 2\.0'; did you mean 'apache-2\.0'\?$"
    ):
        check_license("Apache 2.0")
    with pytest.raises(ValueError, match=r"^Expected a Hub license id .*got 'bogus-lic'$"):  # a Hub id's form only
        check_license("bogus-lic")
    with pytest.raises(ValueError, match=r"got 'MIT License'; did you mean 'mit'\?$"):
        check_license("MIT License")
    trainer = _run(tmp_path)
    with pytest.raises(ValueError, match="Expected a Hub license id"):
        trainer.create_model_card(license="MIT License")
    assert not (tmp_path / "README.md").exists()


def test_annealing_plot_draws_the_loss_and_the_metric_on_separate_axes(tmp_path, monkeypatch):
    """A 10-class cross-entropy (~3.2) beside an F-beta in [0, 1]: on one axis the metric would be a flat line."""
    from matplotlib.figure import Figure

    from east_hf.hf.cards.model_card import plot_annealing

    figures = []
    savefig = Figure.savefig

    def keep(self, *args, **kwargs):
        figures.append(self)
        return savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    rows = [
        {
            "step": 10 * i,
            "stage": "CE warm start" if i < 2 else 0,
            "temperature": None if i < 2 else 0.2,
            "loss": 3.2 - 0.1 * i,
            "metric": 0.1 + 0.1 * i,
        }
        for i in range(1, 6)
    ]
    path = plot_annealing(rows, tmp_path / "annealing.png", "fbeta")
    assert path.read_bytes()[:8] == PNG_MAGIC
    (fig,) = figures
    where = {line.get_label(): ax for ax in fig.axes for line in ax.get_lines()}
    metric_ax, loss_ax = where["validation fbeta"], where["validation loss"]
    assert metric_ax is not loss_ax
    assert metric_ax.get_ylim()[1] <= 1.05 and loss_ax.get_ylim()[0] > 2.5  # each axis fits its own curve
    assert metric_ax.get_ylabel() == "validation fbeta" and loss_ax.get_ylabel() == "validation loss"


# ---- a README.md east_hf did not write as it is stays ----
def test_a_readme_the_user_wrote_or_edited_stays_and_the_card_goes_beside_it(tmp_path, caplog):
    """A card east_hf wrote ends in its signature and is replaced by the next; a README.md the user edited (or wrote)
    stays byte for byte, the card goes to README.east_hf.md with one warning line, written again silently (the push
    path), and a README.east_hf.md the user edited too is kept as well."""
    import logging

    from east_hf.hf.cards.model_card import CARD_BESIDE_README, is_unchanged_card, write_model_card

    trainer = _run(tmp_path)
    readme = tmp_path / "README.md"
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.cards.model_card"):
        assert write_model_card(trainer, tmp_path) == readme
        assert is_unchanged_card(readme)
        last = readme.read_text().rstrip("\n").rsplit("\n", 1)[1]
        assert last.startswith("<!-- east_hf model card; sha256 of the text above: ") and last.endswith(" -->")
        assert write_model_card(trainer, tmp_path) == readme  # east_hf's own card, unchanged: replaced
        assert _warnings(caplog) == []

        edited = readme.read_bytes().replace(b"\n## ", b"\nOur notes: trained on the March export.\n\n## ", 1)
        readme.write_bytes(edited)
        assert not is_unchanged_card(readme)
        beside = tmp_path / CARD_BESIDE_README
        assert write_model_card(trainer, tmp_path) == beside
        assert readme.read_bytes() == edited and is_unchanged_card(beside)
        assert ModelCard.load(beside).data.pipeline_tag == "image-classification"
        assert _warnings(caplog) == [
            f"{readme} was written or edited by hand (it is not the card east_hf wrote): it stays as it is, and the "
            f"model card is written to {beside}"
        ]
        assert write_model_card(trainer, tmp_path) == beside and len(_warnings(caplog)) == 1  # the same card again

        beside.write_text("# ours too\n")
        third = tmp_path / "README.east_hf-2.md"
        assert write_model_card(trainer, tmp_path) == third and is_unchanged_card(third)
        assert beside.read_text() == "# ours too\n" and readme.read_bytes() == edited
    for text in ("# my notes\n", "", "\xff not utf-8"):  # a README the user wrote, empty, or not text
        (tmp_path / "other.md").write_bytes(text.encode("latin-1"))
        assert not is_unchanged_card(tmp_path / "other.md")
    assert not is_unchanged_card(tmp_path / "missing.md")


def _warnings(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "east_hf.hf.cards.model_card" and r.levelname == "WARNING"
    ]


# ---- how training ended, what trained, and numbers as prose gives them ----
def test_the_card_says_how_training_ended_as_east_train_prints_it(tmp_path):
    from east_hf.hf.training.ending import training_ended

    trainer = _run(tmp_path, east_annealing=True)
    trainer.east_card_info = {"test_metrics": trainer.evaluate(metric_key_prefix="test")}
    text = trainer.create_model_card().read_text()
    ended = training_ended(trainer.state, trainer.args, trainer.annealing)
    assert ended.startswith("Training ended after its whole budget (max_steps=9) in ")
    assert f"\n{ended}.\n" in text
    assert "| 3 | CE warm start | - |" in text and "None" not in text  # a warm start has no temperature
    assert "| warm start | logit-adjusted cross-entropy for 2 epochs |" in text


def test_the_card_names_ldam_as_the_warm_start_and_the_annealed_term(tmp_path):
    """``east_ce_loss: ldam``: the warm start and the annealed weight's term are LDAM with its re-weighting from the
    start, which the card says in those words, not the registry's LDAM-DRW (which defers the re-weighting)."""
    trainer = _run(tmp_path, east_annealing=True, east_ce_loss="ldam")
    assert trainer.warm_start_loss.name == "ldam" and trainer.warm_start_loss.class_weight is not None
    text = trainer.create_model_card().read_text()
    assert "| warm start | LDAM re-weighted by effective numbers for 2 epochs |" in text
    mix = "1 x LDAM, margins n^(-1/4) and re-weighted by effective numbers (Cao et al., 2019), its weight x0.5"
    assert mix in text and "LDAM-DRW" not in text


def test_after_a_fallback_to_plain_cross_entropy_the_card_describes_what_trained(tmp_path):
    """The default EAST told that class 0 is a millionth of the data predicts one class until it falls back to plain
    cross-entropy: the card's warm start, loss and ending say what trained after the logit-adjusted one."""
    from helpers import annealing_trainer

    trainer = annealing_trainer(
        tmp_path,
        east_warm_start="ce",
        east_warm_start_epochs=2,
        east_ce_weight=None,
        east_ce_loss=None,
        east_class_priors=[1e-6, 1, 1],
    )
    trainer.train()
    assert trainer.annealing.schedule.fell_back
    text = trainer.create_model_card().read_text()
    assert (
        "| warm start | logit-adjusted cross-entropy for 2 epochs; then, the run having predicted one class at every "
        "evaluation, plain cross-entropy until its own early stopping (east_ce_fallback) and EAST again from T0 |"
    ) in text
    assert (
        "| loss | EAST surrogate, 1 - soft fbeta + 1 x cross-entropy, its weight x0.5 at every stage; before the "
        "fallback to plain cross-entropy, logit-adjusted cross-entropy, tau = 1 (Menon et al., 2021) |"
    ) in text
    ended = next(line for line in text.splitlines() if line.startswith("Training ended"))
    assert ended.endswith(
        "after falling back to plain cross-entropy (east_ce_fallback: every validation evaluation before had "
        "predicted one class)."
    )


def test_card_prose_gives_numbers_to_four_decimals(tmp_path):
    import re

    trainer = _run(tmp_path)
    rule = {
        "metric": "fbeta",
        "target_key": "fbeta",
        "offsets": {"cat": 0.125, "dog": -0.25, "frog": 0.0},
        "tuned_beta": 0.8,
        "validation_argmax": 0.6535087719298246,
        "validation_tuned": 0.7012345678901234,
        "test_as_trained": 0.4409090909090909,
        "test_tuned": 0.4515151515151515,
    }
    trainer.east_card_info = {"test_metrics": trainer.evaluate(metric_key_prefix="test"), "decision_rule": rule}
    body = trainer.create_model_card().read_text().split("\n---\n", 1)[1]  # the text below the YAML metadata
    assert "0.6535 untuned, 0.7012 tuned" in body and "0.4409 as trained" in body and "0.4515 tuned" in body
    assert re.findall(r"\d\.\d{5,}", body) == []


def test_a_darknet_card_loads_with_timm_where_east_hf_is_not_installed(tmp_path):
    """timm does not ship darknet19: the card's timm snippet registers it from the darknet.py saved with the model
    where east_hf cannot be imported, and loads the trained head."""
    import re

    from helpers import run_without_east_hf

    from east_hf.hf.models import create_image_model

    torch.manual_seed(0)
    model = create_image_model("darknet19_tiny", 3, ["cat", "dog", "frog"])
    settings = dict(eval_strategy="steps", eval_steps=2, max_steps=4, east_annealing=True, east_warm_start_epochs=1)
    args = east_args(tmp_path / "run", **settings)
    trainer = EASTTrainer(
        model=model, args=args, train_dataset=TinyImages(32, size=32), eval_dataset=TinyImages(16, size=32, seed=1)
    )
    trainer.train()
    trainer.save_model()
    text = trainer.create_model_card().read_text()
    assert "| warm start | logit-adjusted cross-entropy for 1 epoch |" in text  # one epoch, not "1 epochs"
    snippet = re.search(r"```python\n(import importlib.util\n.*?)```", text, flags=re.S).group(1)
    assert f'timm.create_model("local-dir:{tmp_path / "run"}", pretrained=True)' in snippet
    x = torch.linspace(-1, 1, 3 * 32 * 32).reshape(1, 3, 32, 32)
    script = snippet + "import torch\nx = torch.linspace(-1, 1, 3 * 32 * 32).reshape(1, 3, 32, 32)\n"
    script += "print(model.num_classes, model.eval()(x).tolist())\n"
    proc = run_without_east_hf(script, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    num_classes, logits = proc.stdout.strip().splitlines()[-1].split(" ", 1)
    with torch.no_grad():
        expected = trainer.model.eval()(pixel_values=x).logits
    assert num_classes == "3"
    torch.testing.assert_close(torch.tensor(json.loads(logits)), expected, rtol=1e-4, atol=1e-5)
