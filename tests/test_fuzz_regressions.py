"""Regressions from the fuzzer (bench/fuzz.py): one test per class of bug it found, each input
small and inline. Every one of them used to end in an internal error (exit 2), an error without a
line and column, or both; now each is the user's error, at the place in the file that causes it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from netc.cli import main
from netc.ir.query import split_ref_problem

ROOT = Path(__file__).resolve().parent.parent


def run(tmp_path, capsys, name: str, text: str, *command: str) -> tuple[int, str, str]:
    """`netc COMMAND FILE ARGS` on `text` written as tmp_path/name: (exit status, stderr, path)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    cmd, *args = command or ("check",)
    rc = main([cmd, str(path), *args])
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err, err
    return rc, err, str(path)


def located_error(err: str, path: str, line: int, col: int | None = None, text: str = "") -> str:
    """The first error at path:line(:col); asserts there is one, and that no error lacks a line."""
    heads = [ln for ln in err.split("\n") if ": error: " in ln and not ln.startswith(" ")]
    assert heads, err
    for h in heads:
        assert h.startswith(path + ":"), f"an error without a location in the file:\n{err}"
    want = f"{path}:{line}:" + (f"{col}" if col is not None else "")
    hit = [h for h in heads if h.startswith(want)]
    assert hit, f"no error at {want}:\n{err}"
    assert text in hit[0], hit[0]
    return hit[0]


# -- model-parallel references whose split is not an integer ('fc6@x', 'name@]') ----------------

@pytest.mark.parametrize("ref, ok", [
    ("fc6", True), ("fc6@self", True), ("fc6@all", True), ("fc6@0", True), ("b/fc6@12", True),
    ("fc6@x", False), ("fc6@]", False), ("fc6@-1", False), ("fc6@ 1", False), ("fc6@+1", False),
    ("fc6@1_0", False), ("fc6@\u0663", False), ("fc6@1@2", False), ("fc6@", False), ("@0", False),
])
def test_split_suffix_is_self_all_or_an_ascii_index(ref, ok):
    assert (split_ref_problem(ref) is None) == ok


ND_PARALLEL = """network n {
  input data: f32[4, 8, 8, 3]
  parallel p(data) splits 2 {
    fc6 = Convolution() { filter: [1, 1, 3, 4], padding: VALID }
    d6 = Dropout(SUFFIX) { dropout_keep_prob: 0.5 }
  }
  c = Concatenate(p/d6@all) { dim: 3 }
}
"""


@pytest.mark.parametrize("ref", ['"fc6@x"', '"fc6@]"', '"fc6@1@2"', '"fc6@\u0663"'])
def test_nd_quoted_reference_with_a_bad_split(tmp_path, capsys, ref):
    for command in (("check",), ("explain", "--memory", "--brief"), ("opt", "-p", "fuse")):
        rc, err, path = run(tmp_path, capsys, "mp.nd", ND_PARALLEL.replace("SUFFIX", ref), *command)
        assert rc == 1
        located_error(err, path, 5, 18, "the split after '@'" if ref.count("@") == 1 else "more than one '@'")
        assert err.count("error:") == 1, err  # the layer is marked invalid: no follow-on arity error


def _paleo_2gpu(parent: str) -> str:
    conv = {"type": "Convolution", "filter": [1, 1, 3, 4], "strides": [1, 1, 1, 1], "padding": "VALID"}
    doc = {"name": "mp", "layers": {
        "data": {"parents": [], "type": "Input", "tensor": [4, 8, 8, 3]},
        "par": {"type": "ModelParallel", "splits": 2, "parents": ["data"], "layers": {
            "fc6": dict(conv, parents=[]),
            "d6": {"parents": [parent], "type": "Dropout", "dropout_keep_prob": 0.5}}},
        "cat": {"parents": ["par/d6@all"], "type": "Concatenate", "dim": 3}}}
    return json.dumps(doc, indent=1)


@pytest.mark.parametrize("parent", ["fc6@x", "fc6@]", "fc6@-1", "fc6@ 1", "fc6@1@2"])
def test_paleo_parent_with_a_bad_split(tmp_path, capsys, parent):
    text = _paleo_2gpu(parent)
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if json.dumps(parent) in ln)
    for command in (("check",), ("explain", "--memory", "--brief"), ("opt", "-p", "fuse")):
        rc, err, path = run(tmp_path, capsys, "mp.json", text, *command)
        assert rc == 1
        located_error(err, path, line, None, f"'{parent}'")
        assert err.count("error:") == 1, err   # no "unknown attribute 'invalid'" after it


def test_paleo_missing_required_key_is_one_error(tmp_path, capsys):
    doc = {"layers": {"data": {"parents": [], "type": "Input", "tensor": [1, 8, 8, 3]},
                      "c": {"parents": ["data"], "type": "Convolution", "filter": [1, 1, 3, 4], "padding": "SAME"}}}
    rc, err, path = run(tmp_path, capsys, "net.json", json.dumps(doc, indent=1))
    assert rc == 1 and "needs \"strides\"" in err and "'invalid'" not in err, err


IR_PARALLEL = """"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 8, 8, 3]} : () -> tensor<*xf32>
    "netc.parallel"() ({
      %fc6 = "netc.conv2d"() {name = "fc6", filter = [1, 1, 3, 4], padding = "VALID", parents = [], strides = [1, 1, 1, 1]} : () -> tensor<*xf32>
      %d6 = "netc.dropout"() {name = "d6", dropout_keep_prob = 0.5, parents = [PARENT]} : () -> tensor<*xf32>
    }) {name = "p", parents = ["data"], splits = SPLITS} : () -> ()
  }) {sym_name = "n"} : () -> ()
}) : () -> ()
"""


@pytest.mark.parametrize("parent, splits, line, text", [
    ('"fc6@x"', "2", 6, "the split after '@'"),
    ("5", "2", 6, "'parents' of 'd6' must be a list of layer names"),
    ('"fc6@self"', "2147483648", 4, "'splits' of parallel block 'p'"),
    ('"fc6@self"', "0", 4, "'splits' of parallel block 'p'"),
])
def test_ir_parallel_block_read_checked(tmp_path, capsys, parent, splits, line, text):
    ir = IR_PARALLEL.replace("PARENT", parent).replace("SPLITS", splits)
    rc, err, path = run(tmp_path, capsys, "mp.mlir", ir, "explain", "--memory", "--brief")
    assert rc == 1
    located_error(err, path, line, None, text)


