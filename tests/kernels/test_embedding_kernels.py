"""The embedding kernels (netc/kernels/embedding.py) against the ops' float64 references
(netc/ops/embedding.py, ops/optim.py): the gather of table rows by id, the scatter-add of the
gradient's rows (duplicate ids summed) and the sparse SGD update in place, on odd shapes: V = 1,
D = 1, D = 130 (several column blocks), i32 and i64 ids of ranks 1 to 3, tiles smaller than the
problem, several programs striding over the ids, a channel slice of a wider output. Outputs are
NaN-poisoned; ids outside [0, V) read a zero row and add nothing (the kernels cannot raise)."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.embedding import embedding, embedding_grad, fill_zero, sparse_sgd_update  # noqa: E402
from netc.ops import lookup  # noqa: E402
from netc.ops import reference as R  # noqa: E402

NAN = float("nan")
SHAPES = [  # (V, D, ids shape, block_m, block_n, split)
    (1, 1, (3,), None, None, None),
    (1, 5, (2, 4), 2, 4, 2),
    (7, 1, (5, 3), 4, None, 3),
    (7, 130, (5, 3), 4, 32, 2),
    (50, 130, (2, 3, 4), None, None, None),
    (1000, 16, (9,), 8, 16, 1),
]


def _ids(gen, v, shape, dtype, device):
    return torch.randint(0, v, shape, generator=gen).to(dtype).to(device)


def _ref_embedding(ids, table):
    d = lookup("netc.embedding")
    return d.reference({"num_embeddings": table.shape[0], "dim": table.shape[1], "name": "e"}, [ids.cpu()],
                       {"table": table.cpu().double()})


def _ref_grad(ids, dy, v):
    return lookup("netc.embedding_grad").reference({"num_embeddings": v}, [ids.cpu(), dy.cpu()], {})


@pytest.mark.parametrize("v,d,shape,bm,bn,split", SHAPES, ids=str)
@pytest.mark.parametrize("idt", [torch.int32, torch.int64], ids=str)
def test_gather(device, rng, v, d, shape, bm, bn, split, idt):
    table = torch.randn(v, d, generator=rng).to(device)
    ids = _ids(rng, v, shape, idt, device)
    out = torch.full(tuple(shape) + (d,), NAN, device=device)
    got = embedding(ids, table, out=out, block_m=bm, block_n=bn)
    assert got.data_ptr() == out.data_ptr()
    R.check(got, _ref_embedding(ids, table))
    assert torch.equal(got.cpu(), table.cpu()[ids.cpu().long()])   # a gather is exact


@pytest.mark.parametrize("v,d,shape,bm,bn,split", SHAPES, ids=str)
@pytest.mark.parametrize("idt", [torch.int32, torch.int64], ids=str)
def test_scatter_gradient(device, rng, v, d, shape, bm, bn, split, idt):
    ids = _ids(rng, v, shape, idt, device)
    dy = torch.randn(tuple(shape) + (d,), generator=rng).to(device)
    out = torch.full((v, d), NAN, device=device)
    got = embedding_grad(ids, dy, v, out=out, block_m=bm, block_n=bn, split=split)
    R.check(got, _ref_grad(ids, dy, v))


def test_scatter_sums_duplicates(device):
    """Every id the same row: that row is the sum of all of dy's rows, the others stay 0."""
    ids = torch.full((37,), 2, dtype=torch.int64, device=device)
    dy = torch.arange(37 * 3, dtype=torch.float32, device=device).reshape(37, 3)
    got = embedding_grad(ids, dy, 4, block_m=4, split=3)
    want = torch.zeros(4, 3)
    want[2] = dy.cpu().sum(0)
    assert torch.equal(got.cpu(), want)


def test_gather_into_a_channel_slice(device, rng):
    """The result written as channels [3, 3 + D) of a wider buffer (a zero-copy concatenation)."""
    v, d = 11, 5
    table = torch.randn(v, d, generator=rng).to(device)
    ids = _ids(rng, v, (4, 2), torch.int32, device)
    buf = torch.full((4, 2, 12), NAN, device=device)
    embedding(ids, table, out=buf, out_channel_offset=3, block_m=2, block_n=2)
    R.check(buf[..., 3:3 + d], _ref_embedding(ids, table))
    assert torch.isnan(buf[..., :3]).all() and torch.isnan(buf[..., 3 + d:]).all()


def test_strided_gradient_rows(device, rng):
    """dy's rows every 9 elements (a slice of a wider buffer)."""
    v, d = 6, 4
    ids = _ids(rng, v, (3, 5), torch.int64, device)
    wide = torch.randn(3, 5, 9, generator=rng).to(device)
    dy = wide[..., 2:2 + d]
    R.check(embedding_grad(ids, dy, v, block_m=2, split=2), _ref_grad(ids, dy.contiguous(), v))


@pytest.mark.parametrize("v,d,shape,bm,bn,split", SHAPES, ids=str)
def test_sparse_sgd_update(device, rng, v, d, shape, bm, bn, split):
    """In place: table[ids[i]] -= lr * lr_scale * rows[i]; the reference op's result, and the dense step
    table - lr * lr_scale * gradient; untouched rows keep their exact bits."""
    table = torch.randn(v, d, generator=rng).to(device)
    ids = _ids(rng, v, shape, torch.int64, device)
    rows = torch.randn(tuple(shape) + (d,), generator=rng).to(device)
    lr = torch.tensor(0.3, device=device)
    before = table.clone()
    sparse_sgd_update(table, ids, rows, lr, lr_scale=0.5, block_m=bm, block_n=bn, split=split)
    upd = lookup("netc.sparse_sgd_update").reference({"num_embeddings": v, "lr_scale": 0.5, "name": "u"},
                                                     [ids.cpu(), rows.cpu(), lr.cpu()], {"param": before.cpu()})
    R.check(table, upd["param"])
    R.check(table, before.cpu().double() - 0.15 * _ref_grad(ids, rows, v))
    untouched = torch.ones(v, dtype=torch.bool)
    untouched[ids.cpu().reshape(-1)] = False
    assert torch.equal(table.cpu()[untouched], before.cpu()[untouched])


def test_ids_outside_the_table_read_zero_and_add_nothing(device, rng):
    v, d = 4, 3
    table = torch.randn(v, d, generator=rng).to(device)
    ids = torch.tensor([0, -1, 4, 3, 100], dtype=torch.int64, device=device)
    got = embedding(ids, table, out=torch.full((5, d), NAN, device=device)).cpu()
    assert torch.equal(got[[0, 3]], table.cpu()[[0, 3]]) and not got[[1, 2, 4]].any()
    dy = torch.ones(5, d, device=device)
    g = embedding_grad(ids, dy, v).cpu()
    assert g[0].eq(1).all() and g[3].eq(1).all() and not g[1:3].any()


def test_fill_and_launcher_checks(device):
    t = torch.full((3, 7), NAN, device=device)
    fill_zero(t, block=4)
    assert not t.any()
    table = torch.zeros(3, 2, device=device)
    with pytest.raises(TypeError, match="int32 or int64"):
        embedding(torch.zeros(2, device=device), table)
    with pytest.raises(TypeError, match="float32"):
        sparse_sgd_update(table.half(), torch.zeros(2, dtype=torch.int64, device=device),
                          torch.zeros(2, 2, device=device), 0.1)
    calls = embedding_grad(torch.zeros(2, dtype=torch.int64, device=device), torch.zeros(2, 2, device=device), 3,
                           launch=False)
    assert [c.kernel.__name__ for c in calls] == ["fill_kernel", "scatter_rows_kernel"]
