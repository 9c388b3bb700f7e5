import dataclasses

import pytest

from keras_transformer.config import RESUME_MUST_MATCH, RunConfig, dataset_slug


@pytest.mark.parametrize("spec,slug", [
    ("numerals_en_de", "numerals_en_de"),
    ("wmt14_translate/de-en", "wmt14_translate_de-en"),
    ("ted_hrlr_translate/pt_to_en", "ted_hrlr_translate_pt_to_en"),
    ("data/corpus.tsv", "corpus"),
    ("train.en,train.de", "train"),
])
def test_dataset_slug_names_one_folder_per_dataset(spec, slug):
    assert dataset_slug(spec) == slug


def test_default_folders_follow_the_dataset_and_preset():
    main_job = RunConfig()
    assert (main_job.model_dir, main_job.export_dir) == ("runs/numerals_en_de-small", "saved_models/numerals_en_de")
    wmt = RunConfig(dataset="wmt14_translate/de-en", preset="base")
    assert (wmt.model_dir, wmt.export_dir) == ("runs/wmt14_translate_de-en-base", "saved_models/wmt14_translate_de-en")
    explicit = RunConfig(dataset="c.tsv", model_dir="here", export_dir="")
    assert (explicit.model_dir, explicit.export_dir) == ("here", "")  # "" still means: no export
    assert RunConfig(**dataclasses.asdict(wmt)) == wmt  # run_config.json round-trips


def test_a_run_resumes_only_with_the_same_data_vocabulary_and_model():
    previous = RunConfig(model_dir="run")
    previous.check_resumes(RunConfig(model_dir="run"))
    # Schedule length, batching, decoding and hardware settings may change on resume.
    RunConfig(model_dir="run", steps=1600, batch_tokens=2048, strategy="mirrored", beam_size=2,
              keep_checkpoints=20).check_resumes(previous)
    for name, value in [("dataset", "c.tsv"), ("source_lang", "de"), ("target_lang", "en"),
                        ("vocab_size", 37000), ("preset", "tiny"), ("validation", "v.tsv"), ("test", "t.tsv"),
                        ("init_from", "runs/wmt")]:
        with pytest.raises(ValueError, match=f"'run' holds a run with other settings \\(--{name.replace('_', '-')} "):
            RunConfig(model_dir="run", **{name: value}).check_resumes(previous)
    assert set(RESUME_MUST_MATCH) == {"dataset", "source_lang", "target_lang", "vocab_size", "preset",
                                      "validation", "test", "init_from"}


@pytest.mark.parametrize("values,message", [
    ({"average_last": 6}, r"average_last \(6\) cannot exceed keep_checkpoints \(5\)"),
    ({"early_stopping": 2, "bleu_sentences": 0}, "early_stopping needs val_bleu"),
    ({"bleu_sentences": -1}, "bleu_sentences must be at least 0; got -1"),
    ({"bleu_beam_size": 0}, "bleu_beam_size must be at least 1; got 0"),
    ({"cooldown": 1.5}, r"cooldown must be a fraction of the run in \[0, 1\]; got 1.5"),
    ({"cooldown": -0.1}, r"cooldown must be a fraction of the run in \[0, 1\]; got -0.1"),
    ({"dropout": 1.0}, r"dropout must be in \[0, 1\); got 1.0"),
])
def test_validation_settings_are_checked(values, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**values)