def test_expand_model_parallel_reports_a_bad_split_it_is_given(tmp_path):
    """IR built in Python skips the readers: the pass reports, at the reference, instead of int()."""
    from netc.diagnostics import DiagnosticEngine, Loc
    from netc.frontend import load_text
    from netc.passes.manager import PassContext, PassManager
    from netc.diagnostics import NetcError
    module = load_text(ND_PARALLEL.replace("SUFFIX", "fc6"), str(tmp_path / "x.nd"), DiagnosticEngine())
    d6 = next(op for op in module.walk() if op.attrs.get("name") == "d6")
    d6.attrs["parents"] = ["fc6@x"]
    d6.attr_locs["parent0"] = Loc("x.nd", 5, 18)
    diag = DiagnosticEngine()
    with pytest.raises(NetcError) as e:
        PassManager(["expand-model-parallel"]).run(module, PassContext(diag=diag))
    assert any("the split after '@'" in d.message and d.loc.line == 5 for d in e.value.diagnostics)


# -- a zero-size batch: the memory plan divided by it -------------------------------------------

SINGA_CONF = """name: "z"
neuralnet {
  layer {
    name: "data"
    type: kRecordInput
    store_conf {
      backend: "kvfile"
      path: "train.bin"
      batchsize: BATCH
      shape: 3
      shape: 8
      shape: 8
    }
  }
  layer {
    name: "ip"
    type: kInnerProduct
    srclayers: "data"
    innerproduct_conf { num_output: 10 }
    param { name: "w" }
    param { name: "b" }
  }
}
"""


@pytest.mark.parametrize("batch", ["0", "-1"])
def test_singa_batchsize_must_be_positive(tmp_path, capsys, batch):
    for command in (("check",), ("explain", "--memory", "--brief"), ("export", "--format", "layout")):
        rc, err, path = run(tmp_path, capsys, "z.conf", SINGA_CONF.replace("BATCH", batch), *command)
        assert rc == 1
        located_error(err, path, 9, 18, f"store_conf.batchsize must be positive, got {batch}")


def test_nd_zero_batch(tmp_path, capsys):
    text = ("network n {\n  input data: f32[0, 8, 8, 3]\n  c = Convolution(data) { filter: [1, 1, 3, 4] }\n"
            "}\n")
    for command in (("check",), ("explain", "--memory", "--brief"), ("export", "--format", "layout")):
        rc, err, path = run(tmp_path, capsys, "z.nd", text, *command)
        assert rc == 1
        located_error(err, path, 2, 15, "the batch (the first dimension) of an input must be positive")


def test_paleo_zero_batch(tmp_path, capsys):
    doc = {"layers": {"data": {"parents": [], "type": "Input", "tensor": [0, 8, 8, 3]},
                      "c": {"parents": ["data"], "type": "Convolution", "filter": [1, 1, 3, 4],
                            "strides": [1, 1, 1, 1], "padding": "SAME"}}}
    rc, err, path = run(tmp_path, capsys, "z.json", json.dumps(doc, indent=1), "explain", "--memory", "--brief")
    assert rc == 1
    located_error(err, path, 6, 14, "must be positive")


def test_zero_sized_non_batch_dimension_is_still_accepted(tmp_path, capsys):
    """SINGA builds [1, 0] from sizes left at their default 0 (a warning, as before)."""
    text = "network n {\n  input data: f32[1, 0]\n  r = ReLU(data)\n}\n"
    rc, err, _ = run(tmp_path, capsys, "z.nd", text, "explain", "--memory", "--brief")
    assert rc == 0, err


# -- explain --memory after the frontend's errors -------------------------------------------------

def test_memory_plan_stops_at_the_frontend_errors(tmp_path, capsys):
    """Layers the frontend marked invalid have no shapes; the planner used to add an error with no
    location ("cannot plan the memory ... has no inferred shape")."""
    text = "network n {\n  input data: f32[2, 8, 8, 3]\n  c = Convolution(data) { padding: SAME }\n}\n"
    rc, err, path = run(tmp_path, capsys, "n.nd", text, "explain", "--memory", "--brief")
    assert rc == 1 and "cannot plan" not in err
    located_error(err, path, 3, None, "requires attribute 'filter'")


# -- hand-written IR: what the passes take for granted is checked where it is read ---------------

IR_LENET = """"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = SHAPE} : () -> tensor<*xf32>
    %c = "netc.conv2d"() {name = "c", filter = FILTER, padding = "VALID", parents = ["data"], strides = [1, 1, 1, 1]} : () -> tensor<*xf32>
    "netc.block"() ({
      %r = OPNAME() {name = "r", parents = []} : () -> tensor<*xf32>
    }) {name = "b", parents = ["c"]} : () -> ()
  }) NETATTRS : () -> ()
}) : () -> ()
"""


def _ir(shape="[2, 8, 8, 3]", filt="[1, 1, 3, 4]", opname='"netc.relu"', netattrs='{sym_name = "n"}'):
    return (IR_LENET.replace("SHAPE", shape).replace("FILTER", filt).replace("OPNAME", opname)
            .replace("NETATTRS", netattrs))


@pytest.mark.parametrize("kw, line, text", [
    ({}, None, None),
    ({"shape": "[2, 1e400, 8, 3]"}, 3, "attribute 'shape' of Input: expected a list of integers"),
    ({"shape": '[2, "x", 8, 3]'}, 3, "attribute 'shape' of Input"),
    ({"filt": "[1, 1e400, 3, 4]"}, 4, "attribute 'filter' of Convolution"),
    ({"opname": '"SAME"'}, 6, "unknown op SAME"),              # nested in a block
    ({"netattrs": "{}"}, 2, "a network needs a name"),
])
def test_ir_attributes_are_checked_when_read(tmp_path, capsys, kw, line, text):
    for command in (("check",), ("explain", "--memory", "--brief"), ("export", "--format", "singa")):
        rc, err, path = run(tmp_path, capsys, "n.mlir", _ir(**kw), *command)
        if line is None:
            assert rc == 0, err
        else:
            assert rc == 1
            located_error(err, path, line, None, text)


def test_ir_input_without_a_dtype_is_f32(tmp_path, capsys):
    """The schema's default, as in .nd (the memory plan looked up the size of dtype None)."""
    ir = _ir().replace('dtype = "f32", ', "")
    for command in (("explain", "--memory", "--brief"), ("export", "--format", "layout")):
        rc, err, _ = run(tmp_path, capsys, "n.mlir", ir, *command)
        assert rc == 0, err


def test_ir_layer_without_a_name(tmp_path, capsys):
    ir = _ir().replace('{name = "data", dtype', '{dtype')
    rc, err, path = run(tmp_path, capsys, "n.mlir", ir, "export", "--format", "singa")
    assert rc == 1
    located_error(err, path, 3, None, "netc.input needs a name")


# -- export: errors about the file as a whole are located too -------------------------------------

TWO_NETS = "network a {\n  input x: f32[2, 4]\n}\nnetwork b {\n  input y: f32[2, 4]\n}\n"


