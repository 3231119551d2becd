"""Embeddings: Embedding (rows of a table [V, D] picked by integer ids: PaddlePaddle's word embedding)
and its gradient, a scatter-add of the output gradient's rows into [V, D]; OneHot (rows of the
identity [V, V] picked by ids, no parameter: SINGA's kOneHot).

The ids are an integer tensor (i32 or i64) of any shape S; the result is S + [D] in the network's
floating type. An id outside [0, V) is an error, never a wrapped or clamped row: the reference
raises it at run time (the layer named), the data checks of `netc run --data` name the input and
the sample, and random inputs (runtime/reference.py) draw ids in [0, V) (OpDef.index_operand).
The kernels (kernels/embedding.py; OneHot's fill in kernels/sequence.py) cannot raise: they read a
zero row for such an id and write nothing for it.

Costs do not depend on V: the forward reads one row per id and writes it (no FLOPs); the gradient
adds D values per id (D FLOPs per id), plus, for the dense gradient, clearing its [V, D] result.
A table declared `sparse_update: true` skips that dense gradient altogether: the optimizer pass
(passes/optimizer.py) updates the rows the ids touch in place (ops/optim.py netc.sparse_sgd_update).
"""
from __future__ import annotations

from ..diagnostics import NetcError
from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register


def check_ids(ids, num_embeddings: int, layer: str | None, what: str = "Embedding",
              rows: str = "the table's rows", bound: str = "num_embeddings"):
    """The ids as int64, or NetcError naming the first id outside [0, num_embeddings)."""
    import torch
    if ids.is_floating_point():
        if not bool(torch.equal(ids, ids.round())):
            raise NetcError(f"{what} '{layer}': its ids must be integers, got fractional values")
    idx = ids.to(torch.int64)
    if idx.numel():
        bad = (idx < 0) | (idx >= num_embeddings)
        if bool(bad.any()):
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise NetcError(f"{what} '{layer}': id {int(idx[where])} at {list(where)} is outside {rows} "
                            f"0 to {num_embeddings - 1} ({bound} {num_embeddings})")
    return idx


def _check_table(a: dict):
    for k in ("num_embeddings", "dim"):
        if a[k] <= 0:
            raise ShapeError(f"{k} must be positive, got {a[k]}", attr=k)


@register
class Embedding(OpDef):
    name = "embedding"
    types = ("Embedding",)
    arity = (1, 1)
    param_roles = ("table",)
    index_operand = 0
    index_bound = "num_embeddings"
    attrs = {
        "num_embeddings": AttrSpec("int", doc="the vocabulary size V: the table's rows, ids are 0 to V-1"),
        "dim": AttrSpec("int", doc="the embedding width D: the table's columns"),
    }
    doc = ("Rows of a table [num_embeddings, dim] picked by integer ids (i32 or i64) of any shape S: the result is "
           "S + [dim] (out[s] = table[ids[s]]). An id outside [0, num_embeddings) is an error. No FLOPs forward, "
           "D per id backward (a scatter-add of the output gradient's rows); bytes do not depend on the vocabulary.")

    def result_dtype(self, a, operand_dtypes):
        return "f32"     # the table's type (set-dtype gives 16-bit networks theirs); the ids are integers

    def infer(self, a, ins):
        (ids,) = ins
        _check_table(a)
        if len(ids) < 1:
            raise ShapeError(f"Embedding needs ids with a batch axis ([N, ...]), got a scalar {list(ids)}", operand=0)
        return tuple(ids) + (a["dim"],)

    def param_shapes(self, a, ins, out):
        return {"table": (a["num_embeddings"], a["dim"])}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(0, 0, prod(ins[0]) * a["dim"])

    def bytes_moved(self, a, ins, out, itemsize=4):
        """Each id read, its row read and written: independent of the vocabulary."""
        n = prod(ins[0])
        return itemsize * (n + 2 * n * a["dim"])

    def reference(self, a, ins, params):
        idx = check_ids(ins[0], a["num_embeddings"], a.get("name"))
        table = params["table"]
        return table[idx.reshape(-1)].reshape(tuple(ins[0].shape) + (table.shape[1],))

    def eager(self, a, params, x_shape, out_shape, training):
        import torch.nn.functional as F
        table = params["table"]
        return lambda ids: F.embedding(ids.long(), table)

    def onnx(self, a, w, op):
        """ONNX's Gather of the table's rows (axis 0) by the ids, as torch's nn.Embedding exports."""
        y = w.node("Gather", [w.param(op, "table"), w.x(op, 0)], hint=a.get("name") or "embedding", axis=0)
        w.result(op, y)

    def gradient(self, g, op, dy):
        """The table's gradient: dy's rows added into [V, D] at their ids (duplicates summed); the ids,
        integers, get none."""
        dt = None
        if g.needs_param("table"):
            dt = g.emit("netc.embedding_grad", [op.operands[0], dy],
                        {"num_embeddings": self.attrs_of(op)["num_embeddings"]}, tag="grad_table")
        return [None], {"table": dt}


