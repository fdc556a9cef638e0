"""Data for ``east-train``: load through ``datasets``, relabel and resample, split, and turn rows into model inputs.

Sources (``DataArguments.dataset_name``):

- a Hub id (``uoft-cs/cifar10``), loaded with ``datasets.load_dataset``;
- a local folder: an ``imagefolder`` (one sub-folder per class) or CSV / Parquet / JSON files, split by file name
  (``train.csv``, ``test.csv``, ...), as ``datasets`` infers them; or one local CSV / TSV / Parquet / JSON file;
- ``sklearn:<name>``: a set bundled with scikit-learn, offline: ``digits`` (1,797 8x8 grey images, 10 classes, as
  an image data set), ``digits_tabular`` (the same as 64 features), ``breast_cancer`` (2 classes), ``wine`` (3) and
  ``iris`` (3), tabular; and ``make_classification``, a fixed synthetic imbalanced binary task made by scikit-learn
  (``SYNTHETIC_BINARY``: 20,000 rows, 20 features, 10 % positives, 2 % flipped labels), large enough for a test
  split of 400 positives; ``rare_positive`` (``RARE_POSITIVE``: 20,000 rows, 7 % positives that are hard to
  separate), where argmax of cross-entropy finds few positives (the demo).

The pipeline (``load_data``): the label column becomes a ``ClassLabel`` named ``label``; ``positive_classes``
relabels to binary (those classes 1, the rest 0); ``imbalance_ratio`` keeps a fraction ratio**(k/(C-1)) of class
k; missing splits are carved from the training split by the paper's protocol (stratified, 64 % train / 16 %
validation / 20 % test of the whole, fixed seed), and ``resplit`` pools every split first. Tabular rows become a
float vector ``input_features`` (text columns one-hot, then standardised with training-set statistics only: see
``fit_tabular_features``, which returns a transformers feature extractor that saves and reloads with the model); image
rows keep their images and get a model's transform on the fly (``set_image_transforms``); text rows (``text_column``,
or a text model's one column of long strings) keep their texts until ``tokenize_splits`` runs the model's tokenizer
over them in batches.

>>> from east_hf.hf.data import DataArguments
>>> data = load_data(DataArguments(dataset_name="sklearn:wine"))
>>> data.modality, data.label_names, [len(data.train), len(data.validation), len(data.test)]
('tabular', ['class_0', 'class_1', 'class_2'], [113, 29, 36])
>>> data.train[0]["input_features"].shape
torch.Size([13])

The package's modules: ``arguments`` (``DataArguments``), ``sources`` (``load_raw``), ``pipeline`` (``load_data``,
``EASTData``), ``labels`` (one class per row: the label column as a ``ClassLabel``, relabelled and checked), ``splits``
(find, resample, carve and cap the splits), ``messages`` (the wording refusals share), ``tabular``
(``fit_tabular_features``, ``load_tabular_features``), ``tabular_features`` (``TabularFeatureExtractor``, the fitted
encoding of rows that saves beside the model), ``fingerprint`` (content hashes of local data, which the caches and
``east-compare``'s run records are keyed on), ``cache_store`` (east_hf's data cache on disk: one folder per source,
checked before use, bounded, shown and cleared by ``east-cache``), ``rows_cache`` (the rows of local files, cached by
content), ``prepared_cache`` (prepared tabular splits as memory-mapped Arrow files, shared by the processes of a
distributed run), ``rows`` (column reads through an indices mapping), ``images`` (``image_transforms``), ``text`` (the
text column, empty texts, ``tokenize_splits``) and ``multilabel`` (several labels per row: 0/1 label columns, a
separated or list-valued label column, multi-hot ``label`` vectors, stratification by each row's rarest positive
label).
"""

from east_hf.hf.data.arguments import DataArguments
from east_hf.hf.data.images import image_transforms, set_image_transforms
from east_hf.hf.data.pipeline import EASTData, load_data
from east_hf.hf.data.sources import RARE_POSITIVE, SKLEARN_SETS, SYNTHETIC_BINARY, DataError, load_raw
from east_hf.hf.data.tabular import LEGACY_PREPROCESSOR_NAME, fit_tabular_features, load_tabular_features

__all__ = [
    "LEGACY_PREPROCESSOR_NAME",
    "RARE_POSITIVE",
    "SKLEARN_SETS",
    "SYNTHETIC_BINARY",
    "DataArguments",
    "DataError",
    "EASTData",
    "fit_tabular_features",
    "image_transforms",
    "load_data",
    "load_raw",
    "load_tabular_features",
    "set_image_transforms",
]
