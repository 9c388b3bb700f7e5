"""One shared source+target SentencePiece vocabulary, applied in-graph.

The model is trained with the `sentencepiece` library (BPE, as the paper's
shared byte-pair vocabulary) and applied with tensorflow-text's op, so that
`tf.data`, the model directory and the exported SavedModel all run the same
op on the same model bytes.

The special ids (PAD 0, UNK 1, BOS 2, EOS 3) are fixed in
`modeling.special_ids`; SentencePiece is trained to use them.
"""

import os

import numpy as np
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.files import atomic_open
from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID



def train_sentencepiece(sentences, vocab_size, output_path, max_sentences=2_000_000):
    """Trains a BPE SentencePiece model on `sentences` and writes it to `output_path`.

    sentences: an iterable of str (source and target sides together).
    vocab_size: int, 37000 for WMT English-German, far less for small data.
    max_sentences: at most this many sentences (sampled by sentencepiece) are used.
    Returns output_path.
    """
    if int(vocab_size) < 300:
        raise ValueError(
            f"vocab_size must be at least 300 (256 byte pieces, the special ids and some "
            f"characters); got {vocab_size}."
        )
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    model = _ByteSink()
    try:
        _train(sentences, vocab_size, model, max_sentences)
    except RuntimeError as error:
        raise ValueError(
            f"SentencePiece could not train a vocabulary of {vocab_size} pieces: "
            f"{str(error).split(']')[-1].strip()}"
        ) from None
    with atomic_open(output_path, "wb") as f:  # a killed run never leaves half a model
        f.write(model.getvalue())
    return output_path


def _train(sentences, vocab_size, model, max_sentences):
    spm.SentencePieceTrainer.train(
        sentence_iterator=(s for s in sentences if s),
        model_writer=model,
        model_type="bpe",
        vocab_size=int(vocab_size),
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        character_coverage=1.0,
        # Characters never seen in training become UTF-8 byte pieces, not <unk>,
        # so any text round-trips. Costs 256 vocabulary entries.
        byte_fallback=True,
        # Every digit is a piece of its own: numbers and cell references are spelt
        # digit by digit instead of taking pieces of their own (132 of LibreOffice's
        # 8,000). Dev BLEU on LibreOffice at 25 minutes: 31.97 against 31.14
        # without (docs/training.md at 28bd8c9).
        split_digits=True,
        input_sentence_size=int(max_sentences),
        shuffle_input_sentence=True,
        # Small corpora cannot always fill the requested vocabulary.
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=os.cpu_count() or 1,
    )


class _ByteSink:
    def __init__(self):
        self._chunks = []

    def write(self, data):
        self._chunks.append(data)

    def getvalue(self):
        return b"".join(self._chunks)


class Tokenizer(tf.Module):
    """In-graph SentencePiece tokenizer over one shared vocabulary.

    Eager calls use an op resource that `tf.random.set_seed` (and so
    `keras.utils.set_random_seed`) destroys; seed first, then create the
    Tokenizer. Inside tf.data and tf.function the op is created per graph.

    Args:
        model_path: path of a SentencePiece `.model` file.

    Example:
    >>> tokenizer = Tokenizer("runs/x/sentencepiece.model")
    >>> ids = tokenizer.tokenize(tf.constant(["Hello world"]))  # RaggedTensor
    >>> tokenizer.detokenize(ids)
    """

    def __init__(self, model_path, name="tokenizer"):
        super().__init__(name=name)
        if not os.path.exists(model_path):
            raise FileNotFoundError(f"SentencePiece model {model_path!r} does not exist.")
        self.model_path = model_path
        with open(model_path, "rb") as f:
            self.model_proto = f.read()
        self._op = tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)
        self.vocab_size = int(self._op.vocab_size())

    def tokenize(self, strings):
        """(B,) strings -> (B, None) int32 RaggedTensor, without BOS/EOS."""
        return self._op.tokenize(strings)

    def encode_sources(self, strings, max_length=None):
        """(B,) strings -> (B, None) int32 RaggedTensor of encoder inputs:
        pieces + EOS, the pieces cut to `max_length` - 1 so that a row has at
        most `max_length` ids. The one definition of an encoder input, for
        training batches, translation and scoring alike; `.to_tensor()` pads
        with PAD_ID (0)."""
        pieces = self.tokenize(strings)  # ragged (B, None)
        if max_length is not None:
            pieces = pieces[:, : int(max_length) - 1]
        eos = tf.fill([tf.shape(strings)[0], 1], EOS_ID)
        return tf.concat([pieces, eos], axis=1)

    def continues_word(self):
        """(V,) bool NumPy array: the pieces that continue a word (they start
        with a letter, a digit or "_" and not with SentencePiece's word
        start "▁"); control and byte pieces do not."""
        processor = spm.SentencePieceProcessor(model_proto=self.model_proto)  # plain Python: works while tracing
        texts = [processor.id_to_piece(i) for i in range(self.vocab_size)]
        return np.array([bool(text) and (text[0].isalnum() or text[0] == "_") for text in texts])

    def detokenize(self, ids):
        """(B, L) int ids, dense or ragged -> (B,) strings.

        Everything from the first EOS on is dropped, and PAD/BOS ids are
        ignored, so raw decoder output can be passed as it is.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.cast(ids, tf.int32)
        before_eos = tf.math.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1, exclusive=True) == 0
        keep = before_eos & (ids != EOS_ID) & (ids != PAD_ID) & (ids != BOS_ID)
        return self._op.detokenize(tf.ragged.boolean_mask(ids, keep))
