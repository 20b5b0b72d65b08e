"""The cluster kernel's mu | logvar partials at R <= 9 (v19; built as VAE_CK_MVPO in session 23): its index maps
simulated in numpy for R = 8, 9 - every owner gets the bytes its BAR_HID expects, each slot it reads is written once, and the partials sum to h Wmu^T, h Wlv^T. Run: python3 notes/ck-mvpo-check.py
"""
import numpy as np
CL, L, H, HS_ = 8, 32, 256, 32
for R in (8, 9):
    rng = np.random.default_rng(R)
    h = rng.standard_normal((R, H)); Wmu = rng.standard_normal((L, H)); Wlv = rng.standard_normal((L, H))
    Wcat = np.vstack([Wmu, Wlv])
    own = [(R - rk + CL - 1) // CL for rk in range(CL)]
    part = [np.full(CL * 2 * 2 * L + R * 2 * L, np.nan) for _ in range(CL)]
    written = [np.zeros(CL * 2 * 2 * L, int) for _ in range(CL)]
    recv = [0] * CL
    MVP_STAGE = CL * 2 * 2 * L
    for rk in range(CL):
        # partials: sum over the 4 gp's
        for r in range(R):
            for jp in range(64):
                t = sum(Wcat[jp, rk * HS_ + 8 * gp: rk * HS_ + 8 * gp + 8] @ h[r, rk * HS_ + 8 * gp: rk * HS_ + 8 * gp + 8] for gp in range(4))
                part[rk][MVP_STAGE + r * 2 * L + jp] = t
    for rk in range(CL):
        Q4 = 2 * L // 4
        for e in range(R * Q4):
            r, q, dst = e // Q4, e % Q4, (e // Q4) % CL
            v = part[rk][MVP_STAGE + r * 2 * L + 4 * q: MVP_STAGE + r * 2 * L + 4 * q + 4]
            off = (rk * 2 + r // CL) * 2 * L + 4 * q
            part[dst][off:off + 4] = v
            written[dst][off:off + 4] += 1
            if dst != rk: recv[dst] += 16
    for rk in range(CL):
        assert recv[rk] == (CL - 1) * own[rk] * 2 * L * 4, (R, rk, recv[rk])
        for zi in range(own[rk]):
            r = rk + CL * zi
            for zj in range(L):
                mu = sum(part[rk][(c * 2 + zi) * 2 * L + zj] for c in range(CL))
                lv = sum(part[rk][(c * 2 + zi) * 2 * L + L + zj] for c in range(CL))
                assert abs(mu - h[r] @ Wmu[zj]) < 1e-9 and abs(lv - h[r] @ Wlv[zj]) < 1e-9
                for c in range(CL):
                    assert written[rk][(c * 2 + zi) * 2 * L + zj] == 1
    assert MVP_STAGE + R * 2 * L <= 4 * R * 104
    print("R", R, "ok: bytes, coverage, sums")