@pytest.mark.parametrize("fmt", ["paleo", "singa", "layout"])
@pytest.mark.parametrize("text, line", [(TWO_NETS, 4), ("", 1), ("// nothing\n", 1)])
def test_export_needs_one_network_and_says_where(tmp_path, capsys, fmt, text, line):
    rc, err, path = run(tmp_path, capsys, "nets.nd", text, "export", "--format", fmt)
    assert rc == 1
    located_error(err, path, line, None, "this file has")


def test_export_paleo_input_errors_are_located(tmp_path, capsys):
    text = "network n {\n  input x: f32[2, 4]\n  input y: f32[2, 4]\n}\n"
    rc, err, path = run(tmp_path, capsys, "n.nd", text, "export", "--format", "paleo")
    assert rc == 1
    located_error(err, path, 2, None, "named 'data'")
    text = "network n {\n  input data: f32[2, 4]\n  input y: f32[2, 4]\n}\n"
    rc, err, path = run(tmp_path, capsys, "n.nd", text, "export", "--format", "paleo")
    assert rc == 1
    located_error(err, path, 3, None, "one input")


# -- Brainstorm layouts with malformed names and netc metadata -----------------------------------

def _layout(tmp_path, capsys) -> dict:
    rc = main(["explain", str(_lenet(tmp_path)), "--brief", "--layout", str(tmp_path / "l.layout.json")])
    capsys.readouterr()
    assert rc == 0
    return json.loads((tmp_path / "l.layout.json").read_text())


def _lenet(tmp_path):
    p = tmp_path / "tiny.nd"
    p.write_text("network tiny {\n  input data: f32[2, 8, 8, 3]\n  c = Convolution(data) { filter: [3, 3, 3, 4] }\n"
                 "  r = ReLU(c)\n}\n")
    return p


def _alias_to_a_malformed_tensor(doc):
    (a, ea), (b, eb) = list(doc["netc"]["tensors"].items())[:2]
    eb["slice"] = "x"
    ea["alias"] = ["inplace", b]


@pytest.mark.parametrize("mutate, text", [
    (lambda d: d["layout"]["layout"].__setitem__("c.x", d["layout"]["layout"].pop("c")), "not a Python identifier"),
    (lambda d: d["netc"]["arrays"].__setitem__(next(iter(d["netc"]["arrays"])), ["a", "b"]), "names no tensor"),
    (lambda d: d["netc"].__setitem__("end", "x"), "expected the last schedule step"),
    (lambda d: next(iter(d["netc"]["tensors"].values())).__setitem__("alias", ["inplace", ["x"]]),
     "expected [kind, tensor]"),
    (_alias_to_a_malformed_tensor, "expected [buffer_type, start, stop]"),
])
def test_layout_with_malformed_names_or_metadata(tmp_path, capsys, mutate, text):
    doc = _layout(tmp_path, capsys)
    mutate(doc)
    rc, err, path = run(tmp_path, capsys, "bad.layout.json", json.dumps(doc, indent=1))
    assert rc == 1 and text in err, err
    assert all(h.startswith(path + ":") for h in err.split("\n") if ": error: " in h and not h.startswith(" "))



# -- hand-written IR: module-level ops among a network's layers, values of ops that define none ----

IR_NET = """"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4]} : () -> tensor<2x4xf32>
LINE
    "netc.output"(%r) : (tensor<2x4xf32>) -> ()
  }) {sym_name = "n"} : () -> ()
}) : () -> ()
"""

IR_COMMANDS = (("check",), ("explain", "--memory", "--brief"), ("opt", "-p", "fuse"), ("export", "--format", "singa"),
               ("export", "--format", "layout"))


@pytest.mark.parametrize("line, at, text", [
    # a parameter declaration as a layer: the memory plan looked its value up (KeyError)
    ('    %r = "netc.param"(%data) {name = "r"} : (tensor<2x4xf32>) -> tensor<2x4xf32>', 4,
     "netc.param belongs at the top level of the module"),
    # a network nested in a network: exported as a SINGA net with no input ("netc: error: ...")
    ('    %r = "netc.relu"(%data) {name = "r"} : (tensor<2x4xf32>) -> tensor<2x4xf32>\n'
     '    "netc.network"() ({\n    }) {sym_name = "m"} : () -> ()', 5, "netc.network belongs at the top level"),
    # an output statement that defines a value, read by a layer
    ('    %o = "netc.output"(%data) : (tensor<2x4xf32>) -> tensor<2x4xf32>\n'
     '    %r = "netc.relu"(%o) {name = "r"} : (tensor<2x4xf32>) -> tensor<2x4xf32>', 4, "netc.output defines no value"),
    # a layer with two results (shape inference set the first, the memory plan read both)
    ('    %r, %s = "netc.relu"(%data) {name = "r"} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)', 4,
     "defines one value"),
    # params that are not a dictionary (AttributeError: 'float' object has no attribute 'items')
    ('    %r = "netc.relu"(%data) {name = "r", params = 0.5} : (tensor<2x4xf32>) -> tensor<2x4xf32>', 4,
     "'params' of 'r' must be a dictionary"),
    ('    %r = "netc.inner_product"(%data) {name = "r", num_outputs = 4, params = {weight = 1}} : '
     '(tensor<2x4xf32>) -> tensor<2x4xf32>', 4, "parameter 'weight' of 'r' must be @param or a dictionary"),
    # params on an op without parameters, or a role the op does not have: specs no pass binds, read
    # as bound ones by explain (AttributeError: 'dict' object has no attribute 'name')
    ('    %r = "netc.lrn"(%data) {name = "r", params = {weight = {name = "w"}}} : (tensor<2x4xf32>) -> '
     'tensor<2x4xf32>', 4, "'r' (netc.lrn) has no parameters to bind"),
    ('    %r = "netc.inner_product"(%data) {name = "r", num_outputs = 4, params = {kernel = {name = "k"}}} : '
     '(tensor<2x4xf32>) -> tensor<2x4xf32>', 4, "'r' (netc.inner_product) has no parameter 'kernel'"),
])
def test_ir_ops_out_of_place_are_located(tmp_path, capsys, line, at, text):
    ir = IR_NET.replace("LINE", line)
    for command in IR_COMMANDS:
        rc, err, path = run(tmp_path, capsys, "n.mlir", ir, *command)
        assert rc == 1
        located_error(err, path, at, 5, text)


@pytest.mark.parametrize("lc, text", [
    ("16:2147483648", "got 2147483648"),            # a caret 2^31 columns to the right: a hang
    ("16:99999999999999999999999999", "got 9999"),  # OverflowError drawing the caret
    ("0:3", "got 0"),                                # line 0 is "no line": the error named no line
])
def test_ir_loc_line_and_column_are_bounded(tmp_path, capsys, lc, text):
    ir = _ir().replace("strides = [1, 1, 1, 1]} : () -> tensor<*xf32>",
                       f'strides = [1, 1, 1, 1]}} : () -> tensor<*xf32> loc("net.nd":{lc})', 1)
    for command in (("check",), ("export", "--format", "paleo")):
        rc, err, path = run(tmp_path, capsys, "n.mlir", ir, *command)
        assert rc == 1
        located_error(err, path, 4, None, f"a line or column in loc(...) must be from 1 to 2147483647, {text}")


