"""netc.v2's sequence chapters (docs/v2.md): PaddlePaddle's lstmemory and grumemory computed from their
parameters as PaddlePaddle's LstmLayer / GatedRecurrentLayer do (written out here in numpy from their
formulas: gates = x[t] + h[t-1] W + b, peepholes, the GRU's (1 - u) h + u c) against what netc.v2 infers
from the same PaddlePaddle-shaped values; parameter names and counts of the book's chapter 04 and 06
networks computed by hand from the v2 layer definitions; the shared `_proj` table; the imikolov and
imdb readers over small files of PaddlePaddle's cache formats; the chapters' examples training (the cost
falls) and inferring; located refusals of what netc.v2 cannot express yet."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

import netc.v2 as paddle
from netc.api.errors import Error

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setattr(paddle.dataset.common, "DATA_HOME", str(tmp_path / ".cache/paddle/dataset"))
    return tmp_path


def sig(v):
    return 1 / (1 + np.exp(-v))


def relu(v):
    return np.maximum(v, 0)


def paddle_lstm(x, w, b, act=np.tanh, state_act=np.tanh):
    """PaddlePaddle's LSTM of one sequence x [T, 4H] (blocks in, ig, fg, og): w [H, 4H], b [7H] =
    4H gate biases then the peepholes of ig, fg (read c[t-1]) and og (reads c[t]); act the block input's
    activation (LstmCompute's active_node), state_act the cell output's (active_state)."""
    h4 = x.shape[1]
    hs = h4 // 4
    h, c = np.zeros(hs), np.zeros(hs)
    for t in range(len(x)):
        g = x[t] + h @ w + b[:h4]
        a_in, a_i, a_f, a_o = (g[k * hs:(k + 1) * hs] for k in range(4))
        i = sig(a_i + b[h4:h4 + hs] * c)
        f = sig(a_f + b[h4 + hs:h4 + 2 * hs] * c)
        c = i * act(a_in) + f * c
        o = sig(a_o + b[h4 + 2 * hs:] * c)
        h = o * state_act(c)
    return h


def paddle_gru(x, w, b):
    """PaddlePaddle's GRU of one sequence x [T, 3H] (blocks update, reset, candidate): w's first H*2H
    values the gate weights [H, 2H], then [H, H] for the candidate; b [3H]; h = (1 - u) h + u c."""
    hs = x.shape[1] // 3
    gate_w, state_w = w[:2 * hs * hs].reshape(hs, 2 * hs), w[2 * hs * hs:].reshape(hs, hs)
    h = np.zeros(hs)
    for t in range(len(x)):
        xt = x[t] + b
        ur = sig(xt[:2 * hs] + h @ gate_w)
        u, r = ur[:hs], ur[hs:]
        c = np.tanh(xt[2 * hs:] + (r * h) @ state_w)
        h = (1 - u) * h + u * c
    return h


def sequences(rng, n, width, lo=1, hi=6):
    return [rng.randn(rng.randint(lo, hi), width) for _ in range(n)]


@pytest.mark.parametrize("kind,reverse,act", [("lstm", False, "tanh"), ("lstm", False, "relu"),
                                              ("lstm", True, "relu"), ("gru", False, "tanh"), ("gru", True, "tanh")])
def test_recurrent_layers_compute_paddles_cell_from_its_parameters(kind, reverse, act):
    """Random PaddlePaddle-shaped w0 and wbias set through Parameters: netc.v2's last step of each
    sequence (lengths 1..5 in one batch) equals PaddlePaddle's cell computed from those values; the values
    read back are the ones set, and only w0 and wbias are shown (the input selections are hidden). With
    reverse=True the recurrence runs from each sequence's last step to its first (LstmLayer's reversed_):
    its result at step 0 (first_seq) is the cell run over the sequence backwards. act=Relu: the book's
    block input activation, the cell output's staying Tanh (state_act's default)."""
    rng = np.random.RandomState(3)
    h, blocks = 5, 4 if kind == "lstm" else 3
    x = paddle.layer.data(name=f"x_{kind}", type=paddle.data_type.dense_vector_sequence(blocks * h))
    a = paddle.activation.Relu() if act == "relu" else None
    rec = (paddle.layer.lstmemory(input=x, reverse=reverse, act=a) if kind == "lstm" else
           paddle.layer.grumemory(input=x, reverse=reverse))
    last = (paddle.layer.first_seq if reverse else paddle.layer.last_seq)(input=rec)
    params = paddle.parameters.create(last)
    assert len(params.names()) == 2
    wname, bname = sorted(params.names())
    assert wname.endswith(".w0") and bname.endswith(".wbias")
    assert params.get_shape(wname) == ((h, h, 4) if kind == "lstm" else (h, 3 * h))
    assert params.get_shape(bname) == (1, (7 if kind == "lstm" else 3) * h)
    w = rng.randn(*params.get_shape(wname)).astype(np.float32) * 0.5
    b = rng.randn(*params.get_shape(bname)).astype(np.float32) * 0.5
    params[wname], params[bname] = w, b
    np.testing.assert_array_equal(params[wname], w)
    np.testing.assert_array_equal(params[bname], b)
    seqs = sequences(rng, 4, blocks * h)
    got = paddle.infer(output_layer=last, parameters=params, input=[(s,) for s in seqs])
    for s, g in zip(seqs, got):
        s = s[::-1] if reverse else s
        want = paddle_lstm(s, w.reshape(h, 4 * h), b.reshape(-1), relu if act == "relu" else np.tanh) \
            if kind == "lstm" else paddle_gru(s, w.reshape(-1), b.reshape(-1))
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def torch_cell(kind, x, w, b, block_act=None):
    """paddle_lstm / paddle_gru in torch (float64, autograd): the last output of one sequence x [T, k*H]
    (block_act: the LSTM's block input activation, tanh by default)."""
    import torch
    sg = torch.sigmoid
    if kind == "lstm":
        hs = x.shape[1] // 4
        w, h, c = w.reshape(hs, 4 * hs), torch.zeros(hs, dtype=x.dtype), torch.zeros(hs, dtype=x.dtype)
        for t in range(len(x)):
            g = x[t] + h @ w + b[:4 * hs]
            i = sg(g[hs:2 * hs] + b[4 * hs:5 * hs] * c)
            f = sg(g[2 * hs:3 * hs] + b[5 * hs:6 * hs] * c)
            c = i * (block_act or torch.tanh)(g[:hs]) + f * c
            h = sg(g[3 * hs:] + b[6 * hs:] * c) * torch.tanh(c)
        return h
    hs = x.shape[1] // 3
    gate_w, state_w = w[:2 * hs * hs].reshape(hs, 2 * hs), w[2 * hs * hs:].reshape(hs, hs)
    h = torch.zeros(hs, dtype=x.dtype)
    for t in range(len(x)):
        xt = x[t] + b
        ur = sg(xt[:2 * hs] + h @ gate_w)
        u, r = ur[:hs], ur[hs:]
        h = (1 - u) * h + u * torch.tanh(xt[2 * hs:] + (r * h) @ state_w)
    return h


@pytest.mark.parametrize("kind,reverse", [("lstm", False), ("gru", False), ("lstm", True), ("gru", True)])
def test_recurrent_layers_train_as_paddles(kind, reverse):
    """One Momentum(momentum=0) step of square_error_cost on the last step: w0 and wbias move by
    -lr * (the gradient of the SUMMED cost), torch.autograd of PaddlePaddle's cell from the same values
    (so the composite parameters' gradients, the GRU's negated update gate included, are PaddlePaddle's);
    the hidden input selections do not move. reverse=True: the LSTM with the book's Relu block input, the
    cost on step 0 (first_seq), the cell run over each sequence backwards."""
    import torch
    rng = np.random.RandomState(5)
    h, blocks, lr = 3, 4 if kind == "lstm" else 3, 0.05
    x = paddle.layer.data(name=f"tx_{kind}", type=paddle.data_type.dense_vector_sequence(blocks * h))
    y = paddle.layer.data(name=f"ty_{kind}", type=paddle.data_type.dense_vector(h))
    act = paddle.activation.Relu() if reverse else None
    rec = paddle.layer.lstmemory(input=x, reverse=reverse, act=act) if kind == "lstm" else \
        paddle.layer.grumemory(input=x, reverse=reverse)
    pick = paddle.layer.first_seq if reverse else paddle.layer.last_seq
    cost = paddle.layer.square_error_cost(input=pick(input=rec), label=y)
    params = paddle.parameters.create(cost)
    wname, bname = sorted(params.names())
    for n in (wname, bname):
        params[n] = rng.randn(*params.get_shape(n)) * 0.5
    w0, b0 = params[wname].astype(np.float64), params[bname].astype(np.float64)
    selections = {n: params.pset.numpy(n) for n in params.pset.names() if ".select_" in n}
    assert len(selections) == blocks
    batch = [(s, rng.randn(h)) for s in sequences(rng, 4, blocks * h)]
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0, learning_rate=lr))
    trainer.train(lambda: iter([batch]), num_passes=1, feeding={f"tx_{kind}": 0, f"ty_{kind}": 1})
    wt = torch.tensor(w0.reshape(-1), requires_grad=True)
    bt = torch.tensor(b0.reshape(-1), requires_grad=True)
    total = sum(((torch_cell(kind, torch.tensor(s[::-1].copy() if reverse else s), wt, bt,
                             torch.relu if reverse else None) - torch.tensor(t)) ** 2).sum() for s, t in batch)
    total.backward()
    np.testing.assert_allclose(params[wname].reshape(-1), w0.reshape(-1) - lr * wt.grad.numpy(), atol=2e-5)
    np.testing.assert_allclose(params[bname].reshape(-1), b0.reshape(-1) - lr * bt.grad.numpy(), atol=2e-5)
    assert np.abs(wt.grad.numpy()).max() > 1e-3
    for n, v in selections.items():
        np.testing.assert_array_equal(params.pset.numpy(n), v)


