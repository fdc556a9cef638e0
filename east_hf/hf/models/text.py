"""``text_tiny``: a small BERT trained from scratch, with a WordPiece tokenizer trained on the training texts.

Both are plain transformers objects: the tokenizer a ``PreTrainedTokenizerFast`` over a ``tokenizers`` WordPiece
model (BERT's normaliser, pre-tokenizer and ``[CLS] A [SEP] B [SEP]`` template), the model a
``BertForSequenceClassification``. A run saves them with ``save_pretrained``, so it reloads with
``AutoTokenizer`` + ``AutoModelForSequenceClassification`` and ``pipeline("text-classification", model=run_dir)``
where east_hf is not installed.

>>> tokenizer = train_wordpiece_tokenizer(["a red apple", "a green pear", "red and green"], vocab_size=60)
>>> tokenizer("red pear")["input_ids"][0] == tokenizer.cls_token_id
True
>>> model = text_tiny_model(tokenizer, {0: "fruit", 1: "colour"}, max_length=32)
>>> model(**tokenizer(["red apple"], return_tensors="pt")).logits.shape
torch.Size([1, 2])
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = [
    "CHECKED_TEXTS",
    "TEXT_TINY",
    "TOKENIZER_RECORD",
    "check_tokenizer",
    "is_text_model",
    "text_tiny_model",
    "train_wordpiece_tokenizer",
]

logger = logging.getLogger(__name__)

TEXT_TINY = "text_tiny"
_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# The files a tokenizer is read from: the fast tokenizer's, its settings, the vocabularies of WordPiece, BPE and
# SentencePiece tokenizers (the first two are what a Hub checkpoint's cache is asked for).
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
)
UNKNOWN_FRACTION = 0.9  # a tokenizer that reads this share of the training texts' tokens as unknown reads none of them
CHECKED_TEXTS = 256  # training texts a checkpoint's tokenizer is tried on
TOKENIZER_RECORD = "tokenizer_record.json"  # a cached tokenizer's record: the size and SHA-256 of its tokenizer.json


def train_wordpiece_tokenizer(texts: Iterable[str], vocab_size: int = 4000, max_length: int = 128, cache: bool = True):
    """A BERT-style ``PreTrainedTokenizerFast`` whose WordPiece vocabulary (at most ``vocab_size``) is learned from
    ``texts`` (an iterable of strings or of lists of strings, read once).

    ``tokenizers``' trainer breaks ties between equally frequent merges in hash-map order, so two trainings on the same
    texts give different vocabularies. With ``cache`` the trained tokenizer is kept in east_hf's data cache
    (``$EAST_HF_CACHE``, default ``east_hf`` in the ``datasets`` cache), keyed on the SHA-256 of the texts, the
    vocabulary size and the ``tokenizers`` version: the same texts give the same tokenizer in every later run, which
    is trained once, and whose tokenization ``datasets`` can then find in its cache. The cached ``tokenizer.json``
    is used only where its record (``TOKENIZER_RECORD``: size and SHA-256) vouches for it; any other is removed with
    one warning and trained again."""
    texts = list(texts)
    folder = _tokenizer_cache(texts, vocab_size) if cache else None
    tok = _read_tokenizer(folder)
    if tok is None:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_str(_train_wordpiece(texts, vocab_size).to_str())  # as a later run reads it
        if folder is not None:
            _write_tokenizer(tok, folder)
    return _fast_tokenizer(tok, max_length)


def _train_wordpiece(texts: list, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    # no progress: where stderr is not a terminal, tokenizers' bars draw as blank lines
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(_SPECIAL), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tok


def _fast_tokenizer(tok, max_length: int):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=max_length,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],  # BERT's: pairs mark their second text
    )


def _tokenizer_cache(texts: list, vocab_size: int) -> Path | None:
    """``<east_hf cache>/text_tiny_tokenizers/<key>``, or None where the cache root cannot be named."""
    import hashlib

    import tokenizers

    try:
        from east_hf.hf.data.cache_store import TOKENIZERS_FOLDER, cache_root

        root = cache_root()
    except Exception as e:  # noqa: BLE001  (no cache: the tokenizer is trained, as without one)
        logger.debug(f"no tokenizer cache: {e}")
        return None
    digest = hashlib.sha256(f"wordpiece-v1 {vocab_size} {tokenizers.__version__} {len(texts)}".encode())
    for text in texts:  # a length prefix per text: ["ab", "c"] and ["a", "bc"] differ
        for part in [text] if isinstance(text, str) else list(text):
            data = str(part).encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "little") + data)
        digest.update(b"\x00" if isinstance(text, str) else b"\x01")
    return root / TOKENIZERS_FOLDER / digest.hexdigest()[:32]


def _read_tokenizer(folder: Path | None):
    """The cached tokenizer in ``folder``, or None: none there, or one its record does not vouch for (the record
    missing, or ``tokenizer.json`` of another size or SHA-256: edited, garbled or cut short), which is removed with
    one warning (``east_hf.hf.data.cache_store.read_record``) and trained again."""
    if folder is None:
        return None
    from tokenizers import Tokenizer

    from east_hf.hf.data.cache_store import discard, read_record

    if read_record(folder, TOKENIZER_RECORD) is None:
        return None
    try:
        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as e:  # noqa: BLE001  (a damaged cache entry is trained again)
        discard(folder, f"expected a tokenizer in tokenizer.json, got {type(e).__name__}: {' '.join(str(e).split())}")
        return None


def _write_tokenizer(tok, folder: Path) -> None:
    """``tokenizer.json`` and its record (size and SHA-256), written into a staging folder renamed to ``folder``
    (``east_hf.hf.data.cache_store.publish``): a concurrent run reads a whole entry or none."""
    from east_hf.hf.data.cache_store import checksums, publish, staging

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with staging(folder) as stage:
            if stage is None:  # a read-only cache: the tokenizer is used, not kept
                return
            tok.save(str(stage / "tokenizer.json"))
            publish(stage, folder, TOKENIZER_RECORD, {"files": checksums(stage, ["tokenizer.json"])})
    except OSError as e:
        logger.warning(f"could not cache the text_tiny tokenizer in {folder}: {e}")


def text_tiny_model(
    tokenizer,
    id2label: Mapping[int, str],
    max_length: int = 128,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    dropout: float = 0.1,
):
    """A randomly initialised ``BertForSequenceClassification`` sized for ``tokenizer``'s vocabulary: ``hidden_size``
    wide, ``num_layers`` layers of ``num_heads`` heads, inputs of at most ``max_length`` tokens."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=4 * hidden_size,
        max_position_embeddings=max_length,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=len(id2label),
        id2label=dict(id2label),
        label2id={name: i for i, name in id2label.items()},
    )
    return BertForSequenceClassification(config)