def test_a_column_past_the_end_of_the_line_is_drawn_at_its_end():
    """A diagnostic may point past its line (IR text's loc(...) into a file edited since): the
    caret goes just after the line, not 2^31 spaces to the right."""
    from netc.diagnostics import Diagnostic, Loc, SourceManager, render
    sources = SourceManager()
    sources.add("f.nd", "abc\n")
    out = render(Diagnostic("warning", "w", Loc("f.nd", 1, 2 ** 31 - 1)), sources)
    assert out.split("\n")[1:3] == ["abc", "   ^"]


# -- .nd: a layout section's errors are located even when the section is empty ------------------

def test_nd_empty_layout_section_is_located(tmp_path, capsys):
    text = "network n {\n  input data: f32[2, 4]\n  r = ReLU(data)\n  layout { }\n}\n"
    for command in (("check",), ("explain", "--memory", "--brief"), ("export", "--format", "layout")):
        rc, err, path = run(tmp_path, capsys, "n.nd", text, *command)
        assert rc == 1
        located_error(err, path, 4, 3, "layout $.sizes")


# -- SINGA: absurd partition counts, layers reading a data layer's records ------------------------

SINGA_V01 = """name: "p"
train_steps: 10
train_one_batch { alg: kBP }
updater { type: kSGD learning_rate { type: kFixed base_lr: 0.01 } }
neuralnet {
  layer {
    name: "data"
    type: kShardData
    sharddata_conf { path: "examples/mnist/mnist_train_shard" batchsize: 64 }
  }
  layer {
    name: "mnist"
    type: kMnist
    srclayers: "data"
    mnist_conf { norm_a: 255 norm_b: 0 }
  }
  layer {
    name: "ip"
    type: kInnerProduct
    srclayers: "SRC"
    innerproduct_conf { num_output: 10 }
    param { name: "w" init { type: kUniform } }
    param { name: "b" init { type: kUniform } }
  }
}
cluster {
  nworker_groups: 1
  nserver_groups: 1
  nworkers_per_group: WORKERS
  workspace: "examples/mnist"
}
"""


def test_singa_v01_sample_reads(tmp_path, capsys):
    rc, err, _ = run(tmp_path, capsys, "p.conf", SINGA_V01.replace("SRC", "mnist").replace("WORKERS", "2"))
    assert rc == 0, err


@pytest.mark.parametrize("workers", ["2147483647", "33"])
def test_singa_partition_count_is_bounded(tmp_path, capsys, workers):
    """K nodes per partitioned layer, and K x K connections: 2^31 workers was a hang."""
    text = SINGA_V01.replace("SRC", "mnist").replace("WORKERS", workers)
    for command in (("check",), ("explain", "--memory", "--brief"), ("export", "--format", "layout")):
        rc, err, path = run(tmp_path, capsys, "p.conf", text, *command)
        assert rc == 1
        located_error(err, path, 29, None, "the number of partitions must be at most 32")


SINGA_UNROLLED = """name: "u"
train_steps: 10
train_one_batch { alg: kBPTT }
updater { type: kSGD learning_rate { type: kFixed base_lr: 0.01 } }
neuralnet {
  unroll_len: UNROLL
  layer {
    name: "data"
    type: kRecordInput
    store_conf { backend: "kvfile" path: "train.bin" batchsize: 64 shape: 8 }
  }
  layer {
    name: "ip"
    type: kInnerProduct
    srclayers: "data"
    innerproduct_conf { num_output: 64 }
    param { name: "w" }
    param { name: "b" }
  }
}
cluster { nworkers_per_group: WORKERS }
"""


@pytest.mark.parametrize("unroll, workers, text", [
    ("512", "1", None),
    ("2147483647", "1", "unroll_len of layer 'data' is 2147483647; netc unrolls a layer into one copy per step and "
                        "allows at most 512"),
    ("512", "32", "this net unrolls into 1024 layers, 32768 nodes with its 32 partitions"),
])
def test_singa_unrolling_is_bounded(tmp_path, capsys, unroll, workers, text):
    """One copy of every layer per step: unroll_len 2^31 was a hang."""
    doc = SINGA_UNROLLED.replace("UNROLL", unroll).replace("WORKERS", workers)
    rc, err, path = run(tmp_path, capsys, "u.conf", doc, "check")
    if text is None:
        assert rc == 0, err
        return
    assert rc == 1
    located_error(err, path, 6, 3, text)
    assert err.count("error:") == 1, err  # once, not once per layer inheriting the net's unroll_len


def test_singa_layer_reading_a_data_layers_records(tmp_path, capsys):
    """kShardData's output is records (shape []): only a parser layer reads them (IndexError)."""
    text = SINGA_V01.replace("SRC", "data").replace("WORKERS", "1")
    for command in (("check",), ("explain", "--memory", "--brief"), ("export", "--format", "paleo")):
        rc, err, path = run(tmp_path, capsys, "p.conf", text, *command)
        assert rc == 1
        located_error(err, path, 18, None, "kInnerProduct needs an input with a batch dimension")


# -- Brainstorm: values of the wrong JSON type ----------------------------------------------------

def _brainstorm(over=None) -> str:
    arch = {
        "Input": {"@type": "Input", "out_shapes": {"default": ["T", "B", 4], "targets": ["T", "B", 1]},
                  "@outgoing_connections": {"default": ["Hid.default"], "targets": ["Output.targets"]}},
        "Hid": {"@type": "FullyConnected", "activation": "rel", "size": 2,
                "@outgoing_connections": {"default": ["Output.default"]}},
        "Output": {"@type": "SoftmaxCE", "@outgoing_connections": {}}}
    for (layer, key), v in (over or {}).items():
        arch[layer][key] = v
    return json.dumps({"architecture": arch}, indent=1)


def test_brainstorm_sample_reads(tmp_path, capsys):
    rc, err, _ = run(tmp_path, capsys, "b.json", _brainstorm(), "explain", "--memory", "--brief")
    assert rc == 0, err


@pytest.mark.parametrize("over, key, text", [
    ({("Hid", "activation"): [[1]]}, '"activation"', "activation [[1]] of 'Hid' is not one netc knows"),
    ({("Input", "out_shapes"): 1e308}, '"out_shapes"', "Input layer 'Input' needs \"out_shapes\""),
])
def test_brainstorm_values_of_the_wrong_type(tmp_path, capsys, over, key, text):
    doc = _brainstorm(over)
    line = next(i for i, ln in enumerate(doc.split("\n"), 1) if key in ln)
    for command in (("check",), ("explain", "--memory", "--brief"), ("export", "--format", "singa")):
        rc, err, path = run(tmp_path, capsys, "b.json", doc, *command)
        assert rc == 1
        located_error(err, path, line, None, text)


