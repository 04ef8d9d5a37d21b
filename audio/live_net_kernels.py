"""The live net's hop compiled: steady-note suppression, both cepstra, the running mean, the hop
vector and the MLP in one call (`CompiledLiveHop`, used by `audio.vowel_net.LiveNet` for the
shipped configuration: the steady front-end and an MLP).

Why compiled: the hop's arithmetic is small and in numpy its some forty calls cost more in
dispatch than in work — together they took most of the live hop's budget (issue 15,
thirty-fourth round of docs/BENCHMARKS.md). The numbers are those of the numpy path
(`LiveNet.step` with `compiled=False`, and `audio.vowel_net.live_inputs` over the clip) up to
float rounding; tests/test_vowel_net_front.py checks all three against each other. numba
compiles it once per machine into the user cache (scripts/setup.sh does it with the mel net's
hop, `audio.mel_conv_kernels`).
"""

from __future__ import annotations

import math

import numpy as np

# isort: off
import audio.mel_conv_kernels  # noqa: F401  (points numba's cache at Kagura's before numba's import)
import numba

# isort: on
from audio.mfcc_kernels import flatness

# the state's slots: ints (steady ring's next row, its rows filled, the mean's weight, the
# vector ring's newest row, hops committed) and floats (the mean's decaying peak level)
_POS, _FILLED, _N, _HEAD, _COUNT = range(5)


@numba.njit(cache=True)
def _clean_row(p, steady, hit_bins, tmp, out):  # pragma: no cover - compiled
    """`audio.voice_separation.SteadySuppressor._clean_row`: p less its steady floor and its
    broadband part; the opening across bins with mirrored edges (scipy's 'reflect')."""
    n = len(p)
    h = hit_bins // 2
    pad = tmp[0]  # a row with its mirrored edges: padded position j holds row[j - h]
    for i in range(n):
        pad[h + i] = max(p[i], 1e-20)
    for k in range(2):  # the running minimum, then the running maximum of it
        for j in range(h):
            pad[h - 1 - j] = pad[h + j]
            pad[h + n + j] = pad[h + n - 1 - j]
        row = tmp[1]
        for i in range(n):
            best = pad[i]
            for j in range(i + 1, i + hit_bins):
                best = min(best, pad[j]) if k == 0 else max(best, pad[j])
            row[i] = best
        if k == 0:
            for i in range(n):
                pad[h + i] = row[i]
    for i in range(n):
        pm = max(p[i], 1e-20)
        g = max(1.0 - 2.0 * steady[i] / pm, 0.0)
        pp = pm * pm
        hits = tmp[1, i]
        out[i] = pm * g * (pp / (pp + hits * hits))


@numba.njit(cache=True)
def _cepstrum(power, mel_lo, mel_w, dct_t, logmel, out, at):  # pragma: no cover - compiled
    """`audio.mfcc._Plan.cepstrum_hop` of one power spectrum, written to out[at:at + coefs]:
    each mel band sums only its own bins (mel_lo: its first, mel_w: its weights, 0 past its
    last)."""
    nm, width = mel_w.shape
    peak = 0.0
    for m in range(nm):
        s = 0.0
        for j in range(width):
            s += power[mel_lo[m] + j] * mel_w[m, j]
        logmel[m] = s
        peak = max(peak, s)
    for m in range(nm):
        logmel[m] = 10.0 * math.log10(logmel[m] + 1e-9 * peak + 1e-20)
    for k in range(dct_t.shape[1]):
        s = 0.0
        for m in range(nm):
            s += logmel[m] * dct_t[m, k]
        out[at + k] = np.float32(s)


@numba.njit(cache=True)
def _band_cues(power, cleaned, lo, hi, out, at):  # pragma: no cover - compiled
    """`audio.vowel_net._sep_vector_hop`'s two cues of the cleaned spectrum: its flatness over
    the flatness band [lo, hi) and the share of the power it kept."""
    flat = flatness(cleaned, lo, hi)
    kept_c = 0.0
    kept_p = 0.0
    for i in range(len(power)):
        kept_c += cleaned[i]
        kept_p += power[i]
    kept = 10.0 * math.log10((kept_c + 1e-20) / (kept_p + 1e-20))
    out[at] = math.log10(max(flat, 1e-4))
    out[at + 1] = max(kept, -40.0) / 10.0


