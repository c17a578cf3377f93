"""Can a consumer warpgroup hold a 64 x 384 fp32 accumulator (two m64n192k16 a k-step, 192 registers) without
spilling, with setmaxnreg moving registers from the producer warpgroup (forty-fifth session's "Left": a 128 x 384
tile a block for small's Nn = 384 shapes, a third fewer bytes delivered a FLOP than the ping-pong's)? No card needed:
a probe kernel (384 threads: the producer warpgroup's setmaxnreg.dec DEC, the two consumers' setmaxnreg.inc INC, a
k-loop of wgmma from shared memory, the accumulators staged as fp16 by stmatrix as mm_hopper's epilogue does) compiled
by NVRTC with -Xptxas -v; prints ptxas's registers, spills and any C7507 note ("'setmaxnreg' ignored").
    python bench/experiments/tile384_probe.py [DEC INC]"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from coppelius.realize import nvrtc  # noqa: E402

SOURCE = r"""
#include "common.cuh"
#include "matmul.cuh"
namespace coptc {
extern "C" __global__ void __launch_bounds__(384, 1) probe384(__half* out, int KT) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const int wg = threadIdx.x >> 7, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    __half* stages = reinterpret_cast<__half*>(smem);  // 2 stages of A 128 x 64 and B 384 x 64 (K-major)
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(DEC));
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(INC));
    const int c = wg - 1;
    float acc[2][24][4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int f = 0; f < 24; ++f) acc[h][f][0] = acc[h][f][1] = acc[h][f][2] = acc[h][f][3] = 0.f;
    for (int kt = 0; kt < KT; ++kt) {
        const __half* sA = stages + (kt & 1) * (128 + 384) * 64 + c * 64 * 64;
        const __half* sB = stages + (kt & 1) * (128 + 384) * 64 + 128 * 64;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const unsigned long long a = wg_desc(sA + kk * 16, 16, 64 * 16, 1);
#pragma unroll
            for (int h = 0; h < 2; ++h)
                wgmma_m64n192k16<0, 0>(acc[h], a, wg_desc(sB + h * 192 * 64 + kk * 16, 16, 64 * 16, 1));
        }
        wg_commit();
        wg_wait<1>();
        wg_fence_acc(acc[0]);
        wg_fence_acc(acc[1]);
    }
    wg_wait<0>();
    wg_fence_acc(acc[0]);
    wg_fence_acc(acc[1]);
    __half* stg = stages + c * 64 * 392;  // the consumer's 64 x 384 staging (+8 halves a row)
    const int row = warp * 16 + (lane >> 2);
#pragma unroll
    for (int h = 0; h < 2; ++h) hop_store<true>(stg + h * 192, 392, acc[h], row, 0, 64, 384, true);
    consumer_sync(c);
    for (int i = threadIdx.x & 127; i < 64 * 48; i += 128)
        reinterpret_cast<uint4*>(out)[(size_t)blockIdx.x * 64 * 48 * 2 + c * 64 * 48 + i] =
            *reinterpret_cast<const uint4*>(stg + (i / 48) * 392 + (i % 48) * 8);
}
}  // namespace coptc
"""


def main(dec: int = 40, inc: int = 232) -> None:
    _, headers = nvrtc._read_sources(nvrtc.SOURCES)
    log: list[str] = []
    main_src = f"#define DEC {dec}\n#define INC {inc}\n{SOURCE}".encode()
    nvrtc._compile("sm_90", main_src, headers, ("-Xptxas", "-v"), log)
    lines = log[0].splitlines()
    at = next(i for i, line in enumerate(lines) if "Compiling entry function 'probe384'" in line)
    ours = [line.strip() for line in lines[at + 1:at + 4] if "spill" in line or "Used" in line]
    notes = [line.strip() for line in lines if "C75" in line or "setmaxnreg" in line]
    print(f"setmaxnreg.dec {dec}, .inc {inc}: " + "; ".join(ours + notes))


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
