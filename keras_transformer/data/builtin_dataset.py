"""Kept for code that imported it before version 0.2: the built-in corpus is
`keras_transformer.data.numerals_en_de`. Importing this registers it with tfds."""

from keras_transformer.data.numerals_en_de import NAME, NumeralsEnDe  # noqa: F401
