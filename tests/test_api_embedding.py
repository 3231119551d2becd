"""netc.layer.embedding: integer ids make a real Embedding layer (parameter role `table`), one-hot float
rows keep the InnerProduct formulation; both give the same rows and the same SGD updates."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import netc

L = netc.layer
V, D = 11, 4


def here() -> int:
    return inspect.currentframe().f_back.f_lineno


def _id_samples(n, shape, seed=0):
    """Ids of per-sample `shape` and a label the ids decide (the first id below V / 2)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, V, (n,) + tuple(shape)).astype(np.int32)
    first = ids.reshape(n, -1)[:, 0]
    return list(zip(ids, (first < V // 2).astype(np.int32)))


@pytest.mark.parametrize("shape", [[], [3]], ids=["ids[N]", "ids[N,L]"])
def test_ids_make_an_embedding_layer_that_trains(shape):
    ids, y = L.data("ids", shape, "i32"), L.data("y", [], "i32")
    e = L.embedding(ids, D, num_embeddings=V, name="emb")
    assert e.opdef.type_name == "Embedding" and e.shape[1:] == tuple(shape) + (D,) and e.dtype == "f32"
    assert e.param_shapes == {"table": (V, D)}
    cost = L.classification_cost(L.fc(e, 2, name="out"), y)
    params = netc.parameters.create(cost, seed=0)
    assert sorted(params) == ["emb.table", "out.bias", "out.weight"]
    data = _id_samples(128, shape)
    costs = []
    netc.train(cost, params, lambda: iter(data), netc.optimizer.SGD(1.0), batch_size=32, num_passes=6,
               event_handler=lambda ev: costs.append(ev.cost) if isinstance(ev, netc.event.EndIteration) else None)
    assert len(costs) == 24 and np.mean(costs[-4:]) < 0.6 * np.mean(costs[:4])
    assert netc.test(cost, params, lambda: iter(data), batch_size=64).metrics["accuracy"] > 0.9


def test_embedding_of_ids_equals_the_one_hot_inner_product_in_f64():
    """Same table values: the rows agree to 1e-12, and one SGD step (repeated ids in the batch: their
    gradients add up) moves the table the same way."""
    def net(dense):
        x = L.data("x", [V] if dense else [], "f64" if dense else "i32")
        y = L.data("y", [], "i32")
        e = L.embedding(x, D, num_embeddings=V, param_name="table")
        return e, L.classification_cost(L.fc(e, 3, param_name={"weight": "w", "bias": "b"}), y)

    e_ids, cost_ids = net(False)
    e_hot, cost_hot = net(True)
    assert e_ids.opdef.type_name == "Embedding" and e_hot.opdef.type_name == "InnerProduct"
    p_ids = netc.parameters.create(cost_ids, seed=1, dtype=torch.float64)
    p_hot = netc.parameters.create(cost_hot, seed=2, dtype=torch.float64)
    for n in ("table", "w", "b"):
        p_hot[n] = p_ids[n]
    assert set(p_hot) == {"table", "w", "b"}     # the one-hot InnerProduct has no bias (`bias: False`)
    ids = np.array([0, 3, 3, 7, 10, 3, 1, 7], np.int32)            # repeats: 3 three times, 7 twice
    hot = np.eye(V)[ids]
    rows_ids = netc.infer(e_ids, p_ids, list(ids), target="reference")       # f64, as the set
    rows_hot = netc.infer(e_hot, p_hot, list(hot), target="reference")
    assert rows_ids.dtype == np.float64 and rows_ids.shape == (8, D)
    np.testing.assert_allclose(rows_ids, p_ids["table"].numpy()[ids], rtol=0, atol=1e-12)
    np.testing.assert_allclose(rows_ids, rows_hot, rtol=0, atol=1e-12)

    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    before = p_ids["table"].clone()
    netc.train(cost_ids, p_ids, lambda: iter(zip(ids, labels)), netc.optimizer.SGD(0.3), batch_size=8,
               target="reference")
    netc.train(cost_hot, p_hot, lambda: iter(zip(hot, labels)), netc.optimizer.SGD(0.3), batch_size=8,
               target="reference")
    moved = (p_ids["table"] - before).abs().sum(1) > 0
    assert moved.tolist() == [i in set(ids.tolist()) for i in range(V)]     # only the rows the ids touch
    for n in ("table", "w", "b"):
        torch.testing.assert_close(p_ids[n], p_hot[n], rtol=0, atol=1e-12)


def test_a_table_shared_by_name_is_one_parameter():
    q, d, y = L.data("query", [2], "i32"), L.data("doc", [], "i32"), L.data("y", [], "i32")
    eq = L.embedding(q, D, num_embeddings=V, name="eq", param_name="words")
    ed = L.embedding(d, D, num_embeddings=V, name="ed", param_attr=netc.ParamAttr(name="words"))
    h = L.concat([L.flatten(eq), ed])
    cost = L.classification_cost(L.fc(h, 2, name="out"), y)
    params = netc.parameters.create(cost, seed=0)
    assert sorted(params) == ["out.bias", "out.weight", "words"]
    table = params["words"]
    before = table.clone()
    rng = np.random.default_rng(0)
    samples = [{"query": rng.integers(0, V, 2).astype(np.int32), "doc": np.int32(rng.integers(0, V)),
                "y": np.int32(i % 2)} for i in range(16)]
    netc.train(cost, params, lambda: iter(samples), netc.optimizer.SGD(0.5), batch_size=8)
    assert params["words"] is table and not torch.equal(table, before)     # updated in place, once for both
    probe = np.array([1, 5, 9], np.int32)
    got_q = netc.infer(eq, params, [{"query": probe[:2]}])
    got_d = netc.infer(ed, params, [{"doc": probe[2]}])
    np.testing.assert_allclose(got_q[0], table.numpy()[probe[:2]], rtol=0, atol=0)
    np.testing.assert_allclose(got_d[0], table.numpy()[probe[2]], rtol=0, atol=0)
    # a table of another shape under the same name is the usual sharing error
    other = L.embedding(L.data("z", [], "i32"), D + 1, num_embeddings=V, param_name="words")
    with pytest.raises(netc.api.Error, match="shared with a different shape"):
        netc.parameters.create([netc.Topology(eq, name="A"), netc.Topology(other, name="B")])


def test_ids_without_num_embeddings_is_a_located_error():
    ids = L.data("ids", [5], "i64")
    line = here() + 2
    with pytest.raises(netc.api.Error) as e:
        L.embedding(ids, D)
    text = str(e.value)
    assert f"test_api_embedding.py:{line}:" in text and "num_embeddings" in text and "'ids'" in text
    with pytest.raises(netc.api.Error, match="num_embeddings must be positive"):
        L.embedding(ids, D, num_embeddings=0)


def test_a_float_input_keeps_the_one_hot_inner_product():
    x = L.data("x", [V])
    e = L.embedding(x, D, name="hot")
    assert e.opdef.type_name == "InnerProduct" and e.attrs == {"num_outputs": D, "bias": False}
    assert e.param_shapes["weight"] == (V, D) and e.shape[1:] == (D,)
    assert L.embedding(x, D, num_embeddings=V).opdef.type_name == "InnerProduct"
    with pytest.raises(netc.api.Error, match="num_embeddings 7 is not the rows' width 11"):
        L.embedding(x, D, num_embeddings=7)
    with pytest.raises(netc.api.Error) as e:
        L.embedding(L.data("img", [V, 2]), D)
    assert "integer ids" in str(e.value) and "no embedding op" not in str(e.value)
    with pytest.raises(netc.api.Error, match="integer ids"):
        L.embedding(L.data("small", [], "i8"), D, num_embeddings=V)