def test_lstm_parameters_round_trip_through_the_tar_file():
    """A simple_lstm's parameters written to PaddlePaddle's tar file (w0, wbias and the projection, no
    hidden selections) and read back infer the same."""
    rng = np.random.RandomState(0)
    x = paddle.layer.data(name="tar_x", type=paddle.data_type.integer_value_sequence(11))
    emb = paddle.layer.embedding(input=x, size=4)
    out = paddle.layer.pooling(input=paddle.networks.simple_lstm(input=emb, size=3),
                               pooling_type=paddle.pooling.Avg())
    params = paddle.parameters.create(out)
    for n in params.names():
        params[n] = rng.randn(*params.get_shape(n)) * 0.3
    buf = io.BytesIO()
    params.to_tar(buf)
    members = tarfile.open(fileobj=io.BytesIO(buf.getvalue())).getnames()
    assert not any("select" in m for m in members) and len(members) == 2 * len(params.names())
    buf.seek(0)
    back = paddle.parameters.Parameters.from_tar(buf)
    batch = [([int(i) for i in rng.randint(0, 11, rng.randint(1, 6))],) for _ in range(5)]
    np.testing.assert_allclose(paddle.infer(output_layer=out, parameters=back, input=batch),
                               paddle.infer(output_layer=out, parameters=params, input=batch), rtol=1e-6)


