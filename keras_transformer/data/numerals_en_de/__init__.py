"""The built-in English->German corpus: the sentence generator and its tfds builder.

Importing this package registers `numerals_en_de` with tfds, so
`tfds.load("numerals_en_de")` works; nothing is downloaded.
"""

from keras_transformer.data.numerals_en_de import generator
from keras_transformer.data.numerals_en_de.builder import NAME, NumeralsEnDe

__all__ = ["NAME", "NumeralsEnDe", "generator"]
