"""The Transformer encoder-decoder for translation (paper section 3).

Notation: B batch, S source length, T target length, L cache length,
D model width, V vocabulary.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.modeling import masks, presets
from keras_transformer.modeling.layers import Decoder, Encoder, PositionalEmbedding
from keras_transformer.modeling.layers.dense import Dense, read_once


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    """Encoder-decoder Transformer returning float32 next-token logits.

    With a shared source/target vocabulary (`target_vocab_size=None`) and
    `tie_embeddings=True`, the source embedding, the target embedding and the
    pre-softmax projection are one matrix, as in section 3.4. With separate
    vocabularies and tying, the target embedding and the output projection
    are shared. Untied, all three are separate.

    Id 0 is padding on both sides; masks are built here from `ids != 0` and
    passed down to every attention layer.

    Args:
        vocab_size: int. Source vocabulary, and target too when shared.
        target_vocab_size: int or None. A separate target vocabulary.
        num_layers, d_model, num_heads, d_ff, dropout, attention_dropout,
        activation_dropout, norm_first, layer_norm_epsilon: see
            `keras_transformer.modeling.presets.TransformerConfig`.
        num_encoder_layers, num_decoder_layers: int or None. Each stack's
            depth when it differs from `num_layers` (None: `num_layers`).
        tie_embeddings: bool. Share embedding and output matrices.
        **kwargs: passed to `keras.Model`.

    Call arguments:
        inputs: tuple (source_ids (B, S), target_input_ids (B, T)), int.
        training: bool.

    Returns:
        (B, T, V) float32 logits.

    Example:
    >>> model = Transformer.from_preset("tiny", vocab_size=100)
    >>> model((ops.ones((2, 5), "int32"), ops.ones((2, 4), "int32"))).shape
    (2, 4, 100)

    References:
        Vaswani et al., "Attention Is All You Need", 2017.
    """

    def __init__(
        self,
        vocab_size,
        target_vocab_size=None,
        num_layers=6,
        num_encoder_layers=None,
        num_decoder_layers=None,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        norm_first=False,
        tie_embeddings=True,
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.target_vocab_size = None if target_vocab_size is None else int(target_vocab_size)
        self.num_layers = int(num_layers)
        self.num_encoder_layers = self.num_layers if num_encoder_layers is None else int(num_encoder_layers)
        self.num_decoder_layers = self.num_layers if num_decoder_layers is None else int(num_decoder_layers)
        self.d_model = int(d_model)
        self.num_heads = int(num_heads)
        self.d_ff = int(d_ff)
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.norm_first = bool(norm_first)
        self.tie_embeddings = bool(tie_embeddings)
        self.layer_norm_epsilon = layer_norm_epsilon

        stack_kwargs = dict(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            norm_first=self.norm_first,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
        )
        self.encoder = Encoder(self.num_encoder_layers, name="encoder", **stack_kwargs)
        self.decoder = Decoder(self.num_decoder_layers, name="decoder", **stack_kwargs)
        self.source_embedding = PositionalEmbedding(
            self.vocab_size, self.d_model, dtype=self.dtype_policy, name="source_embedding"
        )
        shared_vocabulary = self.target_vocab_size is None
        if shared_vocabulary and self.tie_embeddings:
            self.target_embedding = self.source_embedding
        else:
            self.target_embedding = PositionalEmbedding(
                self.output_vocab_size, self.d_model, dtype=self.dtype_policy, name="target_embedding"
            )
        self.output_projection = None
        if not self.tie_embeddings:
            self.output_projection = Dense(
                self.output_vocab_size, use_bias=False, dtype=self.dtype_policy, name="output_projection"
            )

    @property
    def output_vocab_size(self):
        return self.vocab_size if self.target_vocab_size is None else self.target_vocab_size

    @classmethod
    def from_preset(cls, preset, vocab_size, **overrides):
        """A model of the named preset ("tiny", "small", "base" or "big")."""
        config = presets.get_preset(preset)
        return cls(**presets.model_kwargs(config, vocab_size=vocab_size, **overrides))

    def build(self, input_shape=None):
        if self.built:
            return
        hidden_shape = (None, None, self.d_model)
        for embedding in {id(e): e for e in (self.source_embedding, self.target_embedding)}.values():
            embedding.build((None, None))  # once, even when tied
        self.encoder.build(hidden_shape)
        self.decoder.build(hidden_shape, hidden_shape)
        if self.output_projection is not None:
            self.output_projection.build(hidden_shape)
        self.built = True

    def call(self, inputs, training=None):
        source_ids, target_ids = inputs
        encoder_output = self.encode(source_ids, training=training)  # (B, S, D)
        return self.decode(target_ids, encoder_output, source_ids, training=training)

    def encode(self, source_ids, training=None):
        """(B, S) source ids -> (B, S, D) encoder output."""
        self.build()
        x = self.source_embedding(source_ids)  # (B, S, D)
        return self.encoder(x, attention_mask=masks.key_padding_mask(source_ids), training=training)

    def init_cache(self, encoder_output):
        """An empty decoder cache for `decode_next` (see layers.decoder)."""
        return self.decoder.init_cache(encoder_output)

    def decode(self, target_ids, encoder_output, source_ids, training=None):
        """Next-token logits (B, T, V) float32 for the whole (B, T) prefix `target_ids`."""
        self.build()
        hidden = self.decoder(self.target_embedding(target_ids), encoder_output,
                              self_attention_mask=self._self_attention_mask(target_ids),
                              cross_attention_mask=masks.key_padding_mask(source_ids),  # (B, 1, S)
                              training=training)  # (B, T, D)
        return self._logits(hidden)

    def decode_next(self, target_ids, source_ids, cache, training=None, output_matrix=None):
        """(logits (B, T, V) float32, cache grown by T) for the tokens `target_ids`
        (B, T) that follow those in the cache (from `init_cache(encoder_output)`):
        its self-attention entries hold exactly the positions decoded so far,
        so each step attends over the output so far. Same results as `decode`
        over the whole prefix within float rounding.

        output_matrix: `output_matrix()`, read once by a decoding loop, so that
        its steps do not cast and transpose the (V, D) embedding every time."""
        self.build()
        start = ops.shape(cache[0]["self"][0])[2]  # positions decoded so far
        x = self.target_embedding(target_ids, start_index=start)  # (B, T, D)
        length = target_ids.shape[1]
        # One new token may see every cached one; several see each other causally.
        self_mask = None if length == 1 else masks.causal_mask(length, start + length, offset=start)
        hidden, cache = self.decoder.decode_next(x, cache, self_attention_mask=self_mask,
                                                 cross_attention_mask=masks.key_padding_mask(source_ids),
                                                 training=training)  # (B, T, D)
        return self._logits(hidden, output_matrix), cache

    def output_matrix(self):
        """The tied output projection as the logits use it, (D, V) in the compute
        dtype, for `decode_next`; None without tied embeddings."""
        if self.output_projection is not None:
            return None
        return self.target_embedding.attend_matrix(self.compute_dtype)

    def decoder_weights(self):
        """The decoder's weights (and the untied output projection's), read
        and cast to the compute dtype once: a decoding loop runs its steps
        `with layers.dense.reading(weights):` so that they read no variable."""
        self.build()
        weights = read_once(self.decoder)
        if self.output_projection is not None:
            weights.update(read_once(self.output_projection))
        return weights

    def cross_attention(self, target_ids, encoder_output, source_ids):
        """(logits (B, T, V), [per-layer (B, H, T, S) encoder-decoder attention
        probabilities]) of one teacher-forced pass over the prefix `target_ids`."""
        self.build()
        hidden, scores = self.decoder.call_with_attention(
            self.target_embedding(target_ids), encoder_output,
            self_attention_mask=self._self_attention_mask(target_ids),
            cross_attention_mask=masks.key_padding_mask(source_ids), training=False)
        return self._logits(hidden), scores

    def _self_attention_mask(self, target_ids):
        target_length = ops.shape(target_ids)[1]
        return masks.merge_masks(
            masks.causal_mask(target_length, target_length),  # (1, T, T)
            masks.key_padding_mask(target_ids),  # (B, 1, T)
        )

    def _logits(self, hidden, output_matrix=None):
        """(B, T, D) -> (B, T, V) float32 logits: the tied embedding (`output_matrix`
        if given) or the output projection."""
        if self.output_projection is None:
            return self.target_embedding.attend(hidden, output_matrix)  # (B, T, V) float32
        return ops.cast(self.output_projection(hidden), "float32")  # (B, T, V)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras 3 (checked on 3.15) builds the compiled loss, metrics and
        # optimizer from the first batch, which under a tf.distribute strategy
        # it first averages across replicas with a collective reduce. That
        # fails when replicas hold bucketed batches of different shapes (always
        # possible with token-bucketed data), and it spends a batch. Every
        # shape here is known from the ids' rank alone, so build from a
        # one-row dummy batch instead (symbolically: no step runs).
        if iterator is not None and self._distribute_strategy is not None:
            ids = tf.ones((1, 2), tf.int32)
            return super()._maybe_symbolic_build(data_batch=((ids, ids), ids))
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def train_step(self, data):
        return _reducible_logs(super().train_step(data))

    def test_step(self, data):
        return _reducible_logs(super().test_step(data))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "target_vocab_size": self.target_vocab_size,
                "num_layers": self.num_layers,
                "num_encoder_layers": self.num_encoder_layers,
                "num_decoder_layers": self.num_decoder_layers,
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "norm_first": self.norm_first,
                "tie_embeddings": self.tie_embeddings,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config


def _reducible_logs(logs):
    """Step logs that Keras can reduce under MultiWorkerMirroredStrategy.

    In multi-worker mode Keras 3 (checked on 3.15) reduces every log value
    with `strategy.reduce("MEAN", value, axis=0)`, which fails on the scalar
    metric results every step returns. Shape [1] reduces to the same scalar.
    """
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and (
        strategy.extended._in_multi_worker_mode()
    ):
        return {name: tf.reshape(value, [1]) for name, value in logs.items()}
    return logs


def build_transformer(preset, vocab_size, dtype=None, **overrides):
    """The preset's `Transformer` over a shared vocabulary, built (its weights
    exist), computing in the Keras dtype policy `dtype` (None: the global
    one). `overrides` (e.g. `ModelSettings.overrides()`: dropout, norm_first,
    the two depths) replace the preset's values, but for those of None. The
    one place a run's model is made, for training and for restoring alike."""
    overrides = {name: value for name, value in overrides.items() if value is not None}
    model = Transformer.from_preset(preset, vocab_size=vocab_size, dtype=dtype, **overrides)
    model.build()
    return model