# -- the book's networks: names and parameter counts by hand ---------------------------------------------

def word2vec_net(dict_size, embsize=32, hiddensize=256):
    sys.path.insert(0, str(ROOT / "examples/v2"))
    try:
        import word2vec
    finally:
        sys.path.pop(0)
    word2vec.embsize, word2vec.hiddensize = embsize, hiddensize
    return word2vec.ngram_lm(dict_size)


def test_word2vec_parameter_count_and_shared_table():
    """Chapter 04: 4 table projections share `_proj` [V, 32]; fc 4*32 -> 256 (+ bias), fc 256 -> V (+ bias):
    V*32 + 128*256 + 256 + 256*V + V values, PaddlePaddle's count; one `_proj`, shared."""
    v = 1953
    _, cost = word2vec_net(v)
    params = paddle.parameters.create(cost)
    names = params.names()
    assert names.count("_proj") == 1 and params.get_shape("_proj") == (v, 32)
    assert sum(params[n].size for n in names) == v * 32 + 128 * 256 + 256 + 256 * v + v
    assert len(names) == 5


def stacked_sizes(v, emb, hid, stacked):
    """PaddlePaddle's count of stacked_lstm_net (forward or not: the same parameters): the embedding V*E;
    fc1 E*H + H; lstmemory over an input of H = 4h: h = H/4, w0 h*h*4, wbias 7h; each further fc reads the
    previous fc (H) and LSTM (h): H*H + h*H + H; the output fc reads the pooled fc (H) and LSTM (h): 2(H + h) + 2."""
    h = hid // 4
    lstm = h * h * 4 + 7 * h
    total = v * emb + emb * hid + hid + lstm
    total += (stacked - 1) * (hid * hid + h * hid + hid + lstm)
    return total + 2 * (hid + h) + 2


