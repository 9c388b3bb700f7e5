"""Model presets: frozen dataclasses, turned into layer kwargs by one factory.

Layers never receive a config object; `model_kwargs` flattens a preset into
the plain keyword arguments of `keras_transformer.Transformer`.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Architecture hyper-parameters (paper Table 3 names in brackets)."""

    # Encoder layers and decoder layers, each [N].
    num_layers: int = 6
    # Depths of their own, for a deep encoder and a shallow decoder (Kasai et
    # al., 2021); None: num_layers.
    num_encoder_layers: int | None = None
    num_decoder_layers: int | None = None
    # Model width [d_model].
    d_model: int = 512
    # Attention heads [h]; d_model / num_heads is the head width [d_k = d_v].
    num_heads: int = 8
    # Inner width of the feed-forward networks [d_ff].
    d_ff: int = 2048
    # Residual dropout, also on embeddings [P_drop].
    dropout: float = 0.1
    # Dropout on attention probabilities (the paper uses none).
    attention_dropout: float = 0.0
    # Dropout inside the feed-forward network (the paper uses none).
    activation_dropout: float = 0.0
    # False: the paper's post-norm blocks; True: pre-norm with a final LayerNorm.
    norm_first: bool = False
    # Source embedding, target embedding and pre-softmax projection share one matrix.
    tie_embeddings: bool = True
    layer_norm_epsilon: float = 1e-6


PRESETS = {
    # For tests: a few thousand parameters, runs in milliseconds.
    "tiny": TransformerConfig(num_layers=2, d_model=32, num_heads=4, d_ff=64, dropout=0.1),
    # Trainable on a 2-core CPU in minutes (the default of scripts/train.py).
    # No dropout: its 800 updates see each built-in pair about 4 times, too
    # few to overfit, and dropout makes each update slower. Under
    # --time-budget the recipe sets dropout from the epochs a run can afford
    # (training/auto_config.py); any run can pass --dropout.
    "small": TransformerConfig(num_layers=3, d_model=256, num_heads=4, d_ff=1024, dropout=0.0),
    # Transformer (base model), Table 3.
    "base": TransformerConfig(),
    # Transformer (big), Table 3.
    "big": TransformerConfig(d_model=1024, num_heads=16, d_ff=4096, dropout=0.3),
}


def depths(config, encoder_layers=None, decoder_layers=None):
    """(encoder layers, decoder layers) of a TransformerConfig, but for those given here (a run's flags)."""
    return (encoder_layers or config.num_encoder_layers or config.num_layers,
            decoder_layers or config.num_decoder_layers or config.num_layers)


def get_preset(name):
    """The TransformerConfig called `name`; ValueError naming the valid ones otherwise."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; expected one of {sorted(PRESETS)}.")
    return PRESETS[name]


def resolved_norm_first(preset_name, norm_first):
    """The block placement a run builds: `norm_first` if set, else the preset's.

    A run's `norm_first` of None and its preset's value build the same
    model, so settings are compared through this, never as given.
    """
    return get_preset(preset_name).norm_first if norm_first is None else bool(norm_first)


def run_depths(settings):
    """[encoder layers, decoder layers] of the model a run's `settings` (a
    RunConfig or its ModelSettings) build: its flags', else its preset's."""
    return list(depths(get_preset(settings.preset), settings.encoder_layers, settings.decoder_layers))


def resolved_dropout(preset_name, dropout):
    """The residual dropout a run trains with: `dropout` if set, else the preset's."""
    return get_preset(preset_name).dropout if dropout is None else dropout


def model_kwargs(config, **overrides):
    """Flattens a TransformerConfig, plus overrides, into Transformer kwargs."""
    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    unknown = set(overrides) - fields - {"vocab_size", "target_vocab_size", "name", "dtype"}
    if unknown:
        raise ValueError(
            f"Unknown Transformer argument(s) {sorted(unknown)}; expected some of "
            f"{sorted(fields | {'vocab_size', 'target_vocab_size'})}."
        )
    return {**dataclasses.asdict(dataclasses.replace(config, **{k: v for k, v in overrides.items() if k in fields})),
            **{k: v for k, v in overrides.items() if k not in fields}}
