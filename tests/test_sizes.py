"""Named sizes in .nd (`size T = 50`, then `input text: i32[T, B]`) and the CLI's --size NAME=N, which
also gives a Brainstorm architecture its sequence length T.

* a file with named sizes builds the same IR as the one with the numbers written out;
* --size replaces a declared value, and the compiled library records it (so --compare rebuilds the
  same network);
* `size` stays a name everywhere else (an attribute key such as Lstm's `size`, a layer's name, a value);
* every mistake is located: an unknown size (with a did-you-mean), one used before its declaration, one
  declared twice or not positive, --size for a name the file lacks or malformed, --size on a format
  without named sizes.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from netc.cli import main
from netc.diagnostics import NetcError
from netc.frontend import load_text
from netc.ir.printer import print_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_brainstorm_recurrent import LSTM_CLASSIFIER  # noqa: E402

NAMED = """size T = 4
size B = 3
network seq {
  input x: f32[T, B, 6]
  input label: f32[T, B, 5]
  size = Lstm(x) { size: 5, activation: sigmoid }
  loss = EuclideanLoss(size, label)
}
"""


def _ir(text, **options):
    return print_module(load_text(text, "seq.nd", options=options or None))


def test_named_sizes_build_the_ir_of_the_numbers():
    literal = NAMED.replace("[T, B, 6]", "[4, 3, 6]").replace("[T, B, 5]", "[4, 3, 5]")
    assert _ir(NAMED) == _ir(literal)
    assert _ir(NAMED, sizes={"T": 9}) == _ir(literal.replace("[4, 3", "[9, 3"))


def test_size_is_still_a_name_elsewhere():
    m = load_text(NAMED, "seq.nd")
    ops = {op.attrs.get("name"): op for op in m.networks()[0].regions[0].ops}
    assert ops["size"].attrs["size"] == 5           # a layer named size, with an attribute size
    assert ops["loss"].attrs["parents"] == ["size", "label"]   # and a reference to it
    with pytest.raises(NetcError, match="'location' must be a worker index >= 0, got 'size'"):  # a value: a name
        load_text('network n {\n  input x: f32[2, 3] { location: size }\n}\n', "v.nd")


@pytest.mark.parametrize("src,where,words", [
    ("size T = 2\nnetwork n {\n  input x: f32[T, Tt]\n}\n", "3:19", "unknown size 'Tt'"),
    ("network n {\n  input x: f32[T, 2]\n}\nsize T = 2\n", "2:16", "unknown size 'T'"),
    ("size T = 2\nsize T = 3\nnetwork n {\n  input x: f32[T]\n}\n", "2:6", "size 'T' is declared twice"),
    ("size T = 0\nnetwork n {\n  input x: f32[T]\n}\n", "1:10", "must be a positive integer"),
])
def test_mistakes_are_located(src, where, words, tmp_path, capsys):
    path = tmp_path / "bad.nd"
    path.write_text(src)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"bad.nd:{where}: error: " in err and words in err, err
    assert "Traceback" not in err
    assert err.count("error:") == 1, err        # an unknown size invalidates its input: no cascade


def test_a_did_you_mean_for_a_misspelt_size(tmp_path, capsys):
    path = tmp_path / "bad.nd"
    path.write_text(NAMED.replace("[T, B, 6]", "[T, Bb, 6]"))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "unknown size 'Bb'" in err and "did you mean 'B'?" in err


def test_cli_size_overrides_and_its_mistakes(tmp_path, capsys):
    path = tmp_path / "seq.nd"
    path.write_text(NAMED)
    assert main(["explain", str(path), "--brief", "--size", "T=7"]) == 0
    assert "7x3x6" in capsys.readouterr().out
    for flags, words in ((["--size", "X=3"], "declares no size 'X' (its sizes: B, T)"),
                         (["--size", "T=0"], "expected NAME=N with N a positive integer"),
                         (["--size", "T"], "expected NAME=N"),
                         (["--size", "T=2", "--size", "T=3"], "--size T is given twice")):
        assert main(["check", str(path), *flags]) == 1, flags
        assert words in capsys.readouterr().err, flags
    lenet = Path(__file__).resolve().parents[1] / "examples" / "lenet.nd"
    assert main(["check", str(lenet), "--size", "T=3"]) == 1
    assert "declares no size 'T' (its sizes: none)" in capsys.readouterr().err


def test_cli_size_on_formats_without_named_sizes(tmp_path, capsys):
    paleo = tmp_path / "net.json"
    paleo.write_text('{"name": "n", "layers": {"data": {"parents": [], "type": "Input", '
                     '"tensor": [1, 8, 8, 3]}}}')
    assert main(["check", str(paleo)]) == 0
    assert main(["check", str(paleo), "--size", "T=3"]) == 1
    assert "named sizes belong to .nd files" in capsys.readouterr().err


def test_cli_size_is_a_brainstorm_architectures_sequence_length(tmp_path, capsys):
    path = tmp_path / "lstm.json"
    path.write_text(json.dumps(LSTM_CLASSIFIER, indent=1))
    assert main(["explain", str(path), "--brief", "--batch", "2", "--size", "T=6"]) == 0
    out = capsys.readouterr().out
    assert "6x2x" in out, out
    assert main(["check", str(path), "--size", "B=6"]) == 1
    assert "T (the sequence length) alone" in capsys.readouterr().err


def test_a_compiled_library_records_its_sizes(tmp_path):
    import argparse

    from netc.runtime.run import source_record
    path = tmp_path / "seq.nd"
    path.write_text(NAMED)
    args = argparse.Namespace(file=str(path), phase="test", batch=None, singa_version=None, size=["T=6"])
    assert source_record(args)["sizes"] == {"T": 6}
    with pytest.raises(NetcError, match="--size"):
        source_record(argparse.Namespace(file=str(path), phase="test", batch=None, singa_version=None, size=["T=x"]))
