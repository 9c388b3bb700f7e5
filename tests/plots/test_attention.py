import numpy as np
import pytest

from keras_transformer.decoding.translator import Translator
from keras_transformer.plots import attention as attention_plot

SENTENCES = ["It is half past seven."]


def test_attention_weights_are_distributions_over_real_source_pieces(translator):
    source, output, layers = attention_plot.cross_attention(translator, SENTENCES[0])
    assert source[-1] == "</s>" and output and len(layers) == 2
    for weights in layers:
        assert weights.shape == (4, len(output), len(source))
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_an_ensemble_has_no_one_attention_picture(translator):
    (model,) = translator.models
    ensemble = Translator([model, model], translator.tokenizer)
    with pytest.raises(ValueError, match="one model; got an ensemble of 2"):
        attention_plot.cross_attention(ensemble, SENTENCES[0])