def sentiment_module():
    sys.path.insert(0, str(ROOT / "examples/v2"))
    try:
        import understand_sentiment
    finally:
        sys.path.pop(0)
    return understand_sentiment


@pytest.mark.parametrize("stacked", [1, 3])
def test_stacked_lstm_parameter_count(stacked):
    """Chapter 06's stacked LSTM (hid 512: each lstmemory of size 128 over its 512-wide fc): PaddlePaddle's
    count by hand (stacked_sizes)."""
    m = sentiment_module()
    cost, _ = m.stacked_lstm_net(5147, emb_dim=128, hid_dim=512, stacked_num=stacked)
    params = paddle.parameters.create(cost)
    assert sum(params[n].size for n in params.names()) == stacked_sizes(5147, 128, 512, stacked)
    # stacked 3 = 1,581,826: the embedding 658,816, fc1 66,048, 3 lstmemory of 66,432 (w0 128*128*4, wbias
    # 7*128), fc2 and fc3 of 328,192 (512*512 + 128*512 + 512), the softmax fc 1,282
    assert stacked != 3 or stacked_sizes(5147, 128, 512, 3) == 1_581_826
    # the book's LSTMs: Relu block inputs with Tanh cells; the even-numbered ones backwards in time (a reversal
    # of their input and of their steps, with the words' lengths)
    layers = paddle.topology.Topology(cost).topology.layers
    lstms = [x for x in layers if x.type == "Lstm"]
    assert len(lstms) == stacked and all(x.attrs["activation"] == "relu" and x.attrs["cell_activation"] == "tanh"
                                         for x in lstms)
    reversals = [x for x in layers if x.type == "SequenceReverse"]
    assert len(reversals) == 2 * (stacked // 2) and all(x.inputs[1].name == "word.lengths" for x in reversals)
    lstm_params = [n for n in params.names() if "lstmemory" in n]
    assert len(lstm_params) == 2 * stacked and all(params.get_shape(n) in ((128, 128, 4), (1, 896)) for n in lstm_params)


def test_simple_lstm_and_gru_names_and_counts():
    """simple_lstm(X -> H): `_lstm_transform_<name>.w0` [X, 4H], `_<name>.w0` (H, H, 4), `_<name>.wbias`
    [1, 7H]; simple_gru: [X, 3H], [H, 3H], [1, 3H]."""
    x = paddle.layer.data(name="sg_x", type=paddle.data_type.dense_vector_sequence(7))
    lstm = paddle.networks.simple_lstm(input=x, size=6, name="l")
    gru = paddle.networks.simple_gru(input=x, size=6, name="g")
    params = paddle.parameters.create([paddle.layer.last_seq(input=lstm), paddle.layer.first_seq(input=gru)])
    shapes = {n: params.get_shape(n) for n in params.names()}
    assert shapes == {"_lstm_transform_l.w0": (7, 24), "_l.w0": (6, 6, 4), "_l.wbias": (1, 42),
                      "_g_transform.w0": (7, 18), "_g.w0": (6, 18), "_g.wbias": (1, 18)}


def test_mixed_with_projections_and_bias():
    """mixed(size, [table_projection, full_matrix_projection], bias_attr=True): the rows of the table plus
    x W plus b, from the values set through Parameters."""
    rng = np.random.RandomState(1)
    ids = paddle.layer.data(name="mx_id", type=paddle.data_type.integer_value(6))
    vec = paddle.layer.data(name="mx_v", type=paddle.data_type.dense_vector(3))
    m = paddle.layer.mixed(size=4, input=[paddle.layer.table_projection(input=ids),
                                          paddle.layer.full_matrix_projection(input=vec)],
                           bias_attr=True, name="mx", act=paddle.activation.Tanh())
    params = paddle.parameters.create(m)
    assert {n: params.get_shape(n) for n in params.names()} == {"_mx.w0": (6, 4), "_mx.w1": (3, 4),
                                                                 "_mx.wbias": (1, 4)}
    vals = {n: rng.randn(*params.get_shape(n)) for n in params.names()}
    for n, v in vals.items():
        params[n] = v
    batch = [(2, rng.randn(3)), (5, rng.randn(3))]
    got = paddle.infer(output_layer=m, parameters=params, input=batch)
    want = [np.tanh(vals["_mx.w0"][i] + v @ vals["_mx.w1"] + vals["_mx.wbias"][0]) for i, v in batch]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def context_reference(table, ids, length, start, w, b):
    """PaddlePaddle's context_projection (zeros past the ends) then fc (Tanh) then max over the steps."""
    x = table[ids]
    rows = [np.concatenate([x[t + k] if 0 <= t + k < len(ids) else np.zeros(x.shape[1])
                            for k in range(start, start + length)]) for t in range(len(ids))]
    return np.tanh(np.array(rows) @ w + b).max(0)


def test_sequence_conv_pool_is_paddles_context_projection_fc_and_pooling():
    """sequence_conv_pool of 3 steps (context_start -1) and of 4 (-2, Python 2's -(4 - 1) / 2): from random
    values set through Parameters, netc.v2 infers what the context projection (zeros past each sequence's
    ends: a batch of lengths 1..6, padded with id 0, whose embedding is not zero), the fc and the max give
    by hand; parameters `_<name>_conv_fc.w0` [L * E, H] and `.wbias` [1, H]."""
    rng = np.random.RandomState(2)
    v, e, hid = 15, 4, 5
    w = paddle.layer.data(name="scp_w", type=paddle.data_type.integer_value_sequence(v))
    emb = paddle.layer.embedding(input=w, size=e, name="scp_emb")
    convs = {n: paddle.networks.sequence_conv_pool(input=emb, context_len=n, hidden_size=hid, name=f"scp{n}")
             for n in (3, 4)}
    params = paddle.parameters.create(list(convs.values()))
    assert {n: params.get_shape(n) for n in params.names()} == {
        "_scp_emb.w0": (v, e), "_scp3_conv_fc.w0": (12, hid), "_scp3_conv_fc.wbias": (1, hid),
        "_scp4_conv_fc.w0": (16, hid), "_scp4_conv_fc.wbias": (1, hid)}
    for n in params.names():
        params[n] = rng.randn(*params.get_shape(n)) * 0.5
    seqs = [[int(i) for i in rng.randint(1, v, k)] for k in (1, 6, 2, 5, 3)]
    for n, start in ((3, -1), (4, -2)):
        got = paddle.infer(output_layer=convs[n], parameters=params, input=[(s,) for s in seqs])
        want = [context_reference(params["_scp_emb.w0"], s, n, start, params[f"_scp{n}_conv_fc.w0"],
                                  params[f"_scp{n}_conv_fc.wbias"][0]) for s in seqs]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_convolution_net_parameter_count():
    """Chapter 06's convolution_net (emb 128, hid 128): V*128 + (3*128*128 + 128) + (4*128*128 + 128) +
    2 * (128 * 2) + 2, PaddlePaddle's count by hand."""
    cost, _ = sentiment_module().convolution_net(5147)
    params = paddle.parameters.create(cost)
    assert sum(params[n].size for n in params.names()) == \
        5147 * 128 + 3 * 128 * 128 + 128 + 4 * 128 * 128 + 128 + 2 * 128 * 2 + 2


def test_cos_sim_is_paddles_and_trains_as_paddles():
    """cos_sim(a, b, scale=2): 2 a.b / (|a| |b|) per sample; one Momentum(momentum=0) step of the summed
    square error through an fc in front of a moves the fc's weight by -lr * torch.autograd's gradient of
    the same formula; no parameter of its own is shown."""
    import torch
    rng = np.random.RandomState(4)
    x = paddle.layer.data(name="cs_x", type=paddle.data_type.dense_vector(4))
    bv = paddle.layer.data(name="cs_b", type=paddle.data_type.dense_vector(5))
    t = paddle.layer.data(name="cs_t", type=paddle.data_type.dense_vector(1))
    a = paddle.layer.fc(input=x, size=5, act=paddle.activation.Linear(), bias_attr=False, name="cs_fc")
    c = paddle.layer.cos_sim(a=a, b=bv, scale=2)
    cost = paddle.layer.square_error_cost(input=c, label=t)
    params = paddle.parameters.create(cost)
    assert params.names() == ["_cs_fc.w0"]
    w0 = rng.randn(4, 5)
    params["_cs_fc.w0"] = w0
    batch = [(rng.randn(4), rng.randn(5), rng.randn(1)) for _ in range(6)]
    got = paddle.infer(output_layer=c, parameters=params, input=[s[:2] for s in batch])
    want = [2 * (xi @ w0) @ bi / np.linalg.norm(xi @ w0) / np.linalg.norm(bi) for xi, bi, _ in batch]
    np.testing.assert_allclose(got.ravel(), want, rtol=1e-5)
    lr = 0.1
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(momentum=0, learning_rate=lr))
    trainer.train(lambda: iter([batch]), feeding={"cs_x": 0, "cs_b": 1, "cs_t": 2})
    w = torch.tensor(w0.astype(np.float32).astype(np.float64), requires_grad=True)
    total = 0
    for xi, bi, ti in batch:
        av, bt = torch.tensor(xi) @ w, torch.tensor(bi)
        total = total + ((2 * (av @ bt) / av.norm() / bt.norm() - ti[0]) ** 2)
    total.backward()
    np.testing.assert_allclose(params["_cs_fc.w0"], w0 - lr * w.grad.numpy(), atol=3e-5)


