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
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["TEXT_TINY", "TOKENIZER_RECORD", "is_text_model", "text_tiny_model", "train_wordpiece_tokenizer"]

logger = logging.getLogger(__name__)

TEXT_TINY = "text_tiny"
_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "spiece.model")
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
    """Whether ``name`` is ``text_tiny``, a local folder with a tokenizer, or a Hub id whose tokenizer is cached."""
    if name is None:
        return False
    if name == TEXT_TINY:
        return True
    if os.path.isdir(name):
        return any((Path(name) / f).is_file() for f in _TOKENIZER_FILES)
    if "/" not in name:
        return False
    from huggingface_hub import try_to_load_from_cache

    return any(isinstance(try_to_load_from_cache(name, f), str) for f in _TOKENIZER_FILES[:2])