# -- the attributes every layer may carry: checked in Paleo files and hand-written IR too --------

def test_paleo_layer_splits_must_be_a_count(tmp_path, capsys):
    """A layer's own "splits" (its filters split across workers) reached co // splits as a string."""
    conv = {"parents": ["data"], "type": "Convolution", "filter": [1, 1, 3, 4], "strides": [1, 1, 1, 1],
            "padding": "SAME", "splits": "relu"}
    doc = json.dumps({"layers": {"data": {"parents": [], "type": "Input", "tensor": [2, 8, 8, 3]}, "c": conv}},
                     indent=1)
    line = next(i for i, ln in enumerate(doc.split("\n"), 1) if '"splits"' in ln)
    for command in (("check",), ("explain", "--memory", "--brief"), ("opt", "-p", "fuse")):
        rc, err, path = run(tmp_path, capsys, "n.json", doc, *command)
        assert rc == 1
        located_error(err, path, line, 14, "'splits' must be an integer from 1 to 4096, got 'relu'")


@pytest.mark.parametrize("attr, text", [
    ('splits = "relu"', "'splits' must be an integer from 1 to 4096"),         # TypeError in conv_geometry
    ("splits = 2147483648", "'splits' must be an integer from 1 to 4096"),
    ('split_index = "x"', "'split_index' must be an integer"),
    ("include = 5", "'include' must be a list of phases"),                      # TypeError in select-phase
    ('exclude = "train"', "'exclude' must be a list of phases"),
    ('partition_dim = "x"', "'partition_dim' must be -1, 0 or 1"),
    ("location = -1", "'location' must be a worker index >= 0"),
])
def test_ir_common_layer_attributes_are_checked(tmp_path, capsys, attr, text):
    ir = _ir().replace('{name = "c", filter', f'{{name = "c", {attr}, filter')
    for command in (("check",), ("explain", "--memory", "--brief"), ("export", "--format", "layout")):
        rc, err, path = run(tmp_path, capsys, "n.mlir", ir, *command)
        assert rc == 1
        located_error(err, path, 4, 5, text)


def test_ir_layer_reading_one_left_out_of_the_phase(tmp_path, capsys):
    """Resolved IR (operands, not parents names): select-phase dropped 'c' under the relu that reads
    it, and the verifier failed after the pass (an internal error)."""
    ir = IR_NET.replace("LINE", '    %c = "netc.relu"(%data) {name = "c", exclude = ["train"]} : (tensor<2x4xf32>) -> '
                                'tensor<2x4xf32>\n'
                                '    %r = "netc.relu"(%c) {name = "r"} : (tensor<2x4xf32>) -> tensor<2x4xf32>')
    for command in (("check",), ("explain", "--memory", "--brief"), ("opt", "-p", "fuse")):
        rc, err, path = run(tmp_path, capsys, "n.mlir", ir, *command)
        assert rc == 1
        located_error(err, path, 5, 5, "'r' reads 'c', which is not in phase train")
    rc, err, _ = run(tmp_path, capsys, "n.mlir", ir, "check", "--phase", "test")
    assert rc == 0, err


# -- the surfaces bench/fuzz.py reaches since issue 21: explain --train / --workers, tuning files,
#    parameter and data files, the Python API ---------------------------------------------------

TWO_SMALL_NETS = """network a {
  input x: f32[2, 4]
  y = InnerProduct(x) { num_outputs: 3 }
}
network b {
  input x: f32[2, 4]
  y = InnerProduct(x) { num_outputs: 3 }
}
"""


@pytest.mark.parametrize("text, line", [(TWO_SMALL_NETS, 5), ("// nothing\n", 1), ("", 1)])
def test_explain_workers_simulation_needs_one_network_and_says_where(tmp_path, capsys, text, line):
    """Paleo's scaling table takes one network: the error was `netc: error:` without a place."""
    rc, err, path = run(tmp_path, capsys, "n.nd", text, "explain", "--workers", "2", "--device", "titanx")
    assert rc == 1
    located_error(err, path, line, 1 if line == 1 else 9, "Paleo's simulations take a file with exactly one network")
    rc, err, path = run(tmp_path, capsys, "n.nd", text, "compile", "--target", "interp", "-o", str(tmp_path / "o"))
    assert rc == 1
    located_error(err, path, line, 1 if line == 1 else 9, "netc compile needs a file with exactly one network")


def test_explain_workers_stops_at_the_frontend_errors(tmp_path, capsys):
    """A layer the frontend marked invalid reached the partition pass, which stopped with ''fc1' has
    no inferred shape; run shape-inference first' (no location) after the located error."""
    text = (ROOT / "examples" / "partition_feature.nd").read_text().replace("InnerProduct", "InerProduct", 1)
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if "InerProduct" in ln)
    rc, err, path = run(tmp_path, capsys, "p.nd", text, "explain", "--workers", "2", "--device", "titanx")
    assert rc == 1
    located_error(err, path, line, None, "unknown layer type 'InerProduct'")
    assert "no inferred shape" not in err


def test_ir_recorded_optimizer_with_a_bad_option_is_located(tmp_path, capsys):
    """IR text keeps the module's optimizer as an attribute its reader does not check; the optimizer
    pass's error about it had no location."""
    from netc.cli import main as netc_main
    ir = tmp_path / "c.mlir"
    assert netc_main(["opt", str(ROOT / "examples" / "cifar10_phases.nd"), "--no-locs", "-o", str(ir)]) == 0
    text = ir.read_text().replace("weight_decay", "weigt_decay")
    capsys.readouterr()
    rc, err, path = run(tmp_path, capsys, "c.mlir", text, "explain", "--brief", "--train", "--loss", "softmax",
                        "--memory")
    assert rc == 1
    located_error(err, path, 1, 1, "option 'weigt_decay' does not apply to optimizer 'momentum'")


SMALL = """network small {
  input data: f32[2, 4, 4, 1]
  input label: i32[2]
  conv1 = Convolution(data) { filter: [3, 3, 1, 2], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  fc1 = InnerProduct(conv1) { num_outputs: 3 }
  loss = SoftmaxLoss(fc1, label)
  output loss
}
"""


def _run_with(tmp_path, capsys, name: str, content: bytes, *args: str) -> tuple[int, str, str]:
    """`netc run small.nd ARGS` with FILE in ARGS replaced by tmp_path/name holding `content`."""
    net = tmp_path / "small.nd"
    net.write_text(SMALL)
    f = tmp_path / name
    f.write_bytes(content)
    rc = main(["run", str(net), *[str(f) if a == "FILE" else a for a in args]])
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err, err
    return rc, err, str(f)


