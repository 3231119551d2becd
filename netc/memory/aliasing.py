"""The alias forest: which tensor is placed where, relative to which parent (views, identities,
in-place results and zero-copy concat slices), with a union-find over the trees."""
from __future__ import annotations

from .graph import PlanGraph
from .model import BATCH, CONSTANT, TIME, is_dense, is_rows, row_major


class AliasForest:
    """Parent pointers (the alias forest) plus a union-find over trees with per-tree facts."""

    def __init__(self, g: PlanGraph):
        n = len(g.tensors)
        self.g = g
        self.parent = [t.alias_of if t.alias else -1 for t in g.tensors]
        self.kind = [t.alias for t in g.tensors]
        self.slice: list = [None] * n
        self.uf = list(range(n))
        self.members = [[i] for i in range(n)]
        self.troot = list(range(n))     # alias-tree root of a union-find representative
        self.has_view = [False] * n
        for i in range(n):
            if self.parent[i] >= 0:
                self._union(i, self.parent[i])

    def copy(self) -> "AliasForest":
        f = AliasForest.__new__(AliasForest)
        f.g = self.g
        f.parent, f.kind, f.slice = list(self.parent), list(self.kind), list(self.slice)
        f.uf, f.troot, f.has_view = list(self.uf), list(self.troot), list(self.has_view)
        f.members = [list(m) for m in self.members]
        return f

    def find(self, i: int) -> int:
        uf = self.uf
        r = i
        while uf[r] != r:
            r = uf[r]
        while uf[i] != r:
            uf[i], i = r, uf[i]
        return r

    def root(self, i: int) -> int:
        return self.troot[self.find(i)]

    def _union(self, child: int, parent: int) -> int:
        a, b = self.find(child), self.find(parent)
        root = self.troot[b]
        if len(self.members[a]) > len(self.members[b]):
            a, b = b, a
        self.uf[a] = b
        self.members[b].extend(self.members[a])
        self.members[a] = []
        self.has_view[b] = self.has_view[a] or self.has_view[b]
        self.troot[b] = root
        return b

    def placement(self, i: int):
        """(root, byte offset, strides or None) of tensor i inside its tree's root."""
        chain = [i]
        while self.parent[chain[-1]] >= 0:
            chain.append(self.parent[chain[-1]])
        pl = (chain[-1], 0, None)
        for u in reversed(chain[:-1]):
            pl = self._compose(pl, self.parent[u], u, self.kind[u], self.slice[u])
            if pl is None:
                raise AssertionError("internal error: alias forest holds an impossible view")
        return pl

    def _compose(self, pl, p: int, u: int, kind: str, sl):
        """Placement of u given its parent p's placement, or None if it cannot be expressed."""
        root, off, strides = pl
        tensors = self.g.tensors
        if kind in ("identity", "inplace"):
            return pl
        if kind in ("view", "share"):
            return (root, off, None) if strides is None else None
        axis, start = sl   # concat
        pshape = tensors[p].feature_shape
        pst = strides if strides is not None else row_major(pshape)
        off += start * pst[axis] * tensors[u].itemsize
        return (root, off, None if is_dense(tensors[u].feature_shape, pst) else pst)

    def try_attach(self, u: int, p: int, kind: str, sl=None, op: int = -1, dense_only: bool = False) -> bool:
        """Place tree-root u (and with it its whole tree) relative to p, if that is safe.

        `op` is the op making the attachment: its own reads of u's tree are fine even if strided.
        """
        g, t = self.g, self.g.tensors
        if self.parent[u] >= 0:
            # u already aliases something; if it has exactly its tree root's bytes, move the root
            r = self.root(u)
            if kind == "concat" or t[u].size != t[r].size or self.placement(u) != (r, 0, None):
                return False
            if t[r].feature_shape != t[p].feature_shape:
                if kind == "inplace":
                    return False
                kind = "view"
            u = r
        tu, tp = t[u], t[p]
        if self.find(u) == self.find(p):
            return False
        if tu.kind != "activation" or tp.kind == "param":
            return False      # inputs and parameters always own their bytes
        if tu.cls != tp.cls or tu.dtype != tp.dtype:
            return False
        if kind in ("identity", "inplace") and tu.feature_shape != tp.feature_shape:
            return False
        if kind == "view" and tu.size != tp.size:
            return False
        pl = self._compose(self.placement(p), p, u, kind, sl)
        if pl is None:
            return False
        rep = self.find(u)
        if pl[2] is not None:
            # A strided placement: nothing in u's tree may be a view (a reshape of a strided
            # array is not an array) or a network result, nor be read by a kernel other than
            # `op` (kernels write strided slices; only aliasing ops read them).
            if dense_only or self.has_view[rep]:
                return False
            members = self.members[rep]
            tree = set(members)
            for w in members:
                if t[w].output:
                    return False
                for r in g.readers[w]:
                    if r == op:
                        continue
                    if not all(o in tree and (self.parent[o] == w or self.parent[w] == o) for o in g.writes[r]):
                        return False
        if not self._kernels_can_write(u, p, kind, sl, self.members[rep]):
            return False
        self.parent[u], self.kind[u], self.slice[u] = p, kind, sl
        b = self._union(u, p)
        if kind == "view":
            self.has_view[b] = True
        return True

    def _kernels_can_write(self, u: int, p: int, kind: str, sl, members: list) -> bool:
        """Whether every tensor of u's tree, placed by attaching u to p, is written by a kernel
        that can write its placement. A placement that is not the whole of a dense array (a slice
        of a concatenation, strided or a block of each sample) must be rows -- a channel slice of
        a contiguous buffer; a slice along H or W is not (its samples or rows are not evenly
        spaced) -- and be written by an op whose registry entry says it writes rows (a view's
        reshape copy writes dense buffers only). Tensors no kernel writes (identities) have their
        parent's placement, which is checked as well."""
        g, t = self.g, self.g.tensors
        saved = self.parent[u], self.kind[u], self.slice[u]
        self.parent[u], self.kind[u], self.slice[u] = p, kind, sl
        try:
            for w in members:
                root, _, strides = self.placement(w)
                tw = t[w]
                fshape = tw.feature_shape
                if tw.cls in (BATCH, TIME):     # (time: per time step and sample)
                    per_sample = t[root].size // tw.itemsize
                    if strides is None and per_sample == tw.numel:
                        continue          # the whole of a dense array
                    full = (per_sample,) + tuple(strides or row_major(fshape))
                elif tw.cls == CONSTANT:
                    if strides is None:
                        continue
                    full = tuple(strides)
                else:
                    return False
                # the plan holds at every batch (a sample's layout): the batch axis counts as longer than 1
                shape = ((max(tw.shape[0], 2),) + tuple(tw.shape[1:]) if tw.cls == BATCH else
                         (2,) + tuple(fshape) if tw.cls == TIME else tuple(tw.shape))
                if not is_rows(shape, full):
                    return False
                unit = g.producer[w]
                if unit < 0 or (self.parent[w] >= 0 and self.kind[w] in ("identity", "view")):
                    continue       # an input, or bytes no kernel writes
                if g.is_view(unit) or not all(getattr(g.opdefs[i], "writes_rows", True) for i in g.units[unit]):
                    return False
            return True
        finally:
            self.parent[u], self.kind[u], self.slice[u] = saved


