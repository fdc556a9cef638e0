"""east-predict and east_hf.Predictor on texts: a text column of numbers is one line in east-train's words, and rows
without text are kept, predicted from an empty input and counted in one warning."""

import numpy as np
import pandas as pd
import pytest
from helpers import east_predict_error, write_text

import east_hf
from east_hf.scripts.east_predict import main

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """An untrained text_tiny model saved as east-train saves a text run (config, weights, tokenizer): what reaches
    its tokenizer is what these tests check, not what it learned."""
    from east_hf.hf.models.text import text_tiny_model, train_wordpiece_tokenizer

    out = tmp_path_factory.mktemp("text") / "run"
    texts = ["goal team match score", "soup bread cheese salad", "bank loan price stock"] * 4
    tokenizer = train_wordpiece_tokenizer(texts, vocab_size=100, cache=False)
    text_tiny_model(tokenizer, {0: "food", 1: "money", 2: "sport"}, max_length=32).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_a_text_column_of_numbers_is_one_line_in_east_trains_words(text_run, capsys, tmp_path):
    rows = write_text(tmp_path / "numbers.csv", "text,label\n3,sport\n5,food\n")
    assert east_predict_error(capsys, [str(text_run), str(rows)]) == (
        "east-predict: error: text column 'text' holds int64 values, not text (row 0: 3); pass the column of "
        "strings, or convert it"
    )
    predictor = east_hf.Predictor(text_run, device="cpu")
    with pytest.raises(ValueError, match=r"^text column 'text' holds float64 values, not text \(row 1: 2\.5\); "):
        predictor.predict(pd.DataFrame({"text": [np.nan, 2.5]}))  # a missing value aside
    with pytest.raises(ValueError, match=r"^text column 'text' holds int values, not text \(row 2: 7\); "):
        predictor.predict(["goal team", None, 7])


def test_missing_and_blank_texts_are_kept_and_counted_in_one_warning(text_run, capsys, caplog, tmp_path):
    """Rows without text stay in the output, aligned with the input, predicted from an empty input, and one warning
    counts them: from a list, one row, a datasets.Dataset and a CSV read by east-predict."""
    import logging

    import datasets

    predictor = east_hf.Predictor(text_run, device="cpu")
    columns = ["probability_food", "probability_money", "probability_sport"]

    def warnings():
        found = [r.getMessage() for r in caplog.records if r.name == "east_hf.hf.predict.predictor"]
        caplog.clear()
        return found

    with caplog.at_level(logging.WARNING, logger="east_hf.hf.predict.predictor"):
        empty = predictor.predict([""], probabilities=True)
        assert warnings() == [
            "1 of 1 rows has no text in text (missing, empty or blank): its prediction comes from an empty input"
        ]
        texts = ["goal team", "", "   ", None, float("nan"), "soup bread"]
        frame = predictor.predict(texts, probabilities=True)
        assert warnings() == [
            "4 of 6 rows have no text in text (missing, empty or blank): their predictions come from an empty input"
        ]
        assert len(frame) == 6
        np.testing.assert_allclose(
            frame.loc[1:4, columns].to_numpy(), np.repeat(empty[columns].to_numpy(), 4, axis=0), atol=1e-5
        )
        assert len(predictor.predict({"text": None})) == 1 and len(warnings()) == 1
        dataset = datasets.Dataset.from_dict({"text": ["goal", None, ""], "label": ["sport", "food", "money"]})
        assert predictor.predict(dataset)["label"].tolist() == ["sport", "food", "money"]
        assert warnings()[0].startswith("2 of 3 rows have no text in text")

        rows = pd.DataFrame({"text": ["goal team", "", " ", "soup"], "label": ["sport", "food", "money", "food"]})
        rows.to_csv(tmp_path / "rows.csv", index=False)
        out = tmp_path / "predictions.csv"
        assert main([str(text_run), str(tmp_path / "rows.csv"), "-o", str(out), "--device", "cpu"]) == 0
        assert warnings() == [
            "2 of 4 rows have no text in text (missing, empty or blank): their predictions come from an empty input"
        ]
    assert pd.read_csv(out)["label"].tolist() == rows["label"].tolist()