# -- refusals ----------------------------------------------------------------------------------------------

def run_prog(tmp_path, body):
    """The error a program ending in `body` stops with, located in its file (run in this process: tests/test_v2.py
    checks once, in a process of its own, that such an error uncaught prints as its diagnostic alone)."""
    prog = tmp_path / "prog.py"
    text = ("import netc.v2 as paddle\n"
            "x = paddle.layer.data(name='x', type=paddle.data_type.integer_value_sequence(9))\n"
            "e = paddle.layer.embedding(input=x, size=8)\n" + body + "\n")
    prog.write_text(text)
    with pytest.raises(paddle.names.Error) as e:
        exec(compile(text, str(prog), "exec"), {"__name__": "__main__"})
    return str(e.value)


@pytest.mark.parametrize("body,says", [
    ("h = paddle.layer.lstmemory(input=paddle.layer.fc(input=e, size=6))", "width 6, not a multiple of 4"),
    ("h = paddle.networks.sequence_conv_pool(input=e, context_len=3, hidden_size=4, context_start=0)",
     "context_start 0"),
    ("h = paddle.layer.cos_sim(a=e, b=e)", "a and b are per-sample vectors"),
    ("h = paddle.layer.cos_sim(a=paddle.layer.last_seq(input=e), b=paddle.layer.last_seq(input=e), size=2)",
     "size=2"),
    ("h = paddle.layer.grumemory(input=paddle.layer.fc(input=e, size=6), act=paddle.activation.Relu())",
     "act is Tanh"),
    ("h = paddle.layer.last_seq(input=paddle.layer.data(name='d', type=paddle.data_type.dense_vector(2)))",
     "runs over a sequence"),
])
def test_refusals_are_located(tmp_path, body, says):
    err = run_prog(tmp_path, body)
    assert re.search(r"prog\.py:4:5: error: .*" + re.escape(says), err), err