def _file_error(err: str, path: str, text: str) -> str:
    """The one error line: it names the file (as its location) and says `text` (what in it is wrong)."""
    heads = [ln for ln in err.split("\n") if ": error: " in ln and not ln.startswith(" ")]
    assert heads and all(h.startswith(path + ":") for h in heads), err
    assert text in heads[0], heads[0]
    return heads[0]


def _npz(**arrays) -> bytes:
    import io

    import numpy as np
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _small_params(**over):
    import numpy as np
    p = {"conv1.weight": np.zeros((3, 3, 1, 2), np.float32), "conv1.bias": np.zeros(2, np.float32),
         "fc1.weight": np.zeros((32, 3), np.float32), "fc1.bias": np.zeros(3, np.float32)}
    p.update(over)
    return {k: v for k, v in p.items() if v is not None}


@pytest.mark.parametrize("content, text", [
    (lambda np: _npz(**_small_params(**{"conv1.weight": np.zeros((2, 3, 1, 2), np.float32)})),
     "parameter 'conv1.weight' has shape [2, 3, 1, 2]"),
    (lambda np: _npz(**_small_params(**{"CONV1.WEIGHT": np.zeros(1, np.float32)})), "unknown parameter 'CONV1.WEIGHT'"),
    (lambda np: _npz(**_small_params())[:300], "cannot read"),                          # was BadZipFile (exit 2)
    (lambda np: _npz(**_small_params())[:40] + b"\x00" * 8 + _npz(**_small_params())[48:], "cannot read"),
    (lambda np: _npz(**_small_params(**{"fc1.bias": np.zeros(3, np.complex64)})), "'fc1.bias'"),
    (lambda np: _npz(**_small_params(**{"fc1.bias": np.zeros(3, np.uint32)})), "'fc1.bias'"),
])
def test_parameter_file_errors_name_the_file_and_the_array(tmp_path, capsys, content, text):
    import numpy as np
    rc, err, path = _run_with(tmp_path, capsys, "p.npz", content(np), "--reference", "--params", "FILE")
    assert rc == 1
    _file_error(err, path, text)


def test_safetensors_parameter_file_errors_name_the_file(tmp_path, capsys):
    import numpy as np

    from netc.runtime.params import write_safetensors
    bad = _small_params(**{"conv1.bias": np.zeros(1, np.float32)})
    write_safetensors(str(tmp_path / "w.safetensors"), {k: __import__("torch").from_numpy(v) for k, v in bad.items()})
    rc, err, path = _run_with(tmp_path, capsys, "p.safetensors", (tmp_path / "w.safetensors").read_bytes(),
                              "--reference", "--params", "FILE")
    assert rc == 1
    _file_error(err, path, "parameter 'conv1.bias' has shape [1]")


@pytest.mark.parametrize("arrays, text", [
    (dict(label=[0, 1, 7, 0]), "'label' holds the label 7"),        # was RuntimeError: index 7 is out of bounds
    (dict(label=[0, -1, 2, 0]), "'label' holds the label -1"),
    (dict(label=[0.5, 1, 2, 0]), "'label' feeds an integer input and must hold integers"),
    (dict(label=None), "no array for input 'label'"),
    (dict(extra=[1, 2, 3, 4]), "array 'extra' feeds no input"),
    (dict(label=[0, 1]), "every array needs the same number of samples"),
    (dict(data="bool"), "'data' has dtype bool"),
    (dict(data="nan"), "'data' holds a value that is not finite (NaN or infinity) in sample 2"),  # the loss was NaN
    # named the file but none of its arrays (the fuzzer's 'unlocated', seed 21)
    (dict(data="one", label=[0]), "1 sample is fewer than one batch of 2 (arrays 'data', 'label')"),
])
def test_data_file_errors_name_the_file(tmp_path, capsys, arrays, text):
    import numpy as np
    d = {"data": np.zeros((4, 4, 4, 1), np.float32), "label": np.array([0, 1, 2, 0], np.int32)}
    for k, v in arrays.items():
        if v is None:
            del d[k]
        elif v == "bool":
            d[k] = d[k].astype(bool)
        elif v == "nan":
            d[k][2, 1, 1, 0] = np.nan
        elif v == "one":
            d[k] = d[k][:1]
        else:
            d[k] = np.array(v)
    rc, err, path = _run_with(tmp_path, capsys, "d.npz", _npz(**d), "--reference", "--train", "--steps", "1",
                              "--data", "FILE")
    assert rc == 1
    _file_error(err, path, text)


def test_data_file_that_is_no_archive(tmp_path, capsys):
    rc, err, path = _run_with(tmp_path, capsys, "d.npz", b"PK\x03\x04 not a zip at all", "--reference", "--train",
                              "--data", "FILE")
    assert rc == 1
    _file_error(err, path, "cannot read")


TUNING = '{"format": "netc-tuning", "version": 1, "entries": [\n {"key": "k", "arch": 90,\n  "config": {X}}]}'


@pytest.mark.parametrize("text, line, col, msg", [
    (TUNING.replace("X", '"group_m": 0'), 3, 25, "'group_m' must be an integer in [1, 64], got 0"),
    (TUNING.replace("X", '"block_n": 1e-308'), 3, 25, "'block_n' must be an integer in [16, 512]"),
    (TUNING.replace("X", '"blockm": 64'), 3, 24, "unknown configuration key 'blockm'"),
    (TUNING.replace('"key": "k", ', "").replace("X", ""), 2, 2, 'needs a "key" (string)'),
    (TUNING.replace('"arch": 90', '"arch": true').replace("X", ""), 2, 23, 'needs an integer "arch"'),
    (TUNING.replace('"version": 1', '"version": 7').replace("X", ""), 1, 38, "tuning file version 7"),
    (TUNING.replace("netc-tuning", "netc").replace("X", ""), 1, 12, "is not a netc tuning file"),
])
def test_tuning_file_errors_are_located(tmp_path, capsys, text, line, col, msg):
    """Every problem in a tuning file was `t.json: error:` without a line; now at its value."""
    rc, err, path = _run_with(tmp_path, capsys, "t.json", text.encode(), "--target", "interp", "--tuning", "FILE")
    assert rc == 1
    located_error(err, path, line, col, msg)


def test_explain_train_stops_at_the_frontend_errors(tmp_path, capsys):
    """Issue 21 item 6: a layer the frontend marked invalid (a filter with a list inside) reached the
    backward pass, whose shape rules failed on it (TypeError: object of type 'NoneType' has no len())."""
    text = (ROOT / "examples" / "partition_location.nd").read_text()
    text = text.replace("filter: [3, 3, 8, 8]", "filter: [3, 3, [1, 2], 8]", 1)
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if "[1, 2]" in ln)
    rc, err, path = run(tmp_path, capsys, "p.nd", text, "explain", "--brief", "--train", "--loss", "softmax",
                        "--memory")
    assert rc == 1
    located_error(err, path, line, None, "attribute 'filter' of Convolution")


