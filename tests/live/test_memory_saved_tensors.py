"""The memory model against what torch really keeps for the backward (issue 15, item 3).

Small Llama-, GPT- and MoE-style decoders are built here from plain torch modules, in the
variants frameworks run: SDPA (FlashAttention-class) or eager attention, fused norm / SwiGLU /
rotary kernels (as Transformer Engine and Megatron's fusions keep tensors: a custom autograd
Function each) or the Hugging Face reference code op by op (RMSNorm on an fp32 copy, separate
gate and up projections, rotate_half rotary, repeat_kv), with and without per-layer
``torch.utils.checkpoint``. ``torch.autograd.graph.saved_tensors_hooks`` records every tensor
saved for the backward; the bytes of the unique storages each layer keeps (parameters, and
tables every layer shares such as cos / sin and the causal mask, left out) must match
analytic/memory.py within 3% per layer. Under full recompute the layer's re-run in the backward
is recorded too and checked against the working set the model adds.

Sizes are the issue's (h 512, 8 heads, 2 K/V heads, ffn 1408, sequence 512, batch 2, bf16),
with 2 layers: a layer is measured on its own, a second one shows which storages are shared.
Dropout uses ``torch.native_dropout`` (the CUDA path of ``F.dropout``: a bool mask; the CPU
path of ``F.dropout`` keeps a 16-bit mask instead).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
nn = torch.nn

pytestmark = pytest.mark.live

from scalemodel.analytic.memory import (  # noqa: E402
    act_per_layer,
    act_working_set,
    layer_act_coeffs,
)
from scalemodel.specs.model import ModelSpec  # noqa: E402
from scalemodel.specs.saved_tensors import kernel_saves  # noqa: E402

H, HEADS, KV, FFN, SEQ, BATCH, LAYERS = 512, 8, 2, 1408, 512, 2, 2
E, TOP_K, MOE_FFN = 8, 2, 704
DT = torch.bfloat16
TOL = 0.03


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread: these matmuls are small, and CI's two cores are shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# --- fused kernels: what Transformer Engine / Megatron's fusions keep ------------------------


class _FusedRMSNorm(torch.autograd.Function):
    """Keeps the 16-bit input and the fp32 rstd (TE's rmsnorm)."""

    @staticmethod
    def forward(ctx, x, w, eps):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, w, rstd)
        return ((xf * rstd) * w.float()).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, w, rstd = ctx.saved_tensors
        xhat = x.float() * rstd
        gw = g.float() * w.float()
        dx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
        dw = (g.float() * xhat).sum(dim=tuple(range(g.dim() - 1)))
        return dx.to(x.dtype), dw.to(w.dtype), None


class _FusedSwiGLU(torch.autograd.Function):
    """Keeps the fc1 output (gate and up halves), as megatron/core/fusions/fused_bias_swiglu."""

    @staticmethod
    def forward(ctx, gu):
        ctx.save_for_backward(gu)
        g, u = gu.chunk(2, -1)
        return F.silu(g) * u

    @staticmethod
    def backward(ctx, dy):
        (gu,) = ctx.saved_tensors
        g, u = gu.float().chunk(2, -1)
        sig = torch.sigmoid(g)
        dyf = dy.float()
        dg = dyf * u * sig * (1 + g * (1 - sig))
        return torch.cat([dg, dyf * g * sig], -1).to(gu.dtype)


def _rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat((-x2, x1), -1)


class _FusedRope(torch.autograd.Function):
    """Keeps only the shared cos / sin tables (TE's fused rotary)."""

    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return x * cos + _rotate_half(x) * sin

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        gs = g * sin
        g1, g2 = gs.chunk(2, -1)
        return g * cos + torch.cat((g2, -g1), -1), None, None


def _dropout(x, p):
    return torch.native_dropout(x, p, True)[0] if p else x


# --- modules ---------------------------------------------------------------------------------


