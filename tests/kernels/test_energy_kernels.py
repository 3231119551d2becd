"""Contrastive divergence's kernels (netc/kernels/energy.py) against the reference semantics of their ops
(netc/ops/energy.py) on random inputs: the sample is the reference's draw for draw (binary: the same bits;
Gaussian: the same normals up to f32 rounding), at several salts, offsets and seeds; the reconstruction,
the three update directions and the reconstruction error within f32 of the float64 reference, on strided
rows (a wider buffer's column slice) too; and the transposed-weight inner product's launch through gemm on
W's transposed view."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc import ops  # noqa: E402
from netc.kernels import energy as K  # noqa: E402

F64 = torch.float64


def ref(name, attrs, ins, params=None):
    d = ops.lookup(name)
    a = {k: s.default for k, s in d.attrs.items()}
    a.update(attrs)
    return d.reference(a, [t.to(F64) if torch.is_tensor(t) and t.is_floating_point() else t for t in ins],
                       {k: v.to(F64) for k, v in (params or {}).items()})


def rel(got, want):
    return float((got.to(F64) - want).abs().max() / max(float(want.abs().max()), 1e-30))


@pytest.mark.parametrize("shape,salt,offset,seed", [((8, 5), 0, 0, 1), ((13, 37), 2 ** 31 + 7, 481, 123456789),
                                                     ((4, 300), 0xDEADBEEF, 2 ** 20, 2 ** 40 + 3)])
def test_binary_sample_draws_the_references_bits(device, rng, shape, salt, offset, seed):
    h = torch.rand(shape, generator=rng)
    got = K.rbm_sample(h.to(device), torch.tensor(seed, device=device), salt, offset)
    want = ref("netc.rbm_sample", {"salt": salt, "offset": offset}, [h, seed])
    assert got.dtype == torch.float32 and set(got.unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(got.cpu().to(F64), want)
    # a different salt or offset draws other numbers
    other = K.rbm_sample(h.to(device), seed, salt + 1, offset)
    assert not torch.equal(other.cpu(), got.cpu())


def test_gaussian_sample_is_the_references_normal(device, rng):
    h = torch.randn(16, 33, generator=rng)
    got = K.rbm_sample(h.to(device), 77, 12345, 64, gaussian=True)
    want = ref("netc.rbm_sample", {"salt": 12345, "offset": 64, "gaussian": True}, [h, 77])
    assert (got.cpu().to(F64) - want).abs().max() < 2e-5
    noise = (want - h.to(F64)).flatten()
    assert abs(float(noise.mean())) < 0.2 and 0.8 < float(noise.std()) < 1.2


def test_sample_writes_a_column_slice(device, rng):
    h = torch.rand(6, 7, generator=rng)
    buf = torch.full((6, 12), -5.0, device=device)
    K.rbm_sample(h.to(device), 3, 9, out=buf[:, 2:9])
    want = ref("netc.rbm_sample", {"salt": 9}, [h, 3])
    assert torch.equal(buf[:, 2:9].cpu().to(F64), want)
    assert (buf[:, :2] == -5).all() and (buf[:, 9:] == -5).all()


def test_reconstruct_is_sigmoid_of_the_transposed_product(device, rng):
    hs = (torch.rand(9, 20, generator=rng) < 0.5).float()
    w, b = torch.randn(31, 20, generator=rng) * 0.3, torch.randn(31, generator=rng)
    got = K.rbm_reconstruct(hs.to(device), w.to(device), b.to(device))
    want = ref("netc.rbm_reconstruct", {"vdim": 31}, [hs], {"weight": w, "bias": b})
    assert got.shape == (9, 31) and rel(got.cpu(), want) < 1e-6


@pytest.mark.parametrize("b,v,h", [(8, 12, 5), (37, 70, 45), (3, 1, 1)])
def test_statistics_are_the_references(device, rng, b, v, h):
    v0, vk = torch.rand(b, v, generator=rng), torch.rand(b, v, generator=rng)
    h0, hk = torch.rand(b, h, generator=rng), torch.rand(b, h, generator=rng)
    for role in ("weight", "hidden_bias", "bias"):
        got = K.rbm_statistics(*(t.to(device) for t in (v0, h0, vk, hk)), role=role)
        want = ref("netc.rbm_statistics", {"role": role}, [v0, h0, vk, hk])
        assert got.shape == want.shape and rel(got.cpu(), want) < 1e-5, role


def test_statistics_read_strided_rows_and_an_image_shaped_v0(device, rng):
    b, h = 6, 9
    v0 = torch.rand(b, 2, 3, 4, generator=rng)            # [B, ...]: viewed [B, 24]
    wide = torch.rand(b, 40, generator=rng)
    vk, h0, hk = wide[:, 3:27], torch.rand(b, h, generator=rng), wide[:, 30:39]   # column slices of one buffer
    for role in ("weight", "hidden_bias", "bias"):
        got = K.rbm_statistics(v0.to(device), h0.to(device), vk.to(device), hk.to(device), role=role)
        want = ref("netc.rbm_statistics", {"role": role}, [v0, h0, vk, hk])
        assert rel(got.cpu(), want) < 1e-5, role


def test_error_is_the_references(device, rng):
    v0 = torch.rand(11, 1, 8, 8, generator=rng)
    v1 = torch.rand(11, 64, generator=rng)
    got = K.rbm_error(v0.to(device), v1.to(device))
    want = ref("netc.rbm_error", {}, [v0, v1])
    assert got.dim() == 0 and rel(got.cpu(), want) < 1e-6


def test_bad_shapes_are_refused(device):
    with pytest.raises(ValueError, match="do not fit the weight"):
        K.rbm_reconstruct(torch.zeros(2, 3, device=device), torch.zeros(4, 5, device=device), torch.zeros(4, device=device))
    with pytest.raises(ValueError, match="CD statistics need"):
        K.rbm_statistics(*(torch.zeros(2, n, device=device) for n in (3, 4, 3, 5)))
    with pytest.raises(ValueError, match="does not fit the data"):
        K.rbm_error(torch.zeros(2, 3, device=device), torch.zeros(2, 4, device=device))
    with pytest.raises(ValueError, match="exceeds the 2\\*\\*32 counters"):
        K.rbm_sample(torch.zeros(2, 3, device=device), 0, 0, 2 ** 32 - 2)