def alias_schedule_free(g: PlanGraph, f: AliasForest, concat: str):
    """Views, identities and zero-copy concats: valid in every topological order.

    Ops are visited consumers first (reverse topological order), so that a Concatenate claims its
    inputs before their producers are looked at, and a chain conv -> dropout -> concat ends with
    the conv writing into the concat's slice.
    """
    for i in reversed(range(len(g.units))):
        if not g.writes[i] or not g.reads[i]:
            continue
        out = g.writes[i][0]
        if g.is_identity(i) or g.is_view(i):
            kind = "view" if g.is_view(i) else "identity"
            x = g.reads[i][0]
            if not f.try_attach(x, out, kind, op=i):
                f.try_attach(out, x, kind, op=i)
        elif g.is_concat(i) and concat != "none":
            ct = g.tensors[out]
            rank = len(ct.shape)
            d = g.ops[g.units[i][0]].attrs.get("dim", -1)
            d = d + rank if d < 0 else d
            axis = d - ct.cls     # the feature axis: after N (batch class), after T and N (time class)
            if axis < 0:
                continue          # concatenation along the batch axis: copied
            start, seen = 0, set()
            for x in g.reads[i][:g.n_operands[i]]:
                tx = g.tensors[x]
                ext = tx.shape[d]
                if x not in seen:
                    f.try_attach(x, out, "concat", (axis, start), op=i, dense_only=concat == "contiguous")
                seen.add(x)
                start += ext
