import tensorflow as tf

from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID


def test_special_ids_are_fixed(tokenizer):
    pieces = tokenizer._op.id_to_string(tf.constant([PAD_ID, UNK_ID, BOS_ID, EOS_ID])).numpy()
    assert list(pieces) == [b"<pad>", b"<unk>", b"<s>", b"</s>"]


def test_round_trips_ordinary_and_non_ascii_text(tokenizer):
    texts = ["Ich habe gestern drei Äpfel gekauft.", "three hundred twenty-one",
             "Weißwein, Gläser, Bücher: dreißig", "Ça coûte 5 € — 東京 ✓"]  # unseen characters too
    ids = tokenizer.tokenize(tf.constant(texts))
    assert [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()] == texts


def test_detokenize_stops_at_eos_and_ignores_padding(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["zwei Flaschen"])).to_tensor()
    padded = tf.concat([[[BOS_ID]], ids, [[EOS_ID, 7, 8, PAD_ID]]], axis=1)
    assert tokenizer.detokenize(padded).numpy()[0] == "zwei Flaschen".encode()


def test_tokenizer_works_inside_tf_data(tokenizer):
    ds = tf.data.Dataset.from_tensor_slices(["eins", "zwei"]).batch(2).map(tokenizer.tokenize)
    (ids,) = list(ds)
    assert ids.shape[0] == 2 and ids.dtype == tf.int32


def test_too_small_a_vocabulary_is_a_clear_error(tmp_path):
    import pytest

    from keras_transformer.data.tokenizer import train_sentencepiece

    text = ["".join(chr(0x4E00 + i) for i in range(j, j + 40)) for j in range(0, 400, 40)]
    with pytest.raises(ValueError, match="could not train a vocabulary of 300 pieces: Vocabulary size is smaller"):
        train_sentencepiece(text, 300, str(tmp_path / "m.model"))


def test_every_digit_is_a_piece_of_its_own(tmp_path):
    """Numbers are copied digit by digit: a number the corpus repeats is
    never learned as one piece, and the text round-trips."""
    from keras_transformer.data.tokenizer import Tokenizer, train_sentencepiece

    text = ["=RANK(A10;A1:A50) returns 2024 in A10", "Zelle A50 enthält 2024"] * 300
    tokenizer = Tokenizer(train_sentencepiece(text, 400, str(tmp_path / "m.model")))
    ids = tokenizer.tokenize(tf.constant(text[:2]))
    pieces = [[p.decode("utf-8") for p in row] for row in tokenizer._op.id_to_string(ids).to_list()]
    assert [p for row in pieces for p in row if any(c.isdigit() for c in p) and len(p.strip("▁")) > 1] == []
    assert "".join(pieces[1]).replace("▁", " ").strip() == text[1]
    assert [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()] == text[:2]
