import dataclasses
import os

import pytest

from keras_transformer.config import RESUME_MUST_MATCH, RunConfig
from keras_transformer.data.sources import dataset_slug
from keras_transformer.training.recipe import with_default_folders


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
    main_job = with_default_folders(RunConfig())
    assert (main_job.model_dir, main_job.export_dir) == ("runs/numerals_en_de-small", "saved_models/numerals_en_de")
    wmt = with_default_folders(RunConfig(dataset="wmt14_translate/de-en", preset="base"))
    assert (wmt.model_dir, wmt.export_dir) == ("runs/wmt14_translate_de-en-base", "saved_models/wmt14_translate_de-en")
    explicit = with_default_folders(RunConfig(dataset="c.tsv", model_dir="here", export_dir=""))
    assert (explicit.model_dir, explicit.export_dir) == ("here", "")  # "" still means: no export
    assert RunConfig(**dataclasses.asdict(wmt)) == wmt  # run_config.json round-trips


def test_a_run_resumes_only_with_the_same_data_vocabulary_and_model():
    previous = RunConfig(model_dir="run")
    previous.check_resumes(RunConfig(model_dir="run"))
    # Schedule length, batching, decoding and hardware settings may change on resume.
    RunConfig(model_dir="run", steps=1600, batch_tokens=2048, strategy="mirrored", beam_size=2,
              keep_checkpoints=20).check_resumes(previous)
    for name, value in [("dataset", "c.tsv"), ("source_lang", "de"), ("target_lang", "en"),
                        ("vocab_size", 37000), ("preset", "tiny"), ("norm_first", True), ("encoder_layers", 5),
                        ("decoder_layers", 1), ("validation", "v.tsv"),
                        ("test", "t.tsv"), ("init_from", "runs/wmt")]:
        with pytest.raises(ValueError, match=f"'run' holds a run with other settings \\(--{name.replace('_', '-')} "):
            RunConfig(model_dir="run", **{name: value}).check_resumes(previous)
    assert set(RESUME_MUST_MATCH) == {"dataset", "source_lang", "target_lang", "vocab_size", "preset", "norm_first",
                                      "encoder_layers", "decoder_layers", "validation", "test", "init_from",
                                      "time_budget"}


@pytest.mark.parametrize("values,message", [
    ({"average_last": 6}, r"average_last \(6\) cannot exceed keep_checkpoints \(5\)"),
    ({"early_stopping": 2, "bleu_sentences": 0}, "early_stopping needs val_bleu"),
    ({"bleu_sentences": -1}, "bleu_sentences must be at least 0; got -1"),
    ({"bleu_beam_size": 0}, "bleu_beam_size must be at least 1; got 0"),
    ({"cooldown": 1.5}, r"cooldown must be a fraction of the run in \[0, 1\]; got 1.5"),
    ({"cooldown": -0.1}, r"cooldown must be a fraction of the run in \[0, 1\]; got -0.1"),
    ({"dropout": 1.0}, r"dropout must be in \[0, 1\); got 1.0"),
    ({"decoder_layers": 0}, "decoder_layers must be at least 1; got 0"),
    ({"encoder_layers": -2}, "encoder_layers must be at least 1; got -2"),
])
def test_validation_settings_are_checked(values, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**values)


def test_each_setting_reaches_the_one_section_that_uses_it():
    from keras_transformer import config as settings

    sections = {"data": settings.DataSettings, "model": settings.ModelSettings,
                "training": settings.TrainingSettings, "bleu_validation": settings.ValidationSettings,
                "decoding": settings.DecodingSettings}
    renamed = {("decoding", "max_input_length"): "max_length", ("decoding", "extra_length"): "max_output_extra"}
    # Every field but the two output folders (the recipe's) is in a section. Two are shared:
    # the seed (data shuffling; weight initialisation) and max_length (training pairs; inputs to translate).
    covered = {}  # RunConfig field -> [(section, its name there)]
    for name, cls in sections.items():
        for field in dataclasses.fields(cls):
            covered.setdefault(renamed.get((name, field.name), field.name), []).append((name, field.name))
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert fields - set(covered) == {"model_dir", "export_dir"} and set(covered) <= fields
    assert {k: [s for s, _ in v] for k, v in covered.items() if len(v) > 1} == {
        "seed": ["data", "training"], "max_length": ["data", "decoding"]}
    # The values flow through: a non-default value of each field shows up in its section.
    values = dict(dataset="c.tsv", source_lang="en", target_lang="de", data_dir="d", validation="v.tsv",
                  test="t.tsv", vocab_size=777, max_length=99, batch_tokens=999, seed=5, preset="tiny",
                  dropout=0.25, norm_first=True, encoder_layers=4, decoder_layers=1, precision="float32",
                  strategy="mirrored", steps=900, grad_accum=3,
                  jit_compile=True, warmup_steps=11, learning_rate_scale=2.5, label_smoothing=0.2, cooldown=0.1,
                  checkpoint_every=300, keep_checkpoints=7, average_last=6, init_from="r",
                  bleu_sentences=9, bleu_beam_size=2, early_stopping=3, beam_size=5, alpha=0.7,
                  max_output_extra=13, no_repeat_ngram_size=3, repetition_penalty=1.2, time_budget="1.5h")
    config = RunConfig(**values)
    for name, owners in covered.items():
        for section, field in owners:
            assert getattr(getattr(config, section), field) == values[name], (section, field)