# -- datasets --------------------------------------------------------------------------------------------

def add_member(tar, name, text):
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_imikolov(home: Path, train_lines, valid_lines):
    d = home / ".cache/paddle/dataset/imikolov"
    d.mkdir(parents=True, exist_ok=True)
    with tarfile.open(d / "simple-examples.tgz", "w:gz") as t:
        add_member(t, "./simple-examples/data/ptb.train.txt", "".join(f" {s} \n" for s in train_lines))
        add_member(t, "./simple-examples/data/ptb.valid.txt", "".join(f" {s} \n" for s in valid_lines))


def write_imdb(home: Path, reviews):
    """reviews: {(split, pos|neg): [text, ...]}."""
    d = home / ".cache/paddle/dataset/imdb"
    d.mkdir(parents=True, exist_ok=True)
    with tarfile.open(d / "aclImdb_v1.tar.gz", "w:gz") as t:
        for (split, kind), texts in reviews.items():
            for i, text in enumerate(texts):
                add_member(t, f"aclImdb/{split}/{kind}/{i}_7.txt", text + "\n")


def test_imikolov_dictionary_and_ngrams(home):
    """build_dict: counts with <s>/<e> once per line, <unk> dropped then last, kept above the cutoff,
    by falling count then the word; NGRAM windows of '<s> line <e>'; SEQ pairs."""
    write_imikolov(home, ["a b a", "b c <unk>"], ["a d"])
    idx = paddle.dataset.imikolov.build_dict(min_word_freq=1)
    # counts: <s> 3, <e> 3, a 3, b 2, c 1, d 1 -> kept > 1: <e>, <s>, a (3 each, by word), b
    assert idx == {"<e>": 0, "<s>": 1, "a": 2, "b": 3, "<unk>": 4}
    grams = list(paddle.dataset.imikolov.train(idx, 3)())
    assert grams == [(1, 2, 3), (2, 3, 2), (3, 2, 0), (1, 3, 4), (3, 4, 4), (4, 4, 0)]
    seq = list(paddle.dataset.imikolov.test(idx, 0, paddle.dataset.imikolov.DataType.SEQ)())
    assert seq == [([1, 2, 4], [2, 4, 0])]


