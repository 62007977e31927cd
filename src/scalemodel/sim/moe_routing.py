"""A learnable MoE router trained by gradient steps on clustered synthetic tokens (numpy).

What is simulated (all vectorised over the tokens of a step):

* Tokens: C clusters (topics) with centres in d dimensions; a token is its cluster centre plus
  Gaussian noise. A traffic mix (weights over clusters) says how often each cluster occurs.
* Router: logits z = x W over E experts; scores are a softmax (Switch, Mixtral) or a sigmoid
  (DeepSeek-V3); each token goes to the top-k scores (plus a bias in ``bias`` mode, which
  only changes the selection, never the gate value).
* Why collapse happens (Shazeer et al. 2017, "rich get richer"): an expert that receives more
  tokens trains faster and becomes more useful. We model the experts' usefulness with a
  learning curve, q_e = 1 - exp(-n_e / tau), where n_e counts (with a slow decay) the tokens the
  expert processed, shared across clusters by ``general`` and specific to the token's cluster
  otherwise. The router's task loss rewards gate mass on useful experts,
  L_task = -(1/T) sum_t sum_{e in top-k(t)} g_{t,e} q_{e,c(t)},
  so the gradient pushes each token's logits toward the experts that already get most tokens.
* Balancing: Switch's auxiliary loss alpha E sum_i f_i P_i (f_i: share of routed copies,
  P_i: mean router probability; Fedus et al. 2022), ST-MoE's router z-loss
  c_z mean_t (logsumexp z_t)^2 (Zoph et al. 2022) on top of the auxiliary loss, or
  DeepSeek-V3's auxiliary-loss-free bias: b_i moved by gamma toward balance after every step.

Training: Adam on the router weights (DeepSeek-V3's AdamW betas, no weight decay), so that a
stronger balancing term changes the direction of a step, never its length (a fixed gradient
step overshoots once lr x alpha is large). The topic mix is a Dirichlet draw or, with
``skew``, a Zipf law over the clusters.

Load metrics per step: the entropy of the load share (in nats; ln E when perfectly uniform),
max load / mean load, with capacity factor cf the fraction of routed copies that overflow
capacity = ceil(cf T k / E), and the router logit size (mean logsumexp of the logits, what the
z-loss squares). The reported load is time-averaged: summed over the last ``window`` steps,
and set against its sampling floor, the max/mean a perfectly uniform router shows from finite
token draws (:func:`sampling_floor`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analytic.moe_data import check_limit, router_constant
from ..errors import BadInput

BALANCE = ("none", "aux", "zloss", "bias")


def _c(name: str) -> Any:
    """Default of a RouterConfig field: its [router.*] figure in moe.toml."""
    return field(default_factory=lambda: router_constant(name))


@dataclass(frozen=True)
class RouterConfig:
    """The simulator's knobs. Published coefficients (aux_coef: Switch, z_coef: ST-MoE, gamma:
    DeepSeek-V3, capacity_factor: ST-MoE) and the toy model's own constants (kind =
    "assumption", each with a note on what it controls) default to moe.toml [router.*]."""

    experts: int = 64
    top_k: int = 2
    balance: str = "none"
    steps: int = 500
    tokens_per_step: int = 4096
    clusters: int = 16
    dim: int = _c("dim")
    score: str = ""  # softmax or sigmoid; empty: sigmoid for bias (DeepSeek-V3), else softmax
    lr: float = _c("lr")  # Adam step size
    beta1: float = _c("beta1")  # Adam's first-moment decay (DeepSeek-V3's AdamW)
    beta2: float = _c("beta2")  # Adam's second-moment decay (DeepSeek-V3's AdamW)
    adam_eps: float = _c("adam_eps")
    window: int = _c("window")  # steps whose summed load is the time-averaged load
    skew: float | None = None  # Zipf exponent of the training topic mix; None: Dirichlet
    task_gain: float = _c("task_gain")  # task-loss gradient weight against the balancing terms
    aux_coef: float = _c("aux_coef")  # Switch Transformer's alpha
    z_coef: float = _c("z_coef")  # ST-MoE's c_z
    gamma: float = _c("gamma")  # DeepSeek-V3's bias update speed
    capacity_factor: float = _c("capacity_factor")
    tau: float = _c("tau")  # tokens for an expert's usefulness to reach 1 - 1/e
    general: float = _c("general")  # share of an expert's learning that helps every cluster
    noise: float = _c("noise")  # token spread around its cluster centre
    decay: float = _c("decay")  # per-step fading of an expert's token counts
    centre_radius: float = _c("centre_radius")  # norm of the cluster centres
    mix_concentration: float = _c("mix_concentration")  # Dirichlet of the training mix
    init_scale: float = _c("init_scale")  # std of the initial router weights
    seed: int = 0

    def resolved(self) -> RouterConfig:
        """The config with the router type filled in: each balancing method with the router it
        was published with (bias: DeepSeek-V3's sigmoid; the losses: Switch's softmax)."""
        if self.score:
            return self
        from dataclasses import replace

        return replace(self, score="sigmoid" if self.balance == "bias" else "softmax")

    def check(self) -> None:
        if self.balance not in BALANCE:
            raise BadInput(f"--balance: {self.balance!r} is not one of {', '.join(BALANCE)}")
        if self.score not in ("softmax", "sigmoid"):
            raise BadInput(f"--score: {self.score!r} is not softmax or sigmoid")
        for name in ("experts", "top_k", "steps", "tokens_per_step", "clusters", "dim",
                     "window"):
            v = getattr(self, name)
            if not isinstance(v, int | np.integer) or v < 1:
                raise BadInput(f"--{name.replace('_', '-')}: must be a whole number >= 1, got {v}")
        if not isinstance(self.seed, int | np.integer) or self.seed < 0:
            raise BadInput(f"--seed: must be a whole number >= 0, got {self.seed}")
        check_limit("--experts", self.experts, "route_experts")
        check_limit("--tokens", self.tokens_per_step, "route_tokens_per_step")
        check_limit("--steps", self.steps, "route_steps")
        check_limit("--clusters", self.clusters, "route_clusters")
        check_limit("dim", self.dim, "route_dim")
        check_limit("--experts x --tokens", self.experts * self.tokens_per_step,
                    "route_experts_x_tokens")
        check_limit("--steps x --tokens x --experts",
                    self.steps * self.tokens_per_step * self.experts, "route_work")
        if self.top_k > self.experts:
            raise BadInput(f"--top-k: {self.top_k} is more than --experts {self.experts}")
        if self.capacity_factor <= 0:
            raise BadInput(f"--capacity-factor: must be positive, got {self.capacity_factor}")
        if not self.tau > 0:
            raise BadInput(f"--tau: must be positive, got {self.tau}")
        for name in ("lr", "aux_coef", "z_coef", "gamma", "noise", "centre_radius",
                     "init_scale"):
            if not getattr(self, name) >= 0:
                raise BadInput(f"--{name.replace('_', '-')}: must not be negative")
        for name in ("general", "decay"):
            if not 0 <= getattr(self, name) <= 1:
                raise BadInput(f"--{name}: must be in [0, 1]")
        if not self.mix_concentration > 0:
            raise BadInput("--mix-concentration: must be positive")
        if self.skew is not None and not 0 <= self.skew <= 10:
            raise BadInput(f"--skew: Zipf exponent of the topic mix must be in [0, 10], got "
                           f"{self.skew}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise BadInput(f"--{name}: must be in [0, 1)")
        if not self.adam_eps > 0:
            raise BadInput("--adam-eps: must be positive")


@dataclass(frozen=True)
class RoutingResult:
    """Result of ``simulate``; keys load_entropy, max_over_mean_load, history and
    dropped_fraction are fixed by the issue. The load figures are of the load summed over the
    last ``window`` steps (``extra``: window_steps, sampling_floor, the per-step figures, the
    last step's, the router logit size)."""

    config: dict[str, Any]
    load_entropy: float
    load_entropy_max: float
    max_over_mean_load: float
    dropped_fraction: float
    padding_fraction: float
    experts_used: int
    history: list[dict[str, float]]
    capacity_sweep: list[dict[str, float]]
    batch_sweep: list[dict[str, float]]
    region_mix: list[dict[str, Any]]
    routing_decisions: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "extra"} | self.extra


