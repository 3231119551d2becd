"""The multi-tensor optimizer kernels (netc/kernels/optim.py) against the reference update ops of
netc/ops/optim.py over 3 steps, for every optimizer and both conventions (torch, singa), with
weight decay, per-parameter lr_scale/wd_scale, clipping by the global norm and by value: the
parameters, gradients and every state role each live in one arena (views at odd offsets of one
buffer, as the memory plan places them), parameters are cut into several chunks, and one launch
updates them all. Also the global norm (deterministic), 16-bit parameters beside f32 ones (two
dtype groups), and the call structure for codegen."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc import ops  # noqa: E402
from netc.kernels import optim as O  # noqa: E402
from netc.ops import reference as R  # noqa: E402

SHAPES = [(3, 5), (7,), (2, 3, 4), (1,), (19,)]
OPS = {"sgd": "netc.sgd_update", "adam": "netc.adam_update", "rmsprop": "netc.rmsprop_update",
       "adagrad": "netc.adagrad_update", "adadelta": "netc.adadelta_update", "adamax": "netc.adamax_update"}
OPTION_NAMES = ("momentum", "nesterov", "beta1", "beta2", "eps", "alpha", "rho", "weight_decay", "clip_norm", "clip_low",
                "clip_high", "convention")


def arena(gen, shapes, dtype=torch.float32, device="cpu", fill=None, scale=1.0):
    """Views of one buffer at odd offsets with gaps between them (poisoned with NaN: never read)."""
    sizes = [int(torch.tensor(s).prod()) for s in shapes]
    buf = torch.full((sum(sizes) + 5 * len(sizes) + 3,), float("nan"), dtype=dtype, device=device)
    views, o = [], 3
    for s, n in zip(shapes, sizes):
        v = buf[o:o + n].view(s)
        v.copy_(torch.full(s, fill) if fill is not None else torch.randn(s, generator=gen) * scale)
        views.append(v)
        o += n + 5
    return views


CASES = [
    ("sgd", "torch", dict()),
    ("sgd", "torch", dict(momentum=0.9)),
    ("sgd", "torch", dict(momentum=0.9, nesterov=True)),
    ("sgd", "singa", dict(momentum=0.9)),
    ("sgd", "singa", dict(momentum=0.8, nesterov=True)),
    ("adam", "torch", dict()),
    ("adam", "singa", dict(beta1=0.8, eps=1e-6)),
    ("rmsprop", "torch", dict()),
    ("rmsprop", "singa", dict(alpha=0.9)),
    ("adagrad", "torch", dict()),
    ("adagrad", "singa", dict()),
    ("adadelta", "torch", dict()),
    ("adadelta", "singa", dict(rho=0.95, eps=1e-4)),
    ("adamax", "torch", dict()),
    ("adamax", "singa", dict(beta1=0.8, beta2=0.99, eps=1e-3)),
]


def run_steps(device, rng, optimizer, convention, extra, clip, dtype=torch.float32, steps=3, chunk=8):
    """`steps` steps of the kernel and of the reference op per parameter; returns both sides."""
    opdef = ops.lookup(OPS[optimizer])
    attrs = {k: s.default for k, s in opdef.attrs.items()}
    attrs.update(weight_decay=0.01, convention=convention, **extra, **clip)
    n = len(SHAPES)
    lr_scale, wd_scale = [1.0, 0.5, 2.0, 1.0, 0.0][:n], [1.0, 0.0, 1.0, 2.0, 1.0][:n]
    params = arena(rng, SHAPES, dtype, device)
    roles = opdef.state_roles(attrs)
    state = {r: arena(rng, [()] * n if r.endswith("_step") else SHAPES, torch.float32, device, fill=0.0)
             for r in roles}
    ref_p = [p.detach().double().cpu() for p in params]
    ref_s = {r: [s.double().cpu() for s in state[r]] for r in roles}
    fn = getattr(O, f"{optimizer}_update")
    options = {k: v for k, v in attrs.items() if k in OPTION_NAMES}
    for step in range(steps):
        grads = arena(rng, SHAPES, dtype, device, scale=2.0)
        lr = torch.tensor(0.1 * (step + 1), device=device)
        norm = O.global_norm(grads, chunk=chunk, block=4) if attrs["clip_norm"] > 0 else None
        ref_norm = ops.lookup("netc.global_norm").reference({}, [g.cpu() for g in grads], {})
        if norm is not None:
            R.check(norm, ref_norm, what="global norm")
        fn(params, grads, lr, norm=norm, lr_scale=lr_scale, wd_scale=wd_scale, chunk=chunk, block=4,
           **{r: state[r] for r in roles}, **options)
        for i in range(n):
            a = dict(attrs, lr_scale=lr_scale[i], wd_scale=wd_scale[i])
            ins = [grads[i].cpu(), lr.cpu()] + ([ref_norm] if attrs["clip_norm"] > 0 else [])
            res = opdef.reference(a, ins, {"param": ref_p[i], **{r: ref_s[r][i] for r in roles}})
            ref_p[i] = res["param"]
            for r in roles:
                ref_s[r][i] = res[r]
    return params, state, ref_p, ref_s, roles


@pytest.mark.parametrize("optimizer,convention,extra", CASES,
                         ids=[f"{o}-{c}-{'-'.join(f'{k}{v}' for k, v in e.items()) or 'plain'}" for o, c, e in CASES])
@pytest.mark.parametrize("clip", [dict(), dict(clip_norm=0.5, clip_low=-1.0, clip_high=1.5)], ids=["", "clipped"])
def test_update_three_steps(device, rng, optimizer, convention, extra, clip):
    params, state, ref_p, ref_s, roles = run_steps(device, rng, optimizer, convention, extra, clip)
    for i in range(len(SHAPES)):
        R.check(params[i], ref_p[i], what=f"param {i}")
        for r in roles:
            R.check(state[r][i], ref_s[r][i], what=f"{r} {i}")


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "adamax"])
def test_update_bf16_params_beside_f32_ones(device, rng, optimizer):
    """A 16-bit network: bf16 weights and gradients (f32 state), and f32 batch-norm vectors: two dtype
    groups, one launch each; values against the reference at bf16's tolerance."""
    opdef = ops.lookup(OPS[optimizer])
    attrs = {k: s.default for k, s in opdef.attrs.items()}
    attrs.update(weight_decay=0.01, momentum=0.9) if optimizer == "sgd" else attrs.update(weight_decay=0.01)
    roles = opdef.state_roles(attrs)
    wshapes, vshapes = [(4, 6), (9,)], [(6,), (3,)]
    pw, pv = arena(rng, wshapes, torch.bfloat16, device), arena(rng, vshapes, torch.float32, device)
    params = [pw[0], pv[0], pw[1], pv[1]]
    shapes = [tuple(p.shape) for p in params]
    state = {r: arena(rng, [()] * 4 if r.endswith("_step") else shapes, torch.float32, device, fill=0.0) for r in roles}
    ref_p = [p.double().cpu() for p in params]
    ref_s = {r: [s.double().cpu() for s in state[r]] for r in roles}
    fn = getattr(O, f"{optimizer}_update")
    options = {k: v for k, v in attrs.items() if k in OPTION_NAMES}
    for step in range(3):
        gw, gv = arena(rng, wshapes, torch.bfloat16, device), arena(rng, vshapes, torch.float32, device)
        grads = [gw[0], gv[0], gw[1], gv[1]]
        lr = torch.tensor(0.05, device=device)
        calls = fn(params, grads, lr, launch=False, chunk=16, block=8, **{r: state[r] for r in roles}, **options)
        names = [c.kernel.__name__ for c in calls]
        assert names.count("multi_tensor_update_kernel") == 2       # the bf16 group and the f32 group
        for c in calls:
            c.launch()
        for i in range(4):
            res = opdef.reference(attrs, [grads[i].cpu(), lr.cpu()], {"param": ref_p[i],
                                                                      **{r: ref_s[r][i] for r in roles}})
            ref_p[i] = res["param"].to(params[i].dtype).double()     # the stored parameter is rounded
            for r in roles:
                ref_s[r][i] = res[r]
    for i in range(4):
        R.check(params[i], ref_p[i], params[i].dtype, what=f"param {i}")
        for r in roles:
            R.check(state[r][i], ref_s[r][i], params[i].dtype, what=f"{r} {i}")