def test_imdb_dictionary_and_samples(home):
    """word_dict over the four folders (punctuation removed, lower-cased); positives labelled 0 and
    negatives 1, alternately, the longer list's rest at the end; train() is a reader and an iterable
    (the book's `lambda: imdb.train(word_dict)` and the later `imdb.train(word_dict)` both read it)."""
    write_imdb(home, {("train", "pos"): ["Good, good film!", "film good", "GOOD"], ("train", "neg"): ["Bad film."],
                      ("test", "pos"): ["good"], ("test", "neg"): ["bad bad"]})
    idx = paddle.dataset.imdb.build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 1)
    assert idx == {"good": 0, "bad": 1, "film": 2, "<unk>": 3}      # bad and film: 3 each, by the word
    train = paddle.dataset.imdb.train(idx)
    want = [([0, 0, 2], 0), ([1, 2], 1), ([2, 0], 0), ([0], 0)]
    assert list(train()) == want and list(train) == want
    assert list(paddle.dataset.imdb.test(idx)()) == [([0], 0), ([1, 1], 1)]
    for reader in (lambda: paddle.dataset.imdb.train(idx), paddle.dataset.imdb.train(idx)):
        assert sorted(map(str, paddle.reader.shuffle(reader, buf_size=10)())) == sorted(map(str, want))


def test_missing_cache_files_are_named(home):
    for call, file in ((lambda: paddle.dataset.imikolov.build_dict(), "simple-examples.tgz"),
                       (lambda: paddle.dataset.imdb.word_dict(), "aclImdb_v1.tar.gz")):
        with pytest.raises(Error, match=re.escape(file) + ".*downloads nothing"):
            call()


# -- the examples ----------------------------------------------------------------------------------------