@numba.njit(cache=True)
def live_hop(power, cep, have_cep, level_db, per, flat, commit, may_move, steady_ring, ints,
             floats, mean, cmn_tau, range_db, mel_lo, mel_w, dct_t, flat_lo, flat_hi, hit_bins,
             vring, offsets, w0, b0, dense, scratch, tmp, v, probs):  # pragma: no cover  # fmt: skip
    """One hop of the live net: writes this hop's vector to v (dim,) and p(voice), p(A I U E O)
    to probs (6,). commit=False changes no state (a provisional hop).

    power (bins,) float64: the hop's power spectrum; cep (coefs,): the mix's cepstrum where
    have_cep, else computed here; may_move: the running mean may move on this hop (a voice
    was heard, or the net does not ask); steady_ring (hops, bins): the last hops' spectra;
    mean (coefs,) float64: the running mean; mel_lo, mel_w, dct_t: the filterbank, band by
    band, and the DCT; [flat_lo, flat_hi): the flatness band; vring (span, dim) float32: the
    last hops' vectors; offsets: the MLP's hops (<= 0); w0, b0: its first layer with the input
    scaling folded in; dense: its later layers (weights, bias), a ReLU before each."""
    nc = dct_t.shape[1]
    n = len(power)
    hops = steady_ring.shape[0]
    # --- the steady floor: the minimum over the last hops, this one included ---------------
    steady = scratch[0]
    for i in range(n):
        steady[i] = power[i]
    if ints[_FILLED]:  # before the first hop the ring is this hop's rows
        for r in range(hops):
            if r != ints[_POS]:  # the oldest row, which this hop replaces
                for i in range(n):
                    steady[i] = min(steady[i], steady_ring[r, i])
    cleaned = scratch[1]
    _clean_row(power, steady, hit_bins, tmp, cleaned)
    if commit:
        if ints[_FILLED] == 0:
            for r in range(hops):
                steady_ring[r] = power
            ints[_POS] = 1 % hops
            ints[_FILLED] = 1
        else:
            steady_ring[ints[_POS]] = power
            ints[_POS] = (ints[_POS] + 1) % hops
    # --- both cepstra ----------------------------------------------------------------------
    logmel = scratch[2]
    if have_cep:
        for k in range(nc):
            v[k] = cep[k]
    else:
        _cepstrum(power, mel_lo, mel_w, dct_t, logmel, v, 0)
    sep = nc + 2
    _cepstrum(cleaned, mel_lo, mel_w, dct_t, logmel, v, sep)
    # --- the running mean (audio.vowel_net.RunningCmn.update) ------------------------------
    peak = max(level_db, floats[0] - 0.03)
    cmn_n = ints[_N]
    move = may_move and level_db > peak - range_db and level_db > -75.0
    if move:
        cmn_n = min(cmn_n + 1, cmn_tau)
    for k in range(nc):
        c = np.float64(v[k])
        m = mean[k] + (c - mean[k]) / cmn_n if move else mean[k]
        if commit:
            mean[k] = m
        v[k] = np.float32(c - m)
    if commit:
        floats[0] = peak
        ints[_N] = cmn_n
    v[nc] = per
    v[nc + 1] = math.log10(max(flat, 1e-4))
    _band_cues(power, cleaned, flat_lo, flat_hi, v, sep + nc)
    # --- the vector ring and the MLP -------------------------------------------------------
    span = vring.shape[0]
    dim = vring.shape[1]
    first = ints[_COUNT] == 0
    new = (ints[_HEAD] + 1) % span
    h = b0.copy()
    for o in range(len(offsets)):
        row = v if offsets[o] == 0 or first else vring[(new + offsets[o]) % span]
        for k in range(dim):
            x = row[k]
            for j in range(len(h)):
                h[j] += x * w0[o * dim + k, j]
    if commit:
        if first:
            for r in range(span):
                vring[r] = v
            ints[_HEAD] = 0
        else:
            vring[new] = v
            ints[_HEAD] = new
        ints[_COUNT] += 1
    for i in range(len(dense)):
        w, b = dense[i]
        z = b.copy()
        for k in range(len(h)):
            x = max(h[k], np.float32(0.0))
            for j in range(len(z)):
                z[j] += x * w[k, j]
        h = z
    probs[0] = 1.0 / (1.0 + math.exp(-min(max(np.float64(h[0]), -30.0), 30.0)))
    top = np.float64(h[1])
    for j in range(2, len(h)):
        top = max(top, np.float64(h[j]))
    tot = 0.0
    for j in range(1, len(h)):
        probs[j] = math.exp(np.float64(h[j]) - top)
        tot += probs[j]
    for j in range(1, len(h)):
        probs[j] /= tot


