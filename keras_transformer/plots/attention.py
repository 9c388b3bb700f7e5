"""Heatmaps of encoder-decoder attention: what each output piece looked at."""

import os

import numpy as np
import tensorflow as tf

from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, PAD_ID


def cross_attention(translator, sentence):
    """Translates `sentence`; returns (source pieces, output pieces, per-layer (H, T, S) arrays).

    `translator` holds one model: an ensemble's members attend each in
    their own way, so there is no one picture of it (ValueError).

    The attention is read from one teacher-forced decoder pass over the
    translation, which gives the same weights as the decoding steps did.
    """
    if len(translator.models) != 1:
        raise ValueError(f"Attention is plotted for one model; got an ensemble of {len(translator.models)}. "
                         "Pass one model directory.")
    source_ids = translator.encode_sources(tf.constant([sentence]))  # (1, S)
    output_ids, _ = translator.translate_ids(source_ids)  # (1, N, L)
    output = [int(i) for i in output_ids[0, 0].numpy() if i != PAD_ID]
    if EOS_ID in output:
        output = output[: output.index(EOS_ID) + 1]
    target_in = tf.constant([[BOS_ID] + output[:-1]], tf.int32)  # (1, T)
    (model,) = translator.models
    encoded = model.encode(source_ids, training=False)
    _, scores = model.cross_attention(target_in, encoded, source_ids)
    pieces = translator.tokenizer._op.id_to_string
    source_pieces = [p.decode("utf-8") for p in pieces(source_ids[0]).numpy()]
    output_pieces = [p.decode("utf-8") for p in pieces(tf.constant(output, tf.int32)).numpy()]
    return source_pieces, output_pieces, [np.asarray(layer[0]) for layer in scores]


def plot_cross_attention(translator, sentence, output_dir):
    """Writes layer_<i>.png (one panel per head) to `output_dir`; returns the paths."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    source, output, layers = cross_attention(translator, sentence)
    os.makedirs(output_dir, exist_ok=True)
    paths = []
    for index, weights in enumerate(layers):  # weights: (H, T, S)
        heads = weights.shape[0]
        columns = min(heads, 4)
        rows = -(-heads // columns)
        figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns + 1, 3.0 * rows + 1), squeeze=False)
        for head in range(rows * columns):
            axis = axes[head // columns][head % columns]
            if head >= heads:
                axis.axis("off")
                continue
            axis.imshow(weights[head], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            axis.set_title(f"head {head}", fontsize=9)
            axis.set_xticks(range(len(source)), source, rotation=90, fontsize=7)
            axis.set_yticks(range(len(output)), output, fontsize=7)
        figure.suptitle(f"Encoder-decoder attention, layer {index}\n{sentence}", fontsize=10)
        figure.tight_layout()
        path = os.path.join(output_dir, f"layer_{index}.png")
        figure.savefig(path, dpi=110)
        plt.close(figure)
        paths.append(path)
    return paths