# --- pieces -----------------------------------------------------------------------------------


def load_stats(load: np.ndarray) -> tuple[float, float]:
    """(entropy of the load share in nats, max / mean) of a load vector over experts."""
    tot = load.sum()
    if tot <= 0:
        return 0.0, 0.0
    p = load / tot
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum()), float(load.max() / load.mean())


def capacity_overflow(load: np.ndarray, capacity_factor: float, copies: int) -> tuple[float, float]:
    """(dropped fraction, padding fraction) with capacity = ceil(cf x copies / E) per expert.

    dropped = sum_e max(0, load_e - cap) / copies; padding = sum_e (cap - min(load_e, cap)) /
    (E cap): the buffer slots that carry no token."""
    e = load.size
    cap = int(np.ceil(capacity_factor * copies / e))
    dropped = np.maximum(load - cap, 0).sum() / copies
    padding = (cap - np.minimum(load, cap)).sum() / (e * cap) if cap > 0 else 0.0
    return float(dropped), float(padding)


def _topk(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores per row (any order among them). Small k: repeated
    argmax with masking (k passes over the row, no partition); else argpartition."""
    T, E = scores.shape
    if k == E:
        return np.broadcast_to(np.arange(k), scores.shape).copy()
    if k > 4:
        return np.argpartition(-scores, k - 1, axis=1)[:, :k]
    out = np.empty((T, k), dtype=np.intp)
    rows = np.arange(T)
    saved = np.empty((T, k), dtype=scores.dtype)
    for j in range(k):  # mask the winners in place, then put them back: no copy of the scores
        a = scores.argmax(axis=1)
        out[:, j] = a
        if j < k - 1:
            saved[:, j] = scores[rows, a]
            scores[rows, a] = -np.inf
    for j in range(k - 1):
        scores[rows, out[:, j]] = saved[:, j]
    return out


def _softmax(z: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    m = z.max(axis=1, keepdims=True)
    ez = np.subtract(z, m, out=out)
    np.maximum(ez, np.float32(-30.0), out=ez)  # tiny shares set to ~1e-13: no subnormal arithmetic
    np.exp(ez, out=ez)
    ez /= ez.sum(axis=1, keepdims=True)
    return ez


@dataclass
class _World:
    centres: np.ndarray
    mix: np.ndarray
    rng: np.random.Generator
    noise: float

    pool: np.ndarray | None = None
    pool_at: int = 0
    lifetime: int = 16

    def draw(self, n: int, mix: np.ndarray | None = None, out: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        """n tokens: cluster c drawn from the mix, x = centre_c + noise. With a noise pool
        (training), 1 / lifetime of the pool is redrawn every call (so a noise vector lives
        ``lifetime`` calls) and tokens take pool rows at random, each paired with a fresh
        cluster draw."""
        mix = self.mix if mix is None else mix
        c = np.searchsorted(np.cumsum(mix), self.rng.random(n) * mix.sum())
        c = np.minimum(c, mix.size - 1)
        if out is None:
            out = np.empty((n, self.centres.shape[1]), dtype=np.float32)
        if self.pool is None:
            x = self.rng.standard_normal(dtype=np.float32, out=out)
            x *= np.float32(self.noise)
        else:
            P = self.pool.shape[0]
            fresh = max(1, P // self.lifetime)
            lo = self.pool_at
            new = self.pool[lo:lo + fresh]
            self.rng.standard_normal(dtype=np.float32, out=new)
            new *= np.float32(self.noise)
            self.pool_at = (lo + fresh) % (self.lifetime * fresh)
            x = np.take(self.pool, self.rng.integers(0, P, n), axis=0, out=out)
        x += self.centres[c]
        return x, c

    def use_pool(self, rows: int, lifetime: int) -> None:
        self.lifetime = lifetime
        self.pool = self.rng.standard_normal((rows, self.centres.shape[1]), dtype=np.float32)
        self.pool *= np.float32(self.noise)


ROUTE_CHUNK_ELEMENTS = 1 << 22  # tokens x experts scored at once at evaluation (16 MB float32)


def _route(x: np.ndarray, W: np.ndarray, b: np.ndarray, cfg: RouterConfig) -> np.ndarray:
    """Top-k expert indices (tokens, k) of the trained router, scored in chunks of tokens so
    that memory stays bounded whatever the number of tokens."""
    T, E = x.shape[0], W.shape[1]
    rows = max(1, ROUTE_CHUNK_ELEMENTS // E)
    out = np.empty((T, cfg.top_k), dtype=np.intp)
    for lo in range(0, T, rows):
        z = x[lo:lo + rows] @ W
        s = _softmax(z) if cfg.score == "softmax" else 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))
        out[lo:lo + rows] = _topk(s + b if cfg.balance == "bias" else s, cfg.top_k)
    return out


def training_mix(cfg: RouterConfig, rng: np.random.Generator) -> np.ndarray:
    """How often each token cluster occurs in training: Zipf with exponent ``cfg.skew`` over
    the clusters (p_c proportional to (c + 1)^-skew; 0 is uniform) when a skew is given, else a
    Dirichlet draw with moe.toml's [router.mix_concentration]. The Dirichlet draw is made in
    both cases so that the rest of the random stream does not depend on the choice."""
    mix = rng.dirichlet(np.full(cfg.clusters, cfg.mix_concentration))
    if cfg.skew is None:
        return mix
    w = np.arange(1, cfg.clusters + 1, dtype=np.float64) ** -float(cfg.skew)
    return w / w.sum()


def sampling_floor(experts: int, top_k: int, tokens: int, *, draws: int | None = None,
                   seed: int = 0) -> float:
    """Mean max/mean load of a perfectly uniform router: ``tokens`` tokens each send top_k
    copies to distinct experts chosen uniformly at random, and the busiest expert still gets
    more than the mean by chance.

    Drawn as multinomials of tokens x top_k copies over the experts (exact for top_k = 1).
    With top_k > 1 the copies of one token go to distinct experts, which shrinks the spread:
    an expert's count is Binomial(tokens, k/E) with variance N k/E (1 - k/E), against the
    multinomial's N k/E (1 - 1/E), and the covariances shrink by the same factor (E - k)/(E - 1)
    (both derived in docs/moe.md), so each draw's deviations from the mean are scaled by
    sqrt((E - k) / (E - 1)): the same first and second moments as the exact distribution."""
    if experts < 1 or top_k < 1 or top_k > experts or tokens < 1:
        raise BadInput("sampling floor: needs 1 <= top_k <= experts and tokens >= 1")
    n = int(draws if draws is not None else router_constant("floor_draws"))
    rng = np.random.default_rng(seed)
    copies = tokens * top_k
    mu = copies / experts
    counts = rng.multinomial(copies, np.full(experts, 1.0 / experts), size=n)
    shrink = np.sqrt((experts - top_k) / (experts - 1)) if experts > 1 else 0.0
    peak = mu + (counts.max(axis=1) - mu) * shrink
    return float(peak.mean() / mu)


def _train(cfg: RouterConfig, world: _World, W: np.ndarray) -> dict[str, Any]:
    """The training loop: route, measure, take one Adam step on W (and move the bias in
    ``bias`` mode). Returns the trained router, the per-step history and the load summed over
    the last ``window`` steps."""
    E, k, T = cfg.experts, cfg.top_k, cfg.tokens_per_step
    b = np.zeros(E, dtype=np.float32)
    n_general = np.zeros(E)
    n_cluster = np.zeros((E, cfg.clusters))
    decay = cfg.decay  # per step: what experts learnt long ago fades (they keep being trained)
    rows = np.arange(T)[:, None]
    history: list[dict[str, float]] = []
    gain = np.float32(cfg.task_gain / T)
    A = np.float32(cfg.aux_coef * E / T) if cfg.balance in ("aux", "zloss") else np.float32(0)
    Z = np.float32(cfg.z_coef * 2.0 / T) if cfg.balance == "zloss" else np.float32(0)
    lr, b1, b2 = np.float32(cfg.lr), np.float32(cfg.beta1), np.float32(cfg.beta2)
    eps = np.float32(cfg.adam_eps)
    m1 = np.zeros_like(W)
    m2 = np.zeros_like(W)
    upd = np.empty_like(W)
    win = min(cfg.window, cfg.steps)
    win_from = cfg.steps - win
    win_load = np.zeros(E)
    acc = {"dropped": 0.0, "mom": 0.0, "lse": 0.0, "rms": 0.0}
    xbuf = np.empty((T, cfg.dim), dtype=np.float32)
    sbuf = np.empty((T, E), dtype=np.float32)
    load = np.zeros(E)
    for step in range(cfg.steps):
        x, c = world.draw(T, out=xbuf)
        z = x @ W
        m = z.max(axis=1, keepdims=True)
        if cfg.score == "softmax":
            s = np.subtract(z, m, out=sbuf)
            np.maximum(s, np.float32(-30.0), out=s)
            np.exp(s, out=s)
            se = s.sum(axis=1, keepdims=True)
            s *= np.float32(1.0) / se
            lse = m[:, 0] + np.log(se[:, 0])
        else:
            lse = m[:, 0] + np.log(np.exp(np.maximum(z - m, np.float32(-30.0))).sum(axis=1))
            s = np.negative(np.clip(z, -30, 30, out=sbuf), out=sbuf)
            np.exp(s, out=s)
            s += np.float32(1.0)
            np.reciprocal(s, out=s)
        sel = _topk(s + b if cfg.balance == "bias" else s, k)
        load = np.bincount(sel.ravel(), minlength=E).astype(np.float64)
        ent, mom = load_stats(load)
        dropped, _ = capacity_overflow(load, cfg.capacity_factor, T * k)
        lse_mean = float(lse.mean())
        history.append({"step": step, "load_entropy": ent, "max_over_mean_load": mom,
                        "dropped_fraction": dropped, "router_logit_lse": lse_mean})
        if step >= win_from:
            win_load += load
            acc["dropped"] += dropped
            acc["mom"] += mom
            acc["lse"] += lse_mean
            acc["rms"] += float(np.sqrt(np.mean(np.square(z, dtype=np.float64))))
        # usefulness of each selected expert for this token's cluster
        learnt = cfg.general * n_general[:, None] + (1 - cfg.general) * n_cluster
        q = (1.0 - np.exp(-learnt / cfg.tau)).astype(np.float32)  # (E, C)
        qsel = q[sel, c[:, None]]  # (T, k)
        gsel = s[rows, sel]
        f = (load / (T * k)).astype(np.float32)
        # gradient of the losses with respect to the logits, averaged over tokens: a dense part
        # s * (row_t + col_e) and the task term on the k selected entries of each row
        if cfg.score == "softmax":
            a = qsel * gsel
            row = gain * a.sum(axis=1)
            if A:
                row -= A * (s @ f)
            if Z:  # z-loss: d/dz (logsumexp z)^2 = 2 lse softmax(z), and softmax(z) = s here
                row += Z * lse
            gz = row[:, None] + (A * f)[None, :] if A else np.repeat(row[:, None], E, axis=1)
            gz *= s
            gz[rows, sel] -= gain * a
        else:
            gz = np.zeros((T, E), dtype=np.float32)
            gz[rows, sel] = -gain * qsel * gsel * (1 - gsel)
            if A:
                p = s / s.sum(axis=1, keepdims=True)
                gz += A * (1.0 - s) * p * (f[None, :] - (p @ f)[:, None])
            if Z:
                ez = np.exp(np.maximum(z - m, np.float32(-30.0)))
                gz += (Z * lse)[:, None] * (ez / ez.sum(axis=1, keepdims=True))
        g = x.T @ gz
        # Adam (Kingma & Ba 2015) with DeepSeek-V3's betas: the step on each weight is the
        # running mean of its gradient over the running RMS, so its size is about lr whatever
        # the gradient's scale (a fixed step lr x gradient overshoots once lr x alpha is large)
        m1 *= b1
        m1 += (1 - b1) * g
        m2 *= b2
        m2 += (1 - b2) * np.square(g)
        t = step + 1
        np.sqrt(m2 / np.float32(1 - b2 ** t), out=upd)
        upd += eps
        np.divide(m1, upd, out=upd)
        W -= (lr / np.float32(1 - b1 ** t)) * upd
        if cfg.balance == "bias":
            b += np.float32(cfg.gamma) * np.sign(load.mean() - load).astype(np.float32)
        # experts learn from the tokens they process
        n_general = decay * n_general + load
        n_cluster *= decay
        n_cluster += np.bincount((sel * cfg.clusters + c[:, None]).ravel(),
                                 minlength=E * cfg.clusters).reshape(E, cfg.clusters)
    return {"W": W, "b": b, "load": load, "history": history, "window": win,
            "window_load": win_load, "window_dropped": acc["dropped"] / win,
            "window_step_mom": acc["mom"] / win, "window_lse": acc["lse"] / win,
            "window_rms": acc["rms"] / win}


def simulate(cfg: RouterConfig, *, regions: dict[str, np.ndarray] | None = None,
             batch_sizes: tuple[int, ...] | None = None,
             capacity_factors: tuple[float, ...] | None = None,
             eval_tokens: int | None = None) -> RoutingResult:
    """Train the router for ``cfg.steps`` steps and measure load, drops and serving imbalance.
    The measurement grids default to moe.toml [router.batch_sizes], [router.capacity_factors]
    and [router.eval_tokens]."""
    cfg = cfg.resolved()
    cfg.check()
    batch_sizes = tuple(router_constant("batch_sizes") if batch_sizes is None else batch_sizes)
    capacity_factors = tuple(router_constant("capacity_factors") if capacity_factors is None
                             else capacity_factors)
    eval_tokens = int(router_constant("eval_tokens") if eval_tokens is None else eval_tokens)
    if eval_tokens < 1:
        raise BadInput(f"eval_tokens: must be a whole number >= 1, got {eval_tokens}")
    check_limit("eval_tokens", eval_tokens, "route_eval_tokens")
    if not capacity_factors or min(capacity_factors) <= 0:
        raise BadInput("capacity_factors: needs positive capacity factors")
    if not batch_sizes or min(batch_sizes) < 1:
        raise BadInput("batch_sizes: needs whole numbers >= 1")
    for bs in batch_sizes:
        check_limit("batch size", bs, "route_eval_tokens")
    draws_max = int(router_constant("batch_draws_max"))
    per_eval = int(router_constant("batch_tokens_per_eval"))
    rng = np.random.default_rng(cfg.seed)
    E, k, T = cfg.experts, cfg.top_k, cfg.tokens_per_step
    centres = rng.standard_normal((cfg.clusters, cfg.dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    centres = (cfg.centre_radius * centres).astype(np.float32)
    mix = training_mix(cfg, rng)
    world = _World(centres, mix, rng, cfg.noise)
    # training tokens reuse noise rows (see _World.draw)
    world.use_pool(int(router_constant("noise_pool_rows_per_token")) * T,
                   int(router_constant("noise_pool_lifetime")))
    W = cfg.init_scale * rng.standard_normal((cfg.dim, E), dtype=np.float32)
    tr = _train(cfg, world, W)
    W, b, load = tr["W"], tr["b"], tr["load"]
    history = tr["history"]
    world.pool = None  # evaluation: fresh noise for every token
    # the time-averaged load: routed copies summed over the last `window` steps
    wload = tr["window_load"]
    ent, mom = load_stats(wload)
    _, padding = capacity_overflow(load, cfg.capacity_factor, T * k)
    floor_seed = cfg.seed + 7919  # its own stream: the floor is not the run's randomness
    floor_window = sampling_floor(E, k, T * tr["window"], seed=floor_seed)
    floor_step = sampling_floor(E, k, T, seed=floor_seed)
    dropped = tr["window_dropped"]
    last_ent, last_mom = load_stats(load)

    # capacity factors and serving-time measurements with the trained router
    xe, _ = world.draw(eval_tokens)
    sel = _route(xe, W, b, cfg)
    eload = np.bincount(sel.ravel(), minlength=E).astype(np.float64)
    csweep = []
    for cf in capacity_factors:
        d, pad = capacity_overflow(eload, cf, eval_tokens * k)
        csweep.append({"capacity_factor": cf, "dropped_fraction": d, "padding_fraction": pad})
    routed = cfg.steps * T + eval_tokens
    bsweep = []
    for bs in batch_sizes:
        draws = max(1, min(draws_max, eval_tokens * per_eval // bs))
        xb, _ = world.draw(bs * draws)
        routed += bs * draws
        sb = _route(xb, W, b, cfg)
        per = sb.reshape(draws, bs * k)
        loads = np.bincount((per + E * np.arange(draws)[:, None]).ravel(),
                            minlength=draws * E).reshape(draws, E).astype(np.float64)
        mom_b = loads.max(axis=1) / loads.mean(axis=1)
        # no drops at serving: the capacity every expert must be provisioned for is the max
        bsweep.append({"batch_tokens": bs, "max_over_mean_load_mean": float(mom_b.mean()),
                       "max_over_mean_load_p99": float(np.quantile(mom_b, 0.99))})
    regs = regions if regions is not None else default_regions(cfg.clusters, cfg.seed)
    rmix = []
    for name, m in regs.items():
        m = np.asarray(m, dtype=np.float64)
        if m.size != cfg.clusters or (m < 0).any() or m.sum() <= 0:
            raise BadInput(f"region {name!r}: traffic mix needs {cfg.clusters} non-negative "
                           "weights with a positive sum")
        xr, _ = world.draw(eval_tokens, m / m.sum())
        routed += eval_tokens
        sr = _route(xr, W, b, cfg)
        lr_ = np.bincount(sr.ravel(), minlength=E).astype(np.float64)
        e_r, m_r = load_stats(lr_)
        rmix.append({"region": name, "load_entropy": e_r, "max_over_mean_load": m_r,
                     "dropped_fraction_at_cf": capacity_overflow(lr_, cfg.capacity_factor,
                                                                 eval_tokens * k)[0]})
    return RoutingResult(
        config=cfg.__dict__.copy(), load_entropy=ent, load_entropy_max=float(np.log(E)),
        max_over_mean_load=mom, dropped_fraction=dropped, padding_fraction=padding,
        experts_used=int((wload > 0).sum()), history=history, capacity_sweep=csweep,
        batch_sweep=bsweep, region_mix=rmix, routing_decisions=routed,
        extra={"final_bias_range": float(b.max() - b.min()) if cfg.balance == "bias" else 0.0,
               "router_weight_norm": float(np.linalg.norm(W)),
               "window_steps": tr["window"],
               "sampling_floor": floor_window,
               "max_over_mean_load_per_step": tr["window_step_mom"],
               "sampling_floor_per_step": floor_step,
               "last_step_max_over_mean_load": last_mom,
               "last_step_load_entropy": last_ent,
               "router_logit_lse_mean": tr["window_lse"],
               "router_logit_rms": tr["window_rms"],
               "optimizer": "adam"},
    )


def default_regions(clusters: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Three regions whose users favour different topics (Dirichlet mixes with moe.toml's
    [router.region_concentration])."""
    rng = np.random.default_rng(seed + 1)
    a = float(router_constant("region_concentration"))
    return {name: rng.dirichlet(np.full(clusters, a)) for name in ("americas", "europe", "asia")}