def test_api_data_layer_of_the_wrong_dtype_type(tmp_path):
    """netc.layer.data("x", [8], {}): TypeError (unhashable type) inside netc."""
    import netc
    from netc.api import Error
    for bad in ({}, [0, 0], 3):
        with pytest.raises(Error, match="unknown element type"):
            netc.layer.data("x", [8], bad)


def test_api_data_layer_shape_of_the_wrong_type(tmp_path):
    """netc.layer.data("x", 1e308): a TypeError from list() inside netc; now the API's own error at the call."""
    import netc
    from netc.api import Error
    for bad in (1e308, "abc", None, {"a": 1}):
        with pytest.raises(Error, match="shape is the per-sample shape") as e:
            netc.layer.data("x", bad)
        assert "test_fuzz_regressions.py:" in str(e.value)


# -- explain --train on IR text whose layer no longer fits its declared parameter --------------

@pytest.mark.parametrize("old, new, layer", [
    ("shape = [64, 28, 28, 1]", "shape = [64, 28, 99999999999999999999999999, 1]", "ip1"),   # an input's shape
    ("num_outputs = 500", "num_outputs = 7", "ip1"),                                          # a layer's attribute
])
def test_ir_declared_parameter_must_fit_its_layer(tmp_path, capsys, old, new, layer):
    """IR text declares every parameter's type (netc.param); a layer whose inputs or attributes were
    changed needs another shape. materialize-params skipped bound layers, and the optimizer pass
    failed an assertion ("gradient of 'ip1.weight' has shape [4999..., 500], the parameter [800, 500]")."""
    ir = tmp_path / "seed.mlir"
    assert main(["opt", str(ROOT / "examples" / "lenet.nd"), "--no-locs", "-p", "fuse", "-o", str(ir)]) == 0
    text = ir.read_text()
    assert old in text
    text = text.replace(old, new, 1)
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if f'%{layer} = ' in ln)
    for cmd in (("explain", "--brief", "--train", "--loss", "softmax", "--memory"), ("check",)):
        rc, err, path = run(tmp_path, capsys, "l.mlir", text, *cmd)
        assert rc == 1, err
        located_error(err, path, line, None, f"parameter '{layer}.weight' of '{layer}' is declared")


# -- a parameter's number attributes (lr_scale, std ...) given a list or a string ---------------

@pytest.mark.parametrize("value", ["[1, 2]", '"x"', "true", "nan"])
def test_nd_parameter_number_attributes_are_numbers(tmp_path, capsys, value):
    """examples/cifar10_phases.nd with `lr_scale: [1, 2]`: the optimizer pass's float() failed
    (TypeError: float() argument must be ... not 'list')."""
    text = (ROOT / "examples" / "cifar10_phases.nd").read_text()
    assert "lr_scale: 2.0" in text
    text = text.replace("lr_scale: 2.0", f"lr_scale: {value}", 1)
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if f"lr_scale: {value}" in ln)
    rc, err, path = run(tmp_path, capsys, "c.nd", text, "explain", "--brief", "--train", "--loss", "softmax")
    assert rc == 1, err
    located_error(err, path, line, None, "parameter attribute 'lr_scale' must be a finite number")


@pytest.mark.parametrize("value", ["[1, 2]", '"x"'])
def test_ir_parameter_number_attributes_are_numbers(tmp_path, capsys, value):
    """The same in IR text's netc.param (lr_scale = [1, 2]): float() failed in the optimizer pass."""
    ir = tmp_path / "seed.mlir"
    assert main(["opt", str(ROOT / "examples" / "cifar10_phases.nd"), "--no-locs", "-o", str(ir)]) == 0
    text = ir.read_text().replace("lr_scale = 2.0", f"lr_scale = {value}", 1)
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if f"lr_scale = {value}" in ln)
    rc, err, path = run(tmp_path, capsys, "c.mlir", text, "explain", "--brief", "--train", "--loss", "softmax")
    assert rc == 1, err
    located_error(err, path, line, None, "parameter attribute 'lr_scale' must be a finite number")


# -- the Python API given a layer (or a number) where it takes topologies -----------------------

def test_api_to_nd_and_to_ir_take_layers_and_locate_the_rest():
    """netc.api.to_nd(layer): TypeError: 'Layer' object is not iterable, from list() inside netc.
    A layer (or a list of them) is a topology's output, as netc.parameters.create takes it; anything
    else is the API's own error at the caller's line, as is netc.Topology(5)."""
    import netc
    from netc.api import Error
    L = netc.layer
    v0 = L.data("x0", [8], "f32")
    v1 = L.multiply(v0, v0)
    assert "network" in netc.api.to_nd(v1)
    assert netc.api.to_nd([v1]) == netc.api.to_nd(v1)
    assert "netc.multiply" in netc.api.to_ir(v1) or "multiply" in netc.api.to_ir(v1)
    for call in (lambda: netc.api.to_nd(5), lambda: netc.api.to_ir(5), lambda: netc.api.to_ir([]),
                 lambda: netc.Topology(5)):
        with pytest.raises(Error) as e:
            call()
        assert "test_fuzz_regressions.py:" in str(e.value)


# -- explain --train on SINGA's unrolled char-rnn: seconds in the memory planner ----------------

def test_memory_offsets_numpy_path_matches_the_reference_loop():
    """The char-rnn jobs (50 unrolled steps, ~600 buffers per arena) spent seconds in
    assign_offsets' per-buffer Python loops (the fuzzer's 10 s hangs); the numpy path (overlap
    matrix, vectorized best fit, breadth order by first step) must give the same offsets."""
    import random

    from netc.memory import offsets as O
    rng = random.Random(7)
    for _ in range(300):
        T = rng.randint(1, 30)
        bufs = []
        for i in range(rng.randint(1, 40)):
            a = rng.randint(0, T)
            bufs.append((i, rng.choice([0, 64, 128, 64 * rng.randint(1, 500)]), a, rng.randint(a, T)))
        base = rng.choice([0, 256])
        for strat in O.STRATEGIES:
            fast = O.assign_offsets(bufs, strat, base)
            O._MATRIX_MAX, saved = 0, O._MATRIX_MAX
            try:
                slow = O.assign_offsets(bufs, strat, base)
            finally:
                O._MATRIX_MAX = saved
            assert fast == slow, (strat, bufs, base)


def test_singa_char_rnn_explain_train_is_fast(capsys):
    """explain --train --memory of the 0.3.0 char-rnn job: about 4 s (10 s under load) before."""
    import time
    job = ROOT.parent / "shared" / "corpus" / "singa" / "0.3.0_char-rnn_job.conf"
    if not job.exists():
        pytest.skip("the shared corpus is not here")
    main(["check", str(job)])       # imports and caches out of the timing
    t0 = time.process_time()
    rc = main(["explain", str(job), "--brief", "--train", "--loss", "softmax", "--memory"])
    dt = time.process_time() - t0
    capsys.readouterr()
    assert rc == 0
    assert dt < 2.5, f"{dt:.1f} s of CPU"