class Norm(nn.Module):
    def __init__(self, kind: str, fused: bool):
        super().__init__()
        self.kind, self.fused = kind, fused
        self.weight = nn.Parameter(torch.ones(H, dtype=DT))
        self.bias = nn.Parameter(torch.zeros(H, dtype=DT)) if kind == "layer" else None

    def forward(self, x):
        if self.kind == "layer":
            return F.layer_norm(x, (H,), self.weight, self.bias)
        if self.fused:
            return _FusedRMSNorm.apply(x, self.weight, 1e-5)
        xf = x.to(torch.float32)  # Hugging Face LlamaRMSNorm
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.weight * xf.to(x.dtype)


def linear(i, o, bias=False):
    return nn.Linear(i, o, bias=bias, dtype=DT)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d = H // HEADS
        kv = cfg["kv_heads"]
        self.q, self.k, self.v = (linear(H, HEADS * d, cfg["bias"]), linear(H, kv * d, cfg["bias"]),
                                  linear(H, kv * d, cfg["bias"]))
        self.o = linear(HEADS * d, H, cfg["bias"])

    def forward(self, x, rope):
        cfg, d, kv = self.cfg, H // HEADS, self.cfg["kv_heads"]
        b, s, _ = x.shape
        q = self.q(x).view(b, s, HEADS, d).transpose(1, 2)
        k = self.k(x).view(b, s, kv, d).transpose(1, 2)
        v = self.v(x).view(b, s, kv, d).transpose(1, 2)
        if rope is not None:
            cos, sin = rope
            if cfg["fused"]:
                q, k = _FusedRope.apply(q, cos, sin), _FusedRope.apply(k, cos, sin)
            else:
                q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        if cfg["repeat_kv"] and kv < HEADS:  # Hugging Face / torchtitan repeat_kv
            n = HEADS // kv
            k = k[:, :, None].expand(b, kv, n, s, d).reshape(b, HEADS, s, d)
            v = v[:, :, None].expand(b, kv, n, s, d).reshape(b, HEADS, s, d)
        if cfg["attention"] == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                 enable_gqa=k.shape[1] < HEADS)
        else:
            if k.shape[1] < HEADS:
                raise AssertionError("eager attention needs repeated K/V heads")
            scores = torch.matmul(q, k.transpose(2, 3)) * (1 / math.sqrt(d))
            scores = scores + cfg["mask"]
            if cfg["fused"]:  # Megatron's fused softmax: 16-bit output
                p = torch.softmax(scores, -1)
            else:  # Hugging Face eager: fp32 softmax, cast back
                p = F.softmax(scores, -1, dtype=torch.float32).to(q.dtype)
            p = _dropout(p, cfg["dropout"])
            out = torch.matmul(p, v)
        out = out.transpose(1, 2).reshape(b, s, HEADS * d)
        return _dropout(self.o(out), cfg["dropout"])


class MLP(nn.Module):
    def __init__(self, cfg, ffn):
        super().__init__()
        self.cfg = cfg
        if not cfg["gated"]:
            self.fc1, self.fc2 = linear(H, ffn, cfg["bias"]), linear(ffn, H, cfg["bias"])
        elif cfg["fused"]:
            self.fc1, self.fc2 = linear(H, 2 * ffn), linear(ffn, H)
        else:
            self.gate, self.up, self.down = linear(H, ffn), linear(H, ffn), linear(ffn, H)

    def forward(self, x):
        if not self.cfg["gated"]:
            return self.fc2(F.gelu(self.fc1(x)))
        if self.cfg["fused"]:
            return self.fc2(_FusedSwiGLU.apply(self.fc1(x)))
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """Token-choice top-k routing as Megatron's alltoall dispatcher runs it on one rank: fp32
    router softmax, permute to expert order, experts, multiply by the routing weight, unpermute."""

    def __init__(self, cfg):
        super().__init__()
        self.router = linear(H, E)
        self.experts = nn.ModuleList(MLP(cfg, MOE_FFN) for _ in range(E))

    def forward(self, x):
        b, s, _ = x.shape
        xt = x.reshape(b * s, H)
        probs = torch.softmax(self.router(xt).float(), -1)
        w, idx = probs.topk(TOP_K, -1)
        w = (w / w.sum(-1, keepdim=True)).to(x.dtype)
        flat = idx.flatten()
        order = flat.argsort(stable=True)
        tok = order // TOP_K
        xs = xt[tok]
        counts = torch.bincount(flat, minlength=E).tolist()
        ys, start = [], 0
        for e, n in enumerate(counts):
            ys.append(self.experts[e](xs[start:start + n]))
            start += n
        ys = torch.cat(ys) * w.flatten()[order].unsqueeze(-1)
        # scatter_add, as Megatron's unpermute (index_add's backward would keep ys as well)
        out = torch.zeros_like(xt).scatter_add(0, tok[:, None].expand(-1, H), ys)
        return out.view(b, s, H)


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.n1, self.n2 = Norm(cfg["norm"], cfg["fused"]), Norm(cfg["norm"], cfg["fused"])
        self.attn = Attention(cfg)
        self.mlp = MoE(cfg) if cfg["moe"] else MLP(cfg, FFN)

    def forward(self, x, rope):
        x = x + self.attn(self.n1(x), rope)
        return x + _dropout(self.mlp(self.n2(x)), self.cfg["dropout"])