@register
class EmbeddingGrad(OpDef):
    name = "embedding_grad"
    training_only = True
    unbatched = True
    arity = (2, 2)
    f32_result = True     # duplicate ids are summed: in f32 (16-bit networks too), with f32 atomics
    index_operand = 0
    index_bound = "num_embeddings"
    attrs = {"num_embeddings": AttrSpec("int", doc="the table's rows V")}
    doc = ("The gradient of an Embedding's table: zeros [V, D], then each row of dy (ids' shape + [D]) added at its "
           "id (duplicates summed). FLOPs: D per id. Bytes: the [V, D] result cleared, plus D per id.")

    def result_dtype(self, a, operand_dtypes):
        return operand_dtypes[1] if len(operand_dtypes) > 1 else "f32"

    def infer(self, a, ins):
        ids, dy = ins
        if a["num_embeddings"] <= 0:
            raise ShapeError(f"num_embeddings must be positive, got {a['num_embeddings']}", attr="num_embeddings")
        if len(dy) != len(ids) + 1 or tuple(dy[:-1]) != tuple(ids):
            raise ShapeError(f"the gradient {list(dy)} does not fit an embedding of ids {list(ids)} (ids' shape + [D])",
                             operand=1)
        return (a["num_embeddings"], dy[-1])

    def sparse_rows(self, op):
        """(ids, rows): this gradient is rows[i] added at ids[i] into zeros, the form a sparse update
        applies in place (passes/optimizer.py)."""
        return op.operands[0], op.operands[1]

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(prod(ins[1]))

    def bytes_moved(self, a, ins, out, itemsize=4):
        n = prod(ins[0])
        return itemsize * (prod(out) + n + 2 * prod(ins[1]))

    def reference(self, a, ins, params):
        import torch
        from .reference import in_compute_dtype
        ids, dy = ins
        idx = check_ids(ids, a["num_embeddings"], a.get("name"))
        rows = in_compute_dtype(dy).reshape(-1, dy.shape[-1])
        out = torch.zeros((a["num_embeddings"], dy.shape[-1]), dtype=rows.dtype, device=rows.device)
        return out.index_add_(0, idx.reshape(-1), rows)


@register
class OneHot(OpDef):
    name = "one_hot"
    types = ("OneHot",)
    arity = (1, 1)
    differentiable = False   # its operand is ids (data): no gradient flows to them
    index_operand = 0
    index_bound = "depth"
    attrs = {"depth": AttrSpec("int", doc="V, the classes: ids are 0 to V-1, each row has V entries"),
             "on_value": AttrSpec("number", 1.0, doc="the entry at the id (TensorFlow's on_value); the others are 0")}
    doc = ("One-hot rows of integer ids (i32 or i64) of any shape S: the result is S + [depth], on_value (1) at the "
           "id and 0 elsewhere (SINGA's kOneHot with onehot_conf.vocab_size = depth). An id outside [0, depth) is an "
           "error. No parameters, no FLOPs (a write per output element).")

    def result_dtype(self, a, operand_dtypes):
        return "f32"

    def infer(self, a, ins):
        (ids,) = ins
        if a["depth"] <= 0:
            raise ShapeError(f"depth must be positive, got {a['depth']}", attr="depth")
        if len(ids) < 1:
            raise ShapeError(f"OneHot needs ids with a batch axis ([N, ...]), got a scalar {list(ids)}", operand=0)
        return tuple(ids) + (a["depth"],)

    def reference(self, a, ins, params):
        import torch
        from .reference import in_compute_dtype
        idx = check_ids(ins[0], a["depth"], a.get("name"), "OneHot", "the classes", "depth")
        return in_compute_dtype(torch.nn.functional.one_hot(idx, a["depth"])) * a.get("on_value", 1.0)
