"""A run's vocabulary: trained once into its folder, and only of the run's size."""

from keras_transformer.config import DataSettings
from keras_transformer.data.tokenizer import Tokenizer
from keras_transformer.run_dir import RunDir
from keras_transformer.training.vocabulary import load_tokenizer
from tests.conftest import write_tsv


def test_the_vocabulary_is_trained_once_and_one_of_another_size_is_trained_again(tmp_path, small_corpus):
    train, _ = small_corpus
    corpus = write_tsv(tmp_path / "c.tsv", train)
    run_dir = RunDir(str(tmp_path / "run"))
    first = load_tokenizer(DataSettings(dataset=corpus, vocab_size=400), run_dir)
    assert first.vocab_size == 400
    stamp = (tmp_path / "run" / "sentencepiece.model").stat().st_mtime_ns
    assert load_tokenizer(DataSettings(dataset=corpus, vocab_size=400), run_dir).vocab_size == 400
    assert (tmp_path / "run" / "sentencepiece.model").stat().st_mtime_ns == stamp  # reused, not trained again
    # A vocabulary left in the folder by a time budget's probe at another size is not this run's.
    again = load_tokenizer(DataSettings(dataset=corpus, vocab_size=500), run_dir)
    assert again.vocab_size == 500 == Tokenizer(run_dir.vocabulary_path).vocab_size
