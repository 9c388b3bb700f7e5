"""The residual connection around every sub-layer (paper section 3.1)."""


def residual_block(x, sublayer, norm, dropout, norm_first, training=None):
    """Wraps `sublayer` in a residual connection with layer normalisation.

    Post-norm (the paper): LayerNorm(x + Dropout(sublayer(x))).
    Pre-norm (`norm_first=True`): x + Dropout(sublayer(LayerNorm(x))); the
    stack then ends with a final LayerNorm.

    `sublayer` returns (tensor, extras): `extras` (attention scores, a
    grown cache, or None) is passed back unchanged.
    Returns (output, extras).
    """
    y, extras = sublayer(norm(x) if norm_first else x)
    y = x + dropout(y, training=training)
    if not norm_first:
        y = norm(y)
    return y, extras
