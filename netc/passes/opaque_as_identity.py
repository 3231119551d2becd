"""opaque-as-identity: run the opaque layers of unknown types as the identity (an explicit opt-in).

Importers keep a layer type netc does not know as `netc.opaque` (Paleo's Generic layer: shape
pass-through, no parameters, 0 FLOPs; e.g. DenseNet's BatchNorm and Accuracy in the Paleo
corpus). netc cannot execute such a layer faithfully -- it does not know what it computes -- so
the executors refuse it. `netc run`/`netc compile --opaque-as-identity` adds this pass: every
opaque layer whose output has its (single) input's shape and dtype becomes a `netc.identity`
(keeping its name and `type`), with a warning naming it, so the rest of the network can run. The
memory plan places an identity on its operand's bytes (zero copy; codegen copies only where the
plan cannot alias). An opaque layer whose output would differ from its input is an error: the
identity would compute something of the wrong shape.
"""
from __future__ import annotations

from ..ops.registry import COMMON_ATTRS
from .registry import Pass, register_pass


@register_pass
class OpaqueAsIdentity(Pass):
    name = "opaque-as-identity"
    title = "OpaqueAsIdentity"
    requires = ("shape-inference",)
    summary = "run shape-preserving opaque layers (unknown types) as the identity, with a warning each"

    def needed(self, module):
        return any(op.name == "netc.opaque" for net in module.networks() for op in net.regions[0].ops)

    def run(self, module, ctx):
        by_type: dict = {}
        for net in module.networks():
            for op in net.regions[0].ops:
                if op.name != "netc.opaque":
                    continue
                name, kind = op.attrs.get("name"), op.attrs.get("type", "?")
                if op.attrs.get("energy_model"):   # an RBM's visible layer is not an unknown layer
                    continue
                out = op.results[0].type if op.results else None
                x = op.operands[0].type if len(op.operands) == 1 else None
                if x is None or out is None or out.shape != x.shape or out.dtype != x.dtype:
                    ins = ", ".join(str(list(v.type.shape)) if v.type.shape is not None else "?" for v in op.operands)
                    ctx.diag.error(f"--opaque-as-identity: layer '{name}' of unknown type '{kind}' cannot run as the "
                                   f"identity: it has {len(op.operands)} input{'s' if len(op.operands) != 1 else ''} "
                                   f"({ins or 'none'}) and an output {list(out.shape) if out and out.shape else '?'}",
                                   op.loc, width=len(name or "x"))
                    continue
                by_type.setdefault(kind, []).append(op)
                op.name = "netc.identity"
                op.attrs = {k: v for k, v in op.attrs.items() if k in COMMON_ATTRS or k.startswith("fusion_")}
        # one warning per unknown type, naming every layer of it
        for kind, ops in by_type.items():
            names = [op.attrs.get("name") for op in ops]
            n = len(names)
            ctx.diag.warning(f"{n} layer{'s' if n != 1 else ''} of unknown type '{kind}' run{'s' if n == 1 else ''} as "
                             f"the identity (--opaque-as-identity; what '{kind}' computes is unknown to netc): "
                             f"{', '.join(names)}",
                             ops[0].loc, width=len(names[0] or "x"))