# --- measurement -----------------------------------------------------------------------------


def _rope_tables():
    d = H // HEADS
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    ang = torch.outer(torch.arange(SEQ).float(), inv)
    ang = torch.cat((ang, ang), -1)
    return ang.cos().to(DT), ang.sin().to(DT)


def measure(cfg, checkpoint: bool):
    """Bytes of unique storages each layer saves in the forward and, under checkpointing, what
    the last layer's re-run in the backward keeps besides its stored input (parameters and the
    shared tables left out)."""
    torch.manual_seed(0)
    layers = [Layer(cfg) for _ in range(LAYERS)]
    rope = _rope_tables() if cfg["rope"] else None
    # parameters and the tables every layer reads (cos / sin, the causal mask) are not
    # activations
    tables = [p for m in layers for p in m.parameters()] + list(rope or ()) + [cfg["mask"]]
    params = {t.untyped_storage().data_ptr() for t in tables}
    x = torch.randn(BATCH, SEQ, H, dtype=DT, requires_grad=True)
    fwd = [dict() for _ in layers]
    rerun = [dict() for _ in layers]
    phase = {"rec": None}

    def hooks(i):
        def pack(t):
            st = t.untyped_storage()
            if st.data_ptr() not in params:
                target = rerun[i] if phase["rec"] is not None else fwd[i]
                target[st.data_ptr()] = st.nbytes()
            return t
        return pack

    h = x
    for i, layer in enumerate(layers):
        if checkpoint and i == LAYERS - 1:  # the backward stops at the last layer's input
            h = h.detach().requires_grad_()
        if checkpoint:
            def run(inp, layer=layer, i=i):
                with torch.autograd.graph.saved_tensors_hooks(hooks(i), lambda t: t):
                    return layer(inp, rope)
            with torch.autograd.graph.saved_tensors_hooks(hooks(i), lambda t: t):
                h = torch.utils.checkpoint.checkpoint(run, h, use_reentrant=True)
        else:
            with torch.autograd.graph.saved_tensors_hooks(hooks(i), lambda t: t):
                h = layer(h, rope)
    if checkpoint:  # the backward through the last layer re-runs it (the others are alike)
        phase["rec"] = True
        h.float().sum().backward()
    assert not set(fwd[0]) & set(fwd[1])  # no activation is kept by two layers
    stored = [sum(f.values()) for f in fwd]
    # the re-run keeps the stored input again (same storage): not new memory
    work = sum(v for k, v in rerun[-1].items() if k not in fwd[-1])
    return stored, work


def spec(cfg) -> ModelSpec:
    return ModelSpec(
        id="torch-" + cfg["name"], family="test", n_layers=LAYERS, hidden=H, n_heads=HEADS,
        n_kv_heads=cfg["kv_heads"], head_dim=H // HEADS, ffn=FFN, vocab=1000, max_context=SEQ,
        gated_mlp=cfg["gated"], norm=cfg["norm"], linear_bias=cfg["bias"],
        learned_positions=0 if cfg["rope"] else SEQ, dropout=bool(cfg["dropout"]),
        n_experts=E if cfg["moe"] else 0, top_k=TOP_K if cfg["moe"] else 0,
        moe_ffn=MOE_FFN if cfg["moe"] else 0)


