"""VAE_CK_DMMA (the cluster kernel's last layer at R <= 9 on the tensor cores, pixels as M, rows as N): its index
maps simulated in numpy for R = 8, 9, with mma.sync m16n8k8's fragment layout as solution.py's mma() comment states
it - every PART entry (k-group, row, pixel < 98) written once by warps 4-7 and added once by warps 0-3, and the 4
k-group sums equal h2 W2_slice^T. Exact products (no TF32 split): this checks where values go, not rounding.
Run: python3 notes/ck-dmma-check.py
"""
import numpy as np

D_SLICE, H, WARPS, DEC_KG, MT = 98, 256, 8, 4, 7


def mma(c, a, b):
    """c[lane] (4,) += A B for one warp; a[lane] = (a0..a3), b[lane] = (b0, b1) in m16n8k8's fragment layout."""
    A = np.zeros((16, 8)); B = np.zeros((8, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        A[g, t], A[g + 8, t], A[g, t + 4], A[g + 8, t + 4] = a[lane]
        B[t, g], B[t + 4, g] = b[lane]
    Dm = A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        c[lane] += np.array([Dm[g, 2 * t], Dm[g, 2 * t + 1], Dm[g + 8, 2 * t], Dm[g + 8, 2 * t + 1]])


for R in (8, 9):
    rng = np.random.default_rng(R)
    W2 = rng.standard_normal((D_SLICE, H))
    h2 = rng.standard_normal((16, H))
    part = np.full((DEC_KG, R, 104), np.nan)
    writes = np.zeros((DEC_KG, R, 104), int)
    for phase in ("store", "add"):
        for warp in range(WARPS):
            if (warp >= DEC_KG) != (phase == "store"):
                continue
            # load_w2_frag: fa[lane][mt][h] = 8 values W2[p][32 w + 8 t + 0..7]
            fa = {}
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                for mt in range(MT):
                    for h in range(2):
                        p = min(16 * mt + g + 8 * h, D_SLICE - 1)
                        fa[lane, mt, h] = W2[p, 32 * warp + 8 * t: 32 * warp + 8 * t + 8]
            hv = {lane: h2[lane >> 2, 32 * warp + 8 * (lane & 3): 32 * warp + 8 * (lane & 3) + 8] for lane in range(32)}
            acc = {mt: np.zeros((32, 4)) for mt in range(MT)}
            for kk in range(4):
                for mt in range(MT):
                    a = [(fa[l, mt, 0][2 * kk], fa[l, mt, 1][2 * kk], fa[l, mt, 0][2 * kk + 1], fa[l, mt, 1][2 * kk + 1])
                         for l in range(32)]
                    b = [(hv[l][2 * kk], hv[l][2 * kk + 1]) for l in range(32)]
                    mma(acc[mt], a, b)
            acc8 = {}
            if R == 9:
                h8 = {lane: h2[8, 32 * warp + 8 * (lane & 3): 32 * warp + 8 * (lane & 3) + 8] for lane in range(32)}
                own = {(l, mt, h): float(fa[l, mt, h] @ h8[l]) for l in range(32) for mt in range(MT) for h in range(2)}
                for o in (1, 2):   # the shuffles: each lane adds lane ^ o's value
                    own = {(l, mt, h): own[l, mt, h] + own[l ^ o, mt, h] for (l, mt, h) in own}
                acc8 = own
            kg = warp % DEC_KG
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                for mt in range(MT):
                    for c in range(4):
                        p, r = 16 * mt + g + 8 * (c // 2), 2 * t + (c % 2)
                        if p < D_SLICE:
                            v = acc[mt][lane, c]
                            part[kg, r, p] = part[kg, r, p] + v if phase == "add" else v
                            writes[kg, r, p] += 1
                if R == 9 and t == 0:
                    for mt in range(MT):
                        for h in range(2):
                            p = 16 * mt + g + 8 * h
                            if p < D_SLICE:
                                v = acc8[lane, mt, h]
                                part[kg, 8, p] = part[kg, 8, p] + v if phase == "add" else v
                                writes[kg, 8, p] += 1
    assert (writes[:, :, :D_SLICE] == 2).all(), "each entry stored once and added once"
    for kg in range(DEC_KG):
        ks = np.r_[32 * kg: 32 * kg + 32, 32 * (kg + 4): 32 * (kg + 4) + 32]
        want = h2[:R, ks] @ W2[:, ks].T
        assert np.allclose(part[kg, :, :D_SLICE], want, rtol=1e-12, atol=1e-12), (R, kg)
    logits = part[:, :, :D_SLICE].sum(0)
    assert np.allclose(logits, h2[:R] @ W2.T, rtol=1e-12, atol=1e-11)
    print(f"R {R} ok: coverage, k-group sums, logits")