class CompiledLiveHop:
    """The state and arrays `live_hop` reads, for one live net (steady front-end, MLP)."""

    def __init__(self, mlp, cmn_init, prior: int, offsets, plan, dim: int) -> None:
        from audio.voice_separation import LIVE_HIT_BINS, LIVE_STEADY_HOPS
        from audio.vowel_net import CMN_RANGE_DB, CMN_TAU

        if any(o > 0 for o in offsets):
            raise ValueError(f"the live net hears only the past, got offsets {offsets}")
        bins = plan.nfft // 2 + 1
        self.steady_ring = np.zeros((LIVE_STEADY_HOPS, bins))
        self.ints = np.array([0, 0, int(prior), 0, 0], np.int64)
        self.floats = np.array([-120.0])
        self.mean = np.asarray(cmn_init, np.float64).copy()
        self.cmn_tau = int(CMN_TAU)
        self.range_db = float(CMN_RANGE_DB)
        fb = plan.fb_t.T  # (mels, bins)
        lo = np.array([np.flatnonzero(r)[0] if r.any() else 0 for r in fb], np.int64)
        hi = np.array([np.flatnonzero(r)[-1] + 1 if r.any() else 0 for r in fb], np.int64)
        width = int((hi - lo).max())
        lo = np.minimum(lo, bins - width)  # every band's window inside the spectrum
        self.mel_lo = lo
        self.mel_w = np.ascontiguousarray(
            np.stack([r[a : a + width] for r, a in zip(fb, lo, strict=True)])
        )
        self.dct_t = np.ascontiguousarray(plan.dct_t, np.float64)
        self.flat_lo = int(plan.flat_slice.start)
        self.flat_hi = int(plan.flat_slice.stop)
        self.hit_bins = int(LIVE_HIT_BINS)
        span = -min(offsets) + 1
        self.vring = np.zeros((span, dim), np.float32)
        self.offsets = np.asarray(offsets, np.int64)
        w0, b0 = mlp.folded_first_layer()
        self.w0 = np.ascontiguousarray(w0, np.float32)
        self.b0 = np.asarray(b0, np.float32)
        self.dense = tuple(
            (np.ascontiguousarray(w, np.float32), np.asarray(b, np.float32))
            for w, b in mlp.layers[1:]
        )
        self.scratch = np.zeros((3, max(bins, plan.fb_t.shape[1])))
        self.tmp = np.zeros((2, bins + LIVE_HIT_BINS))
        self.no_cep = np.zeros(self.dct_t.shape[1], np.float32)
        self.probs = np.zeros(6)

    def step(self, cep, level_db, per, flat, commit, power, may_move, v) -> tuple:
        """-> (p(voice), p(A I U E O) (5,)); this hop's vector written to v (dim,) float32."""
        have = cep is not None
        live_hop(np.asarray(power, np.float64).reshape(-1),
                 np.asarray(cep, np.float32) if have else self.no_cep, have, float(level_db),
                 float(per), float(flat), bool(commit), bool(may_move), self.steady_ring,
                 self.ints, self.floats, self.mean, self.cmn_tau, self.range_db, self.mel_lo,
                 self.mel_w, self.dct_t, self.flat_lo, self.flat_hi, self.hit_bins, self.vring,
                 self.offsets, self.w0, self.b0, self.dense, self.scratch, self.tmp, v,
                 self.probs)  # fmt: skip
        return float(self.probs[0]), self.probs[1:].copy()
