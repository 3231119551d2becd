"""Brainstorm's construction syntax written as .nd (frontend/brainstorm_nd.py, issue 25): every architecture of
Brainstorm's tests and examples (tests/data/brainstorm_layouts.json, 27 of them, made by Brainstorm's own code)
written one statement per layer imports to the same IR as its JSON form; errors point into the .nd file."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from netc.diagnostics import DiagnosticEngine, NetcError
from netc.frontend import load_text
from netc.frontend.brainstorm import LAYER_IO
from netc.ir.printer import print_module
from netc.pipelines import Options, inference

DATA = json.loads((Path(__file__).parent / "data" / "brainstorm_layouts.json").read_text())


def nd_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(nd_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k}: {nd_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, str):
        return v if v.isidentifier() else json.dumps(v)
    return repr(v)


def as_nd(arch: dict, name: str) -> str:
    """The architecture in the .nd form, written here from Brainstorm's JSON (not by netc): a statement
    per layer, its parents the connections into it in its inputs' order."""
    into: dict = {n: [] for n in arch}
    for src, spec in arch.items():
        conns = spec.get("@outgoing_connections") or {}
        items = conns.items() if isinstance(conns, dict) else [("default", conns)]
        for out, targets in items:
            for t in targets:
                layer, _, inp = t.partition(".")
                into[layer].append((inp or "default", src if out == "default" else f"{src}.{out}"))
    lines = [f"network {name} {{"]
    for lname, spec in arch.items():
        ins = LAYER_IO.get(spec["@type"], (("default",), None))[0]
        order = (lambda i: int(i.split("_")[1])) if ins is None else (lambda i: ins.index(i))
        ordered = sorted(into[lname], key=lambda ip: order(ip[0]))
        kw = {k: v for k, v in spec.items() if not k.startswith("@")}
        names = [i for i, _ in ordered]
        if ins is not None and len(ins) > 1 and len(names) != len(set(names)):   # a fan-in into one of several
            parents, groups = [], {}
            for i, p in ordered:
                groups.setdefault(i, []).append(p)
            kw["inputs"] = groups
        else:
            parents = [p for _, p in ordered]
        body = f" {nd_value(kw)}" if kw else ""
        lines.append(f"  {lname} = {spec['@type']}({', '.join(parents)}){body}")
    return "\n".join(lines + ["}", ""])


def ir_of(text: str, path: str, batch: int = 2) -> str:
    d = DiagnosticEngine()
    m = load_text(text, path, d, batch=batch)
    inference(m, Options(phase="train"), d)
    assert not d.has_errors(), [str(x) for x in d.diagnostics]
    for n in m.networks():
        n.attrs["sym_name"] = "net"
    # the same IR, located in its own file
    return re.sub(r' loc\([^)]*\)', "", print_module(m)).replace(path, "FILE")


@pytest.mark.parametrize("name", sorted(DATA["nets"]))
def test_the_nd_form_imports_as_the_json_form(name):
    arch = DATA["nets"][name]["architecture"]
    nd = as_nd(arch, "net")
    assert ir_of(nd, f"{name}.nd") == ir_of(json.dumps(arch), f"{name}.json")


MNIST_PI = """network mnist_pi {
  Input = Input() { out_shapes: { default: [T, B, 784], targets: [T, B, 1] } }
  Hid1 = FullyConnected(Input) { size: 1200, activation: rel }
  Out = FullyConnected(Hid1) { size: 10, activation: linear }
  Loss = SoftmaxCE(Out, Input.targets)
  Total = Loss(Loss.loss)
}
"""


def test_a_written_network_has_brainstorms_shapes_and_parameters():
    d = DiagnosticEngine()
    m = load_text(MNIST_PI, "mnist_pi.nd", d, batch=100)
    inference(m, Options(phase="train"), d)
    from netc.explain import layer_rows
    rows = {r["name"]: r for r in layer_rows(m)}
    assert sum(r["params"] for r in rows.values()) == 784 * 1200 + 1200 + 1200 * 10 + 10
    assert m.networks()[0].attrs["sym_name"] == "mnist_pi"


@pytest.mark.parametrize("text,where,msg", [
    (MNIST_PI.replace("Input.targets", "Input.labels"), (5, 25), "has no output 'labels'"),
    (MNIST_PI.replace("Hid1 = FullyConnected(Input)", "Hid1 = FullyConected(Input)"), (3, 10),
     "unknown or unsupported Brainstorm layer type 'FullyConected'"),
    (MNIST_PI.replace("activation: rel", "activation: relu"), (3, 50), "activation 'relu' of 'Hid1'"),
    (MNIST_PI.replace("SoftmaxCE(Out, Input.targets)", "SoftmaxCE(Out, Input.targets, Hid1)"), (5, 40),
     "SoftmaxCE 'Loss' takes 2 inputs"),
    (MNIST_PI.replace("(Hid1)", "(Hid2)"), (4, 25), "'Hid2' is no layer of this network"),
    (MNIST_PI.replace("  Total", "  input x: f32[2, 3]\n  Total"), (6, 3), "'input' statements are netc's own"),
])
def test_errors_point_into_the_nd_file(text, where, msg):
    with pytest.raises(NetcError) as e:
        load_text(text, "bad.nd", batch=2)
    diags = e.value.diagnostics
    hit = [x for x in diags if msg in x.message]
    assert hit, [str(x) for x in diags]
    assert (hit[0].loc.file, hit[0].loc.line) == ("bad.nd", where[0]), str(hit[0])