def test_global_norm_is_deterministic(device, rng):
    grads = arena(rng, SHAPES, torch.float32, device, scale=3.0) + arena(rng, [(5, 7)], torch.bfloat16, device)
    ref = ops.lookup("netc.global_norm").reference({}, [g.cpu() for g in grads], {})
    a = O.global_norm(grads, out=torch.full((), float("nan"), device=device), chunk=4, block=2)
    b = O.global_norm(grads, chunk=4, block=2)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    R.check(a, ref)
    calls = O.global_norm(grads, chunk=4, launch=False)
    assert [c.kernel.__name__ for c in calls] == ["sum_squares_kernel"] * 2 + ["norm_finish_kernel"]


def test_table_and_calls_for_codegen(device):
    """The table codegen builds from the plan's offsets: one row per chunk, offsets advanced by the chunk,
    lr_scale/wd_scale as float64 bits; Adam adds the step increment after the update."""
    t = O.chunk_table([(10, 20, 30, 40, 5, 7, 0.5, 2.0), (100, 200, None, None, 2, None, 1.0, 1.0)], chunk=2)
    assert t.shape == (4, 8)
    assert t[:, 0].tolist() == [10, 12, 14, 100] and t[:, 4].tolist() == [2, 2, 1, 2]
    assert t[1, 2].item() == 32 and t[3, 2].item() == 0 and t[0, 5].item() == 7
    assert t[:, 6].view(torch.float64).tolist() == [0.5, 0.5, 0.5, 1.0]
    m = lambda *s: torch.empty(s, device="meta")  # noqa: E731
    calls = O.adam_update([m(3, 4)], [m(3, 4)], m(), adam_m=[m(3, 4)], adam_v=[m(3, 4)], adam_step=[m()],
                          launch=False)
    assert [c.kernel.__name__ for c in calls] == ["multi_tensor_update_kernel", "increment_steps_kernel"]
    calls = O.adamax_update([m(3, 4)], [m(3, 4)], m(), adamax_m=[m(3, 4)], adamax_u=[m(3, 4)], adamax_step=[m()],
                            launch=False)
    assert [c.kernel.__name__ for c in calls] == ["multi_tensor_update_kernel", "increment_steps_kernel"]
    calls = O.adadelta_update([m(3, 4)], [m(3, 4)], m(), square_avg=[m(3, 4)], acc_delta=[m(3, 4)], launch=False)
    assert [c.kernel.__name__ for c in calls] == ["multi_tensor_update_kernel"]
    with pytest.raises(ValueError, match="adadelta needs acc_delta"):
        O.multi_tensor_update("adadelta", O.chunk_table([(0, 0, 0, None, 3, None, 1.0, 1.0)]), m(3), m(3), 0.1,
                              state0=m(3), launch=False)
    with pytest.raises(ValueError, match="momentum needs the velocity"):
        O.sgd_update([m(3)], [m(3)], 0.1, momentum=0.9)
    with pytest.raises(ValueError, match="clip_norm needs"):
        O.sgd_update([m(3)], [m(3)], 0.1, clip_norm=1.0)
