"""The built-in corpus as a tfds dataset: `tfds.load("numerals_en_de")`.

Importing this module (or its package) registers the builder. Nothing is
downloaded: the examples come from `generator`.
"""

import tensorflow_datasets as tfds

from keras_transformer.data.numerals_en_de import generator as corpus

NAME = "numerals_en_de"


class NumeralsEnDe(tfds.core.GeneratorBasedBuilder):
    """English->German numbers, dates, clock times and quantity sentences."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release: 50k/1k/1k pairs."}

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=corpus.__doc__,
            features=tfds.features.Translation(languages=("en", "de")),
            supervised_keys=("en", "de"),
            homepage="https://github.com/keras-transformer/keras_transformer",
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # nothing to download
        return {split: self._generate_examples(split) for split in corpus.SPLIT_SIZES}

    def _generate_examples(self, split):
        for index, (english, german) in enumerate(corpus.generate(split)):
            yield index, {"en": english, "de": german}
