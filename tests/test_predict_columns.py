"""east-predict passes input columns through so that predictions join back to their rows: ``--id_column`` first,
``--keep_columns`` every column the model does not read, and one line for an id column that is missing or a column
named as an output column."""

import datasets
import numpy as np
import pandas as pd
import pytest
from helpers import cli_args, one_line_error, write_text

import east_hf
from east_hf.scripts.east_predict import main
from east_hf.scripts.east_train import main as train

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tabular_run(tmp_path_factory):
    """A tiny tabular run on features ``x``, ``colour``; its input CSV also holds ``id``, ``source`` and the label
    ``y``."""
    tmp = tmp_path_factory.mktemp("columns")
    rng = np.random.default_rng(0)
    x = rng.normal(5, 2, 120)
    frame = pd.DataFrame(
        {
            "id": [f"row-{i:03d}" for i in range(120)],
            "x": x.round(4),
            "colour": rng.choice(["red", "blue"], 120),
            "source": rng.choice(["web", "mail"], 120),
            "y": np.where(x > 5, "yes", "no"),
        }
    )
    data = tmp / "rows.csv"
    frame.to_csv(data, index=False)
    recipe = write_text(
        tmp / "r.yaml",
        f"dataset_name: {data}\nlabel_column: y\nmodel_name_or_path: tabular_mlp\nfeature_columns: [x, colour]\n",
    )
    out = tmp / "run"
    flags = cli_args(output_dir=out, max_steps=4, eval_strategy="steps", eval_steps=2, save_steps=2, use_cpu="true")
    assert train([str(recipe), *flags, "--model_card", "false", "--disable_tqdm", "true"]) == 0
    return out, data


def test_an_id_column_is_passed_through_first(tabular_run, tmp_path):
    run, data = tabular_run
    out = tmp_path / "pred.csv"
    assert main([str(run), str(data), "--id_column", "id", "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["id", "predicted_label"]  # y is not a default label column: not passed
    assert frame["id"].tolist() == pd.read_csv(data)["id"].tolist()


def test_keep_columns_passes_every_column_the_model_does_not_read(tabular_run, tmp_path):
    run, data = tabular_run
    out = tmp_path / "pred.csv"
    assert main([str(run), str(data), "--keep_columns", "--probabilities", "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["id", "source", "y", "predicted_label", "probability_no", "probability_yes"]
    source = pd.read_csv(data)
    assert frame[["id", "source", "y"]].equals(source[["id", "source", "y"]])


def test_a_datasets_input_passes_class_names_and_an_id_column(tabular_run):
    run, data = tabular_run
    rows = pd.read_csv(data).head(5)
    ds = datasets.Dataset.from_pandas(rows).cast_column("y", datasets.ClassLabel(names=["no", "yes"]))
    frame = east_hf.predict(run, ds, id_column="id", keep_columns=True)
    assert list(frame.columns) == ["id", "source", "y", "predicted_label"]
    assert frame["y"].tolist() == rows["y"].tolist() and frame["id"].tolist() == rows["id"].tolist()


def test_a_missing_id_column_or_a_column_named_as_an_output_is_one_line(tabular_run, tmp_path, capsys):
    run, data = tabular_run
    err = one_line_error(capsys, main, [str(run), str(data), "--id_column", "key"])
    assert err == (
        "east-predict: error: Expected id column 'key' in the input, got the columns id, x, colour, source, y"
    )
    clashing = tmp_path / "again.csv"
    pd.read_csv(data).rename(columns={"source": "predicted_label"}).to_csv(clashing, index=False)
    err = one_line_error(capsys, main, [str(run), str(clashing), "--keep_columns"])
    assert err == (
        "east-predict: error: Expected input columns to pass through named otherwise than the output's own "
        "columns, got 'predicted_label': rename it in the input"
    )