# -- JSON with locations: the json module's fast path reads as the strict reader does ----------

def test_json_fast_path_reads_as_the_strict_reader():
    """load_json takes its values from Python's json module and its locations from one scan of the
    tokens (Paleo/Brainstorm seeds were a fifth of the fuzzer's time in the recursive reader); any
    document that path does not take as the reader would (NaN, \\u escapes, repeated keys, errors)
    goes to _Reader. Both give the same values, locations, duplicates and errors."""
    import random

    from netc.diagnostics import NetcError
    from netc.frontend import jsonloc

    def strict(text):
        r = jsonloc._Reader(text, "f.json")
        v = r.value("$")
        r.ws()
        if r.i != len(r.s):
            r.fail("extra data after the JSON value")
        return v, r.locs, r.dups

    def outcome(load, text):
        try:
            v, locs, dups = load(text)
            return "ok", repr(v), list(locs.items()), [(p, a, b) for p, a, b in dups]
        except NetcError as e:
            return "error", str(e), [d.loc for d in e.diagnostics]

    texts = [p.read_text() for p in sorted((ROOT / "examples").glob("*.json"))]
    corpus = ROOT.parent / "shared" / "corpus"
    texts += [p.read_text() for sub in ("paleo", "brainstorm") for p in sorted((corpus / sub).glob("*.json"))]
    texts += ['{"layers": {"a": {"type": "Input", "tensor": [1, 2]}, "b\\tc": [1.5e3, -0, true, null, "x\\"y"]}}',
              '{"k": 1, "k": 2}', "[NaN]", '["\\u0041"]', "[1,]", '{"a": 1,}', "[1 2]", "", "[01]", "{}", "[]",
              "[" * 300 + "]" * 300]
    rng = random.Random(0)
    for t in list(texts):
        for _ in range(8):
            i = rng.randrange(len(t) + 1)
            texts.append(t[:i] + rng.choice(['"', ",", "}", "]", "{", "\\", " ", "1e5", "NaN", '"k": 1,']) + t[i:])
    fast = 0
    for t in texts:
        fast += jsonloc._load_fast(t, "f.json") is not None
        assert outcome(lambda s: jsonloc.load_json(s, "f.json"), t) == outcome(strict, t), t[:200]
    assert fast > len(texts) // 10


# -- the Python API's friendly builders given an argument of the wrong kind ----------------------

@pytest.mark.parametrize("call, text", [
    (lambda L, v: L.reshape(v, float("inf")), "reshape's shape is a list of integers"),
    (lambda L, v: L.conv2d([], [3, 3], 2), "conv2d takes one input layer, got 0"),
    (lambda L, v: L.conv2d(v, None, 2), "filter_size is an integer or (height, width)"),
    (lambda L, v: L.pool(v, None), "pool_size is an integer or (height, width)"),
    (lambda L, v: L.dropout(v, dropout_rate=b"x"), "dropout_rate is a number"),
    (lambda L, v: L.softmax_loss([], v), "softmax_loss takes one input layer, got 0"),
    (lambda L, v: L.rank_cost([v, v], v, v), "rank_cost takes one input layer, got 2"),
    (lambda L, v: L.embedding([v, v], 3), "embedding takes one input layer, got 2"),
])
def test_api_builders_locate_arguments_of_the_wrong_kind(call, text):
    """The fuzzer's API scripts (seed 21): list(float) in reshape, [][0] in conv2d, None[0] in pool,
    1.0 - b"x" in dropout -- TypeErrors and IndexErrors from inside netc.api.layer; now each is the
    API's error at the caller's line."""
    import netc
    from netc.api import Error
    v = netc.layer.data("x", [4, 4, 3])
    with pytest.raises(Error, match=None) as e:
        call(netc.layer, v)
    assert text in str(e.value) and "test_fuzz_regressions.py:" in str(e.value), str(e.value)



def test_interp_target_arena_larger_than_memory_is_located(tmp_path, capsys):
    """compile --target interp of a SINGA job whose input shape became 2^31 - 1 (seed 21): torch's
    allocator refused a 1 PB arena (RuntimeError: can't allocate memory); the arena is checked
    against the machine's memory first, and the error points at the layer of the largest tensor."""
    text = SMALL.replace("f32[2, 4, 4, 1]", "f32[2, 4, 2147483647, 1]")
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if ln.strip().startswith("fc1 ="))
    rc, err, path = run(tmp_path, capsys, "big.nd", text, "compile", "--target", "interp", "-o",
                        str(tmp_path / "out"))
    assert rc == 1, err
    located_error(err, path, line, None, "the interpreter target needs a")
    assert "parameter 'fc1.weight' alone is" in err


@pytest.mark.parametrize("value", ["-3", "0", "1.5", "-2147483649"])
def test_dropout_keep_prob_out_of_range_is_located(tmp_path, capsys, value):
    """explain --train of a dropout whose keep_prob is out of (0, 1] (seed 21, IR text of AlexNet): the
    training form's mask op failed its own shape rule inside the backward pass (ShapeError escaped,
    an internal error); Dropout's shape rule checks it, so every command reports it at the attribute."""
    text = f"network n {{\n  input data: f32[2, 4]\n  d = Dropout(data) {{ dropout_keep_prob: {value} }}\n  output d\n}}\n"
    for cmd in (("check",), ("explain", "--brief", "--train", "--loss", "euclidean")):
        rc, err, path = run(tmp_path, capsys, "d.nd", text, *cmd)
        assert rc == 1, err
        located_error(err, path, 3, 23, "dropout_keep_prob must be in (0, 1]")


@pytest.mark.parametrize("cmd", [("export", "--format", "singa"), ("check",), ("explain", "--brief")])
def test_ir_recorded_optimizer_is_checked_by_every_command(tmp_path, capsys, cmd):
    """export --format singa of IR text whose recorded optimizer has a schedule of an unknown type
    ('input', seed 21): the SINGA writer's table lookup failed (KeyError: 'input'). The reader checks
    the recorded optimizer as the optimizer pass resolves it, so every command reports it."""
    from netc.cli import main as netc_main
    ir = tmp_path / "c.mlir"
    assert netc_main(["opt", str(ROOT / "examples" / "cifar10_phases.nd"), "--no-locs", "-p", "select-phase",
                      "-o", str(ir)]) == 0
    text = ir.read_text()
    assert 'type = "fixed_step"' in text
    text = text.replace('type = "fixed_step"', 'type = "input"')
    capsys.readouterr()
    rc, err, path = run(tmp_path, capsys, "c.mlir", text, *cmd)
    assert rc == 1, err
    located_error(err, path, 1, 1, "unknown learning-rate schedule type 'input'")
