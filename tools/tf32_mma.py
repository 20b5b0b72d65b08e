"""CUDA helpers the tensor-core probes share (tools/mma_probe.py, layer_probe.py, gemm_probe.py): the
3xTF32 operand split and one mma.sync m16n8k8 TF32 with fp32 accumulation, as in solution.py's v6
experiment (notes/solution.md). Fragments (g = lane / 4, t = lane % 4): A a0..a3 = (row g, col t),
(g+8, t), (g, t+4), (g+8, t+4); B b0, b1 = (k t, n g), (k t+4, n g); C c0..c3 = (g, 2t), (g, 2t+1),
(g+8, 2t), (g+8, 2t+1).
"""
HELPERS = r"""
// v = big + small, both TF32 (round to nearest): three products per multiply-add give fp32-level error
__device__ __forceinline__ void split(float v, uint32_t& big, uint32_t& small) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(v));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(v - __uint_as_float(big)));
}
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
"""