def run_example(args, home, tmp_path):
    env = {**os.environ, "HOME": str(home)}
    r = subprocess.run([sys.executable, str(ROOT / "examples/v2" / args[0]), *args[1:], "--out", str(tmp_path),
                        "--seed", "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    return r


def synthetic_text(rng, n_lines, nxt):
    """Lines of a Markov chain over len(nxt) words: each word's successor is one of its two in nxt."""
    vocab = len(nxt)
    words = [f"w{i}" for i in range(vocab)]
    lines = []
    for _ in range(n_lines):
        k = rng.randint(vocab)
        line = []
        for _ in range(rng.randint(5, 12)):
            line.append(words[k])
            k = nxt[k, rng.randint(2)]
        lines.append(" ".join(line))
    return lines


def test_word2vec_example_trains_and_infers(tmp_path):
    """Chapter 04 with the book's network and AdaGrad (3e-3) on 300 lines of a Markov chain (each word
    followed by one of two): the test cost falls every pass and the error with it; it predicts and saves
    tar files."""
    rng = np.random.RandomState(0)
    nxt = rng.randint(0, 30, (30, 2))
    write_imikolov(tmp_path, synthetic_text(rng, 300, nxt), synthetic_text(rng, 40, nxt))
    r = run_example(["word2vec.py", "--passes", "8", "--min-word-freq", "3"], tmp_path, tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("test after")]
    costs = [float(line.split("cost ")[1].split(",")[0]) for line in lines]
    errors = [float(line.rsplit("error ", 1)[1].rstrip("%")) for line in lines]
    assert len(costs) == 8 and all(b < a for a, b in zip(costs, costs[1:])) and costs[-1] < costs[0] - 0.3
    assert errors[-1] < errors[0]
    assert r.stdout.count(" -> ") == 5 and (tmp_path / "params_pass_7.tar").exists()


def write_reviews(home, rng, n=120):
    good, bad = ["great", "fine", "love", "superb"], ["awful", "boring", "hate", "poor"]
    neutral = [f"n{i}" for i in range(20)]

    def review(words):
        return " ".join(rng.choice(neutral + words * 2, rng.randint(4, 15)))
    write_imdb(home, {("train", "pos"): [review(good) for _ in range(n)],
                      ("train", "neg"): [review(bad) for _ in range(n)],
                      ("test", "pos"): [review(good) for _ in range(30)],
                      ("test", "neg"): [review(bad) for _ in range(30)]})


def test_sentiment_example_trains_and_infers(tmp_path):
    """Chapter 06's stacked LSTM as the book writes it (3 levels, the second backwards in time, Relu/Tanh cells),
    narrow, with the book's Adam on 240 reviews whose sentiment words decide the label: the test cost falls and the
    error ends below 25%."""
    rng = np.random.RandomState(0)
    write_reviews(tmp_path, rng)
    r = run_example(["understand_sentiment.py", "--passes", "4", "--emb", "16", "--hid", "32", "--cutoff", "0"],
                    tmp_path, tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("test after")]
    costs = [float(line.split("cost ")[1].split(",")[0]) for line in lines]
    errors = [float(line.rsplit("error ", 1)[1].rstrip("%")) for line in lines]
    assert len(costs) == 4 and costs[-1] < costs[0] and errors[-1] < 25
    assert "inferred:" in r.stdout


def test_sentiment_example_conv_net_trains(tmp_path):
    """Chapter 06's convolution net as the book writes it (sequence_conv_pool of 3 and 4 steps), narrow,
    with the book's Adam: the test cost falls every pass, the error ends below 35%."""
    write_reviews(tmp_path, np.random.RandomState(0))
    r = run_example(["understand_sentiment.py", "--net", "conv", "--passes", "4", "--emb", "16", "--hid", "32",
                     "--cutoff", "0"], tmp_path, tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("test after")]
    costs = [float(line.split("cost ")[1].split(",")[0]) for line in lines]
    errors = [float(line.rsplit("error ", 1)[1].rstrip("%")) for line in lines]
    assert len(costs) == 4 and all(b < a for a, b in zip(costs, costs[1:])) and errors[-1] < 35