def is_text_model(name: str | None) -> bool:
    """Whether ``name`` is ``text_tiny``, a local folder with a tokenizer or a text model's config (a ``vocab_size``),
    or a Hub id whose tokenizer is cached."""
    if name is None:
        return False
    if name == TEXT_TINY:
        return True
    if os.path.isdir(name):  # a tokenizer, or a text model's config (its tokenizer missing: check_tokenizer says so)
        return any((Path(name) / f).is_file() for f in _TOKENIZER_FILES) or _has_vocabulary(Path(name))
    if "/" not in name:
        return False
    from huggingface_hub import try_to_load_from_cache

    return any(isinstance(try_to_load_from_cache(name, f), str) for f in _TOKENIZER_FILES[:2])


def _has_vocabulary(folder: Path) -> bool:
    """Whether ``folder``'s ``config.json`` gives a ``vocab_size``: a text model's (image and tabular ones lack it)."""
    import json

    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and isinstance(config.get("vocab_size"), int)


def check_tokenizer(name: str, tokenizer, vocab_size: int | None, texts: Sequence[str]) -> None:
    """Refuse, in one line, a tokenizer that cannot be checkpoint ``name``'s: a vocabulary under half the model's
    ``vocab_size`` (``config.vocab_size``; transformers reads a folder without tokenizer files as a ``BertTokenizer``
    of 5 special tokens), or one that reads ``UNKNOWN_FRACTION`` of the tokens of the first ``CHECKED_TEXTS`` of
    ``texts`` (the training texts) as its unknown token. Either would train on unknown tokens only."""
    size = len(tokenizer)
    small = bool(vocab_size) and size < vocab_size / 2
    got = f"a {type(tokenizer).__name__} of {size} tokens" + (
        f" for a model of {vocab_size} (config.vocab_size)" if small else ""
    )
    unk = tokenizer.unk_token_id
    sample = [str(t) for t in texts[:CHECKED_TEXTS]]
    unknown_share = 0.0
    if unk is not None and sample:
        ids = tokenizer(sample, add_special_tokens=False)["input_ids"]
        total = sum(map(len, ids))
        unknown_share = sum(row.count(unk) for row in ids) / total if total else 0.0
    if unknown_share >= UNKNOWN_FRACTION:
        got += (
            f", reading {unknown_share:.0%} of the tokens of the first {len(sample)} training texts as "
            f"{tokenizer.unk_token}"
        )
    elif not small:
        return
    if not os.path.isdir(name):
        fix = (
            "its tokenizer is another model's: fine-tune a checkpoint whose tokenizer matches its model"
            if small
            else "check that text_column holds the texts, or fine-tune a checkpoint whose tokenizer covers them"
        )
        raise ValueError(f"Expected the tokenizer of {name!r} to read the training texts, got {got}: {fix}")
    present = [f for f in _TOKENIZER_FILES if (Path(name) / f).is_file()]
    save = f"AutoTokenizer.from_pretrained(BASE).save_pretrained({name!r})"
    if not present:
        fix = f"the folder holds no tokenizer files ({', '.join(_TOKENIZER_FILES[:3])}, ...); save the tokenizer the "
        fix += f"model was trained with into it ({save})"
    elif small:
        fix = f"its tokenizer files ({', '.join(present)}) are another model's; save the tokenizer the model was "
        fix += f"trained with into it ({save})"
    else:
        fix = "check that text_column holds the texts, or that the folder's tokenizer is the one the model was "
        fix += f"trained with ({save})"
    raise ValueError(f"Expected the tokenizer of checkpoint folder {name!r}, got {got}: {fix}")
