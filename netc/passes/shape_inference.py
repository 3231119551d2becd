"""shape-inference: every value gets its static type, by each op's shape rule (Paleo's formulas).

Runs in topological order. A layer whose input failed is skipped (its error is already
reported), so one mistake gives one diagnostic, while independent mistakes are all reported.
"""
from __future__ import annotations

from ..ir.core import TensorType
from ..ops import lookup
from ..ops.registry import ShapeError, result_dtype
from .registry import Pass, register_pass


@register_pass
class ShapeInference(Pass):
    name = "shape-inference"
    title = "ShapeInference"
    requires = ("resolve-names",)
    summary = "infer the static shape of every tensor"

    def needed(self, module):
        return any(r.type.shape is None for op in module.walk() for r in op.results)

    def run(self, module, ctx):
        for net in module.networks():
            for op in net.regions[0].ops:
                self._op(op, ctx.diag)

    def _op(self, op, diag):
        opdef = lookup(op.name)
        if opdef is None or op.attrs.get("invalid"):
            return
        if any(v.type.shape is None for v in op.operands):
            return  # an input failed: already reported
        lo, hi = opdef.arity
        n = len(op.operands)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            d = diag.error(f"{opdef.type_name} '{op.attrs.get('name')}' takes {want} input"
                           f"{'s' if want != '1' else ''}, got {n}", op.loc, width=len(op.attrs.get("name", "x")))
            if n == 1 and lo == 2 and "split_index" in op.operands[0].owner.attrs:
                d.note("a split list of one element (splits 1) gives a single input")
            return
        ins = [v.type.shape for v in op.operands]
        a = opdef.attrs_of(op)
        try:
            out = opdef.infer(a, ins)
            opdef.check_dtypes(a, [v.type.dtype for v in op.operands])
        except ShapeError as e:
            if e.attr is not None:
                loc, width = op.attr_loc(e.attr), len(e.attr)
            elif e.operand is not None:
                loc = op.attr_loc(f"parent{e.operand}")
                width = len(op.operands[e.operand].owner.attrs.get("name", "x")) if loc is not op.loc else 1
            else:
                loc, width = op.loc, len(op.attrs.get("name", "x"))
            d = diag.error(f"in {opdef.type_name} '{op.attrs.get('name')}': {e}", loc, width=width)
            for note in e.notes:
                d.note(note)
            if e.operand is not None:
                src = op.operands[e.operand].owner
                d.note(f"'{src.attrs.get('name')}' has shape {list(op.operands[e.operand].type.shape)}", src.loc)
            elif e.attr is None:
                for v in op.operands:
                    d.note(f"input '{v.owner.attrs.get('name')}' has shape {list(v.type.shape)}", v.owner.loc)
            return
        problem = opdef.real_shape_problem(a, ins, out)
        if problem:
            diag.warning(f"in {opdef.type_name} '{op.attrs.get('name')}': {problem}, so it is not a real tensor "
                         f"shape; netc counts with it (and so do the layers after it) but will not run this layer",
                         op.loc, width=len(op.attrs.get("name", "x")))
        dtype = result_dtype(opdef, a, [v.type.dtype for v in op.operands])
        # (an update defines no value; batch statistics two: infer gives their shapes)
        shapes = [out] if opdef.num_results == 1 else list(out)[:opdef.num_results]
        for r, shape in zip(op.results, shapes):
            r.type = TensorType(shape, dtype)
