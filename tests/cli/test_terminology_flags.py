"""translate.py --constraints/--glossary/--prefix and evaluate.py's term-use rate."""

from keras_transformer import cli
from keras_transformer.decoding.terminology import contains_term
from tests.conftest import run_entry_point

SENTENCES = ["It is half past seven.", "My brother bought two apples yesterday.", "three hundred twenty-one"]


def write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def translate(trained_tiny_run, capsys, monkeypatch, *flags):
    return run_entry_point(cli.translate_main, ["--model", trained_tiny_run, *flags], capsys,
                           "\n".join(SENTENCES) + "\n", monkeypatch)


def test_constraints_glossary_and_prefixes_steer_the_translations(trained_tiny_run, tmp_path, capsys, monkeypatch):
    code, plain, _ = translate(trained_tiny_run, capsys, monkeypatch)
    assert code == 0
    plain = plain.splitlines()
    constraints = write(tmp_path, "c.txt", ["Uhr\tsieben", "", "dreihundert"])
    code, out, err = translate(trained_tiny_run, capsys, monkeypatch, "--constraints", constraints)
    assert code == 0, err
    out = out.splitlines()
    assert contains_term(out[0], "Uhr") and contains_term(out[0], "sieben") and contains_term(out[2], "dreihundert")
    assert out[1] == plain[1]  # no constraints: beam search's translation
    # A glossary's source terms, as whole words with their case: "seven." matches, "Seven" would not.
    glossary = write(tmp_path, "g.tsv", ["seven\tsieben", "Seven\tSieben", "apples\tÄpfel"])
    code, out, err = translate(trained_tiny_run, capsys, monkeypatch, "--glossary", glossary)
    assert code == 0, err
    out = out.splitlines()
    assert contains_term(out[0], "sieben") and contains_term(out[1], "Äpfel") and out[2] == plain[2]
    assert not contains_term(out[0], "Sieben") or contains_term(plain[0], "Sieben")
    prefixes = write(tmp_path, "p.txt", ["Es ist", "", "drei"])
    code, out, err = translate(trained_tiny_run, capsys, monkeypatch, "--prefix", prefixes)
    assert code == 0, err
    out = out.splitlines()
    assert out[0].startswith("Es ist") and out[2].startswith("drei") and out[1] == plain[1]


def test_bad_terminology_input_exits_with_the_reason(trained_tiny_run, tmp_path, capsys, monkeypatch):
    short = write(tmp_path, "short.txt", ["Uhr"])
    code, _, err = translate(trained_tiny_run, capsys, monkeypatch, "--constraints", short)
    assert code == 1 and "short.txt' has 1 lines for 3 input sentences" in err
    no_tab = write(tmp_path, "g.tsv", ["seven sieben"])
    code, _, err = translate(trained_tiny_run, capsys, monkeypatch, "--glossary", no_tab)
    assert code == 1 and "g.tsv:1:" in err and "no tab" in err
    many = write(tmp_path, "many.txt", ["eins\tzwei\tdrei\tvier\tfünf", "", ""])
    code, _, err = translate(trained_tiny_run, capsys, monkeypatch, "--constraints", many)
    assert code == 1 and "Sentence 1 has 5 constraints; beam size 4 holds at most 4" in err
    code, _, err = translate(trained_tiny_run, capsys, monkeypatch, "--constraints", short, "--sampling-topk", "5")
    assert code == 2 and "do not combine with sampling" in err


def test_evaluate_reports_the_term_use_rate_with_and_without_constraints(trained_tiny_run, tmp_path, capsys):
    glossary = write(tmp_path, "g.tsv", ["hundred\thundert", "seven\tsieben", "two\tzwei"])
    output = str(tmp_path / "hyp.txt")
    code, out, err = run_entry_point(cli.evaluate_main, ["--model-dir", trained_tiny_run, "--limit", "12", "--glossary",
                                                         glossary, "--output", output], capsys)
    assert code == 0, err
    lines = out.splitlines()
    rates = [line for line in lines if line.startswith("term use")]
    assert lines[0] == "unconstrained:" and "constrained:" in lines and len(rates) == 2
    assert rates[1].startswith("term use  100.00%")  # every constraint is met
    total = int(rates[1].split(" of ")[1].split()[0])
    assert total > 0 and f"of {total} constraints" in rates[0]
    with open(output, encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 12
    with open(str(tmp_path / "hyp.unconstrained.txt"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 12