def test_section_defaults_are_the_run_configs():
    from keras_transformer import config as settings

    config = RunConfig()
    assert settings.DataSettings() == config.data
    for cls, section in ((settings.ModelSettings, config.model), (settings.TrainingSettings, config.training),
                         (settings.ValidationSettings, config.bleu_validation),
                         (settings.DecodingSettings, config.decoding)):
        assert cls() == section, cls.__name__


def test_run_config_fields_are_the_sections_settings_each_once_with_their_types_defaults_and_help():
    """RunConfig is written out; its fields, in order, are the sections'
    settings (a shared one once, under its flat name) and the two folders,
    with the section's type, default and help text."""
    import typing

    from keras_transformer import config as settings

    expected = []  # (flat name, type, default, help) the sections define, in flag order
    for cls in settings.SECTIONS.values():
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            if field.metadata["shared_with"]:
                assert field.metadata["help"] == ""  # a flag once, with its first section's help
                continue
            assert field.metadata["help"], (cls.__name__, field.name)  # every flag explains itself
            expected.append((settings.flat_name(field), hints[field.name], field.default, field.metadata["help"]))
    hints = typing.get_type_hints(RunConfig)
    flat = [(f.name, hints[f.name], f.default, f.metadata["help"]) for f in dataclasses.fields(RunConfig)]
    assert flat[:-2] == expected
    assert [name for name, *_ in flat[-2:]] == ["model_dir", "export_dir"]
    for cls in settings.SECTIONS.values():  # every shared field names a flat field
        for field in dataclasses.fields(cls):
            assert settings.flat_name(field) in RunConfig.__dataclass_fields__


def test_help_texts_format_the_paper_constants_they_cite():
    from keras_transformer import config as settings

    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(RunConfig)}
    assert RunConfig().beam_size == settings.PAPER_BEAM_SIZE and RunConfig().alpha == settings.PAPER_ALPHA
    assert f"(the paper: {settings.PAPER_WARMUP_STEPS};" in helps["warmup_steps"]
    assert f"{settings.HELD_OUT:,} pairs" in helps["validation"] and f"{settings.HELD_OUT:,} pairs" in helps["test"]
    assert RunConfig().batch_tokens == settings.BATCH_TOKENS and RunConfig().max_output_extra == 50


def test_config_imports_no_other_module_of_the_package():
    import ast
    import inspect

    from keras_transformer import config as settings

    tree = ast.parse(inspect.getsource(settings))
    imported = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert not [name for name in imported if name and name.startswith("keras_transformer")]


def test_an_old_run_config_file_loads_with_its_flat_keys():
    """A run_config.json is flat: its keys are the flags, so files written before
    the sections were generated load unchanged (see also tests/test_run_dir.py)."""
    values = RunConfig(preset="tiny", seed=3, max_length=40, max_output_extra=7, model_dir="r").to_dict()
    config = RunConfig.from_dict(values)
    assert (config.data.seed, config.training.seed) == (3, 3)
    assert (config.data.max_length, config.decoding.max_input_length, config.decoding.extra_length) == (40, 40, 7)
    with pytest.raises(ValueError, match=r"does not know: \['new_flag'\]"):
        RunConfig.from_dict({**values, "new_flag": 1})


def test_a_run_config_file_written_by_version_0_3_0_loads_and_writes_back_its_values(tmp_path):
    """tests/fixtures/run_config_0.3.0.json was written by RunDir.save_config
    of version 0.3.0, every setting away from its default. Written back, it
    holds the same values, and the settings added since at their defaults."""
    import json

    import shutil

    from keras_transformer.run_dir import RunDir
    from tests.conftest import ROOT

    written = os.path.join(ROOT, "tests", "fixtures", "run_config_0.3.0.json")
    shutil.copy(written, tmp_path / "run_config.json")
    config = RunDir(str(tmp_path)).load_config()
    assert (config.max_length, config.decoding.max_input_length, config.decoding.extra_length) == (99, 99, 13)
    assert (config.data.seed, config.training.seed, config.time_budget, config.export_dir) == (5, 5, "1.5h", "")
    again = tmp_path / "again"
    RunDir(str(again)).save_config(config)
    with open(written, encoding="utf-8") as f:
        old = json.load(f)
    assert json.loads((again / "run_config.json").read_text(encoding="utf-8")) == {
        **old, "encoder_layers": None, "decoder_layers": None}