def model_bytes(cfg, rc: int) -> tuple[float, float]:
    """(stored, working set) bytes per layer from analytic/memory.py, TP 1."""
    m = spec(cfg)
    att = "flash" if cfg["attention"] == "sdpa" else "unfused"
    ks = kernel_saves("fused" if cfg["fused"] else "eager", att)
    if ks.kv_repeat != cfg["repeat_kv"]:
        from dataclasses import replace

        ks = replace(ks, kv_repeat=cfg["repeat_kv"])
    c = layer_act_coeffs(m, cfg["moe"], ks)
    args = (SEQ, BATCH, HEADS, m.n_kv_heads, 1, False, rc, False)
    return float(act_per_layer(c, *args)), float(act_working_set(c, *args))


LLAMA = dict(norm="rms", gated=True, rope=True, bias=False, dropout=0.0, kv_heads=KV, moe=False)
GPT = dict(norm="layer", gated=False, rope=False, bias=True, dropout=0.1, kv_heads=HEADS,
           moe=False)
VARIANTS = {
    "llama-fused-sdpa": LLAMA | dict(fused=True, attention="sdpa", repeat_kv=False),
    "llama-hf-sdpa": LLAMA | dict(fused=False, attention="sdpa", repeat_kv=True),
    "llama-hf-sdpa-native-gqa": LLAMA | dict(fused=False, attention="sdpa", repeat_kv=False),
    "llama-hf-eager": LLAMA | dict(fused=False, attention="eager", repeat_kv=True),
    "llama-fused-eager-attn": LLAMA | dict(fused=True, attention="eager", repeat_kv=True),
    "gpt-sdpa": GPT | dict(fused=True, attention="sdpa", repeat_kv=False, dropout=0.0),
    "gpt-eager-dropout": GPT | dict(fused=True, attention="eager", repeat_kv=False),
    "moe-fused-sdpa": LLAMA | dict(fused=True, attention="sdpa", repeat_kv=False, moe=True),
    "moe-hf-sdpa": LLAMA | dict(fused=False, attention="sdpa", repeat_kv=True, moe=True),
}
RECOMPUTED = ("llama-fused-sdpa", "llama-hf-sdpa", "gpt-eager-dropout", "moe-fused-sdpa")


def _cfg(name):
    cfg = dict(VARIANTS[name], name=name)
    cfg["mask"] = torch.full((SEQ, SEQ), float("-inf"), dtype=DT).triu(1)
    return cfg


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_stored_activations_match_torch(name):
    cfg = _cfg(name)
    stored, _ = measure(cfg, checkpoint=False)
    want, _ = model_bytes(cfg, 0)
    for i, got in enumerate(stored):
        assert got == pytest.approx(want, rel=TOL), (name, i, got, want)


@pytest.mark.parametrize("name", RECOMPUTED)
def test_full_recompute_stores_the_input_and_reruns_one_layer(name):
    cfg = _cfg(name)
    stored, work = measure(cfg, checkpoint=True)
    want_stored, want_work = model_bytes(cfg, 2)
    assert want_stored == 2 * SEQ * BATCH * H
    for i in range(LAYERS):
        assert stored[i] == pytest.approx(want_stored, rel=TOL), (name, i)
    assert work == pytest.approx(want_work, rel=TOL), (name, work, want_work)


def test_issue_reference_layer():
    """Issue 15: a Llama-style layer of these sizes with SDPA and the Hugging Face norm and MLP
    saves 22.6 MB; the fused-kernel accounting said 15.5 MB. No rotary in that measurement."""
    cfg = _cfg("llama-hf-sdpa-native-gqa") | dict(rope=False)
    stored, _ = measure(cfg, checkpoint=False)
    assert stored[0] / 1e6 == pytest.approx(22.6, abs=0.1)
    want, _ = model_bytes(cfg, 0)
    assert want == pytest.approx(stored[0], rel=TOL)
    fused = model_bytes(_cfg("llama-fused-sdpa") | dict(rope=False), 0)[0]
    assert fused / 1e6 == pytest.approx(15.5, abs=0.1)
