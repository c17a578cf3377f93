"""NVRTC realization without a GPU: the CUDA kernels compile for every target arch, to the same bytes
from any directory, and each cubin's kernels have the catalog's parameters."""
import re
import shutil

import pytest

from coppelius import cas
from coppelius.config import target_profile
from coppelius.errors import CoppeliusError
from coppelius.formats import geometry
from coppelius.formats import kernels as catalog
from coppelius.host.build import HOST_DIR
from coppelius.realize import nvrtc

ARCHS = tuple(target_profile(name)["arch"] for name in ("rtx3090", "h200", "gb10"))  # sm_86, sm_90, sm_121


@pytest.fixture(scope="module")
def cubins():
    return {arch: nvrtc.compile_cubin(arch) for arch in ARCHS}


@pytest.mark.parametrize("arch", ARCHS)
def test_every_catalog_kernel_is_in_the_cubin_with_the_catalogs_parameters(cubins, arch):
    cubin, version = cubins[arch]
    assert cubin[:4] == b"\x7fELF" and re.fullmatch(r"\d+\.\d+", version)
    info = nvrtc.kernel_info(cubin)
    assert set(catalog.KERNELS) <= set(info)
    for name in catalog.KERNELS:
        assert info[name]["param_bytes"] == catalog.param_layout(name)[1], name
        assert info[name]["registers"] > 0, name
        assert info[name]["shared_bytes"] <= 48 * 1024, name
        wide = arch in geometry.WIDE_TILE_ARCHS and name.startswith("matmul_")
        # layernorm_backward is capped at 80 registers (__maxnreg__, which excludes launch bounds): no maximum
        # recorded, and its widest block (LAYERNORM_MAX_THREADS) fits any card's register file
        threads = (geometry.HOPPER_THREADS,) if wide else {
            "encoder_sort": (geometry.ENCODER_SORT_THREADS,), "layernorm_backward": (0,),
            "layernorm_backward_weight": (geometry.LAYERNORM_WEIGHT_THREADS,)}.get(name, (0, 128, 256))
        assert info[name]["max_threads"] in threads, name
    assert info["layernorm_backward"]["registers"] * geometry.LAYERNORM_MAX_THREADS <= 64 * 1024
    print(arch, f"{len(cubin)} bytes", {n: info[n]["registers"] for n in sorted(info)})


def test_ptxas_keeps_every_wgmma_asynchronous_and_the_wide_matmuls_unspilled():
    """ptxas serializes every wgmma of a kernel when an instruction may read the accumulators before their wait
    (C7514: it cost matmul_backward_input its overlap once, docs/notes/gpu-speed.md, third session), when one
    defines them while a product is in flight (C7515: attention_backward's loops had a zero-trip path), or when
    a pipeline crosses a call (C7510); and it fences the products around a wgmma that sits under a branch (C7519:
    dbias's m64n8k16 under `if` slowed every weight gradient by 5-16%, sixth session)."""
    report = nvrtc.ptxas_report("sm_90")
    spills, kernel = {}, None
    for line in report.splitlines():
        if m := re.search(r"Function properties for (\w+)", line):
            kernel = m.group(1)
        elif kernel and (m := re.search(r"(\d+) bytes spill stores", line)):
            spills[kernel] = int(m.group(1))
    print({k: spills[k] for k in sorted(spills) if k.startswith("matmul")})
    serialized = [line for line in report.splitlines() if "serialized" in line]
    assert not serialized, serialized[0]
    fenced = [line for line in report.splitlines() if "C7519" in line and "'matmul_" in line]
    assert not fenced, fenced[0]
    wide = ("matmul_forward", "matmul_backward_input", "matmul_forward_gelu", "matmul_backward_input_gelu",
            "matmul_forward_stats")
    assert all(spills[k] == 0 for k in wide), {k: spills[k] for k in wide}


def test_cubin_bytes_do_not_depend_on_the_source_directory(cubins, tmp_path):
    copy = shutil.copytree(nvrtc.SOURCES, tmp_path / "elsewhere" / "cuda")
    again, _ = nvrtc.compile_cubin("sm_90", copy, cached=False)  # a second compilation, from elsewhere
    assert again == cubins["sm_90"][0]


def test_a_compile_error_is_one_line_naming_the_first_error(tmp_path):
    copy = shutil.copytree(nvrtc.SOURCES, tmp_path / "cuda")
    with open(copy / "elementwise.cuh", "a") as f:
        f.write("\nextern \"C\" __global__ void broken(int* p) { p[0] = undefined_name; }\nint also wrong\n")
    with pytest.raises(CoppeliusError) as e:
        nvrtc.compile_cubin("sm_90", copy)
    message = str(e.value)
    assert "\n" not in message and "error" in message and "undefined_name" in message, message
    assert str(tmp_path) not in message


def test_kernel_info_refuses_parameters_other_than_the_catalogs(tmp_path):
    (tmp_path / "kernels.cu").write_text(
        '#include <cuda_fp16.h>\nextern "C" __global__ void cast_half(__half* out, const float* inp, long long N) {}\n')
    cubin, _ = nvrtc.compile_cubin("sm_90", tmp_path)
    with pytest.raises(CoppeliusError, match="cast_half"):
        nvrtc.kernel_info(cubin)


def test_geometry_constants_match_the_kernels():
    def constant(file, name):
        text = (nvrtc.SOURCES / file).read_text()
        return re.search(rf"constexpr int {name} = ([^;]+);", text).group(1)
    assert constant("common.cuh", "THREADS") == str(geometry.THREADS)
    assert constant("common.cuh", "PACK") == str(geometry.PACK)
    assert constant("loss.cuh", "WARP_ROW_COLUMNS") == "32 * PACK"
    assert geometry.LOSS_WARP_ROW_COLUMNS == 32 * geometry.PACK
    assert constant("encoder.cuh", "ROWS") == "WARPS" and geometry.ENCODER_ROWS == geometry.THREADS // 32
    assert constant("encoder.cuh", "CHUNK") == "32 * PACK" and geometry.ENCODER_CHUNK == 32 * geometry.PACK
    assert constant("encoder.cuh", "POSITIONS") == "WARPS" and geometry.ENCODER_POSITIONS == geometry.THREADS // 32
    assert constant("encoder.cuh", "SEGMENTS") == "WARPS" and geometry.ENCODER_SEGMENTS == geometry.THREADS // 32
    assert constant("encoder.cuh", "TOKENS") == "THREADS" and geometry.ENCODER_SORT_TOKENS == geometry.THREADS
    assert constant("encoder.cuh", "SPREAD_VOCAB") == str(geometry.ENCODER_SPREAD_VOCAB)
    assert constant("encoder.cuh", "SPREAD_CHUNK") == "32 * SPREAD_LANE"
    assert 32 * int(constant("encoder.cuh", "SPREAD_LANE")) == geometry.ENCODER_SPREAD_CHUNK
    assert constant("encoder.cuh", "SORT_THREADS") == str(geometry.ENCODER_SORT_THREADS)
    host = (HOST_DIR / "encoder.c").read_text()  # the cpu target's C kernel sums in the same order
    assert re.search(r"#define SEGMENTS (\d+)", host).group(1) == str(geometry.ENCODER_SEGMENTS)
    assert constant("layernorm.cuh", "ROWS") == "WARPS" and geometry.LAYERNORM_ROWS == geometry.THREADS // 32
    assert constant("layernorm.cuh", "BLOCK_ROWS") == str(geometry.LAYERNORM_BLOCK_ROWS)
    assert constant("layernorm.cuh", "MAX_BLOCKS") == str(geometry.LAYERNORM_MAX_BLOCKS)
    assert constant("layernorm.cuh", "MAX_THREADS") == str(geometry.LAYERNORM_MAX_THREADS)
    assert constant("layernorm.cuh", "WEIGHT_THREADS") == str(geometry.LAYERNORM_WEIGHT_THREADS)
    assert constant("layernorm.cuh", "BATCH") == str(geometry.LAYERNORM_BATCH)
    assert constant("layernorm.cuh", "STAGES") == str(geometry.LAYERNORM_STAGES)
    host = (HOST_DIR / "layernorm.c").read_text()  # the cpu target's C kernel splits the rows the same way
    assert re.search(r"#define BLOCK_ROWS (\d+)", host).group(1) == str(geometry.LAYERNORM_BLOCK_ROWS)
    assert re.search(r"#define MAX_BLOCKS (\d+)", host).group(1) == str(geometry.LAYERNORM_MAX_BLOCKS)
    assert constant("attention.cuh", "AT_THREADS") == str(geometry.ATTENTION_THREADS)
    assert constant("attention.cuh", "AT_BR") == constant("attention.cuh", "AT_BCK") == str(geometry.ATTENTION_ROWS)
    attention = (nvrtc.SOURCES / "attention.cuh").read_text()  # the wgmma forward's K/V stages: the shared bytes count them
    assert re.search(r"#define COPTC_ATTN_FWD_STAGES (\d+)\n#endif", attention).group(1) == \
        str(geometry.ATTENTION_FORWARD_STAGES)
    assert constant("matmul.cuh", "MM_BK") == str(geometry.MATMUL_BK)
    assert constant("matmul.cuh", "MM_SPLITS") == str(geometry.MATMUL_SPLITS)
    assert constant("matmul_hopper.cuh", "MM_HOP_THREADS") == str(geometry.HOPPER_THREADS)
    assert constant("matmul_hopper.cuh", "MM_HOP_STAGES") == str(geometry.HOPPER_STAGES)
    assert constant("matmul_hopper.cuh", "MM_HOP_BK") == str(geometry.HOPPER_BK)
    assert constant("matmul_hopper.cuh", "MM_HOP_OUT_LD") == str(geometry.HOPPER_OUT_LD)
    assert constant("matmul_hopper.cuh", "HOP_ID_RING") == str(geometry.HOPPER_ID_RING)
    hopper = {name: int(constant("matmul_hopper.cuh", name))
              for name in ("MM_HOP_STAGES", "MM_HOP_BK", "MM_HOP_OUT_LD", "HOP_ID_RING")}
    hopper["HOP_IDS_BYTES"] = eval(constant("matmul_hopper.cuh", "HOP_IDS_BYTES"), {}, hopper)
    assert eval(" ".join(constant("matmul_hopper.cuh", "MM_HOP_SHARED").split()), {}, hopper) == geometry.HOPPER_SHARED


def test_weight_gradients_split_k_a_cluster_a_tile():
    tc, cluster = geometry.tensor_core_geometry, geometry.cluster_size
    assert geometry.MATMUL_SPLITS == 8
    # gpt2's attn proj (768x768, K = 32768): 144 tiles of 64x64, 4 blocks each
    assert tc("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 768}) == ([576, 1, 1], [128, 1, 1], 32768)
    # its qkv (2304x768): 108 tiles of 128x128, 8 blocks each; fc (3072x768): 144 tiles, 4 each
    assert tc("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 2304}) == ([864, 1, 1], [256, 1, 1], 49152)
    assert tc("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 3072}) == ([576, 1, 1], [256, 1, 1], 49152)
    assert cluster("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 2304}) == 8
    # its lm head: 393 x 6 tiles of 128x128, enough without a split (one block a tile, no clusters)
    assert tc("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 50304}) == ([2358, 1, 1], [256, 1, 1], 49152)
    assert cluster("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 50304}) == 1
    # one tile: a cluster of 8; the forward of a shape is never split
    assert tc("matmul_backward_weight", {"N": 3, "C": 8, "OC": 5}) == ([8, 1, 1], [128, 1, 1], 32768)
    assert cluster("matmul_forward", {"N": 3, "C": 8, "OC": 5}) == 1
    # without clusters (sm_86) no split: a block a 64x64 tile
    assert tc("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 768}, "sm_86") == ([144, 1, 1], [128, 1, 1], 32768)
    assert cluster("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 768}, "sm_86") == 1
    assert tc("matmul_forward", {"N": 32768, "C": 768, "OC": 768}) == ([256 * 6, 1, 1], [256, 1, 1], 49152)
    for tiles in (1, 3, 36, 144, 263):
        splits = geometry.split_count(tiles)
        assert splits in (1, 2, 4, 8) and (tiles * splits >= geometry.SPLIT_BLOCKS or splits == 8)


def test_wide_tiles_only_where_the_arch_has_wgmma_and_the_launch_half_a_wave_of_them():
    tc, cluster = geometry.tensor_core_geometry, geometry.cluster_size
    hopper_shared = geometry.HOPPER_SHARED
    # the persistent blocks: 3 stages of 48 KiB, 2 x 64 staging rows of 264 fp16, 2 tensor maps being encoded, 2 x 256
    # bias values, 6 mbarriers, the tile schedule's 16 ids and their mbarriers; within the H200's 227 KiB
    assert hopper_shared == 3 * 48 * 1024 + 2 * 64 * 264 * 2 + 2 * 128 + 2 * 256 * 2 + 6 * 8 + 16 * 12 <= 227 * 1024
    # gpt2's fc forward (32768 x 3072): 256 x 12 tiles of 128x256, walked by one persistent block an SM on sm_90,
    # 128x128 tiles elsewhere
    assert tc("matmul_forward", {"N": 32768, "C": 768, "OC": 3072}, "sm_90") == ([geometry.WIDE_TILES, 1, 1],
                                                                                 [384, 1, 1], hopper_shared)
    assert tc("matmul_forward", {"N": 32768, "C": 768, "OC": 3072}, "sm_86") == ([256 * 24, 1, 1], [256, 1, 1], 49152)
    # its input gradient through the fc proj (32768 x 768 out, K = 3072): 256 x 3 tiles
    assert tc("matmul_backward_input", {"N": 32768, "C": 768, "OC": 3072}, "sm_90") == ([132, 1, 1], [384, 1, 1],
                                                                                       hopper_shared)
    # fewer than half a wave of 128x256 tiles (65 of them): the other rules; from half a wave, a block a tile up to a
    # wave's blocks
    assert tc("matmul_forward", {"N": 128 * 65, "C": 64, "OC": 256}, "sm_90")[:2] == ([520, 1, 1], [128, 1, 1])
    assert tc("matmul_forward", {"N": 128 * 66, "C": 64, "OC": 256}, "sm_90") == ([66, 1, 1], [384, 1, 1],
                                                                                    hopper_shared)
    assert tc("matmul_forward", {"N": 128 * 131, "C": 64, "OC": 256}, "sm_90")[0] == [131, 1, 1]
    assert tc("matmul_forward", {"N": 128 * 133, "C": 64, "OC": 256}, "sm_90")[0] == [132, 1, 1]
    assert tc("matmul_forward", {"N": 128 * 131, "C": 64, "OC": 256}, "sm_86")[1] == [128, 1, 1]  # 262 < 264
    # on sm_90 weight gradients take the 128x256 tiles too, a cluster of S <= WIDE_BESIDE_SPLITS blocks a tile, S for
    # the least time in waves of WIDE_CLUSTERS[S - 1] clusters: gpt2's qkv 18 x 3 tiles 2 ways (66 clusters at once:
    # one wave), its fc 24 x 3 not split (two ways would take two waves of 66), its attn proj 6 x 3 2 ways, its lm
    # head 393 x 3 not split; small's attn proj (3 x 2 tiles, K = 16384) and fc 2 ways
    assert geometry.WIDE_BESIDE_SPLITS == 2
    wg = {"gpt2 qkv": (32768, 768, 2304, 54, 2), "gpt2 fc": (32768, 768, 3072, 72, 1),
          "gpt2 attn proj": (32768, 768, 768, 18, 2), "gpt2 lm head": (32768, 768, 50304, 1179, 1),
          "small attn proj": (16384, 384, 384, 6, 2), "small fc": (16384, 384, 1536, 24, 2)}
    for label, (N, C, OC, tiles, splits) in wg.items():
        s = {"N": N, "C": C, "OC": OC}
        assert tc("matmul_backward_weight", s, "sm_90") == ([tiles * splits, 1, 1], [384, 1, 1], hopper_shared), label
        assert cluster("matmul_backward_weight", s, "sm_90") == splits, label
    assert tc("matmul_backward_weight", {"N": 32768, "C": 768, "OC": 2304}, "sm_121")[1] == [256, 1, 1]
    # a split needs K / S >= WIDE_MIN_K: at K = 2048 the qkv splits 2 ways at most
    assert geometry.wide_split_count(54, 2048) == 2 and geometry.wide_split_count(72, 2048) == 1
    assert len(geometry.WIDE_CLUSTERS) == 16 and list(geometry.WIDE_CLUSTERS) == sorted(geometry.WIDE_CLUSTERS)[::-1]
    # the tiny model's (K = 512, below WIDE_MIN_K): 3 tiles of 64x64 split 8 ways where clusters are, else not split
    for arch in ("sm_90", "sm_121"):
        assert tc("matmul_backward_weight", {"N": 512, "C": 64, "OC": 192}, arch) == ([24, 1, 1], [128, 1, 1], 32768)
        assert cluster("matmul_backward_weight", {"N": 512, "C": 64, "OC": 192}, arch) == 8
    assert tc("matmul_backward_weight", {"N": 512, "C": 64, "OC": 192}, "sm_86") == ([3, 1, 1], [128, 1, 1], 32768)
    # a short K with enough 128x128 tiles to fill SPLIT_BLOCKS blocks takes those (66 x 2 tiles, 4 ways)
    assert tc("matmul_backward_weight", {"N": 512, "C": 256, "OC": 8448}, "sm_90") == ([528, 1, 1], [256, 1, 1], 49152)


def test_attention_forward_blocks_stay_resident_only_on_the_wgmma_path():
    tc, resident = geometry.tensor_core_geometry, geometry.ATTENTION_FORWARD_RESIDENT
    small, gpt2 = {"B": 64, "T": 256, "C": 384, "NH": 6}, {"B": 32, "T": 1024, "C": 768, "NH": 12}
    shared = geometry.attention_shared_bytes("attention_forward", 64, "sm_90")
    # head size 64 on sm_90a: a prime number of blocks (no two of a head's query tiles always on one block), at most
    # four an SM on 132 SMs, taking small's 4 x 6 x 64 and gpt2's 16 x 12 x 32 items in turn
    assert resident == 523 and all(resident % d for d in range(2, 23)) and resident <= 4 * 132
    assert tc("attention_forward", small, "sm_90") == ([resident, 1, 1], [128, 1, 1], shared)
    assert tc("attention_forward", gpt2, "sm_90") == ([resident, 1, 1], [128, 1, 1], shared)
    # fewer items than that: a block an item
    assert tc("attention_forward", {**small, "B": 2}, "sm_90")[0] == [4 * 6 * 2, 1, 1]
    # elsewhere a block an item in (query tile, head, batch): other archs, other head sizes, a C or head size that
    # leaves the 16-byte loads out (the resident loop has no room for the element-wise loads' call)
    assert tc("attention_forward", small, "sm_86")[0] == [4, 6, 64]
    assert tc("attention_forward", small, "sm_121")[0] == [4, 6, 64]
    assert tc("attention_forward", {**small, "C": 768, "NH": 6}, "sm_90")[0] == [4, 6, 64]  # head size 128
    assert tc("attention_forward", {**small, "C": 360, "NH": 6}, "sm_90")[0] == [4, 6, 64]  # head size 60
    assert tc("attention_backward", small, "sm_90")[0] == [8, 6, 64]


def test_geometry_of_the_gpt2_launches():
    s = {"B": 32, "T": 1024, "C": 768, "Vp": 50304, "N": 32768, "V": 50257}
    assert geometry.geometry("encoder_backward", s) == ([6288 + 128, 3, 1], [256, 1, 1], 0)
    assert geometry.geometry("encoder_sort", s) == ([197, 1, 1], [1024, 1, 1], 0)
    # a byte vocabulary: a row a block, its 64-channel chunks adjacent in x
    assert geometry.geometry("encoder_backward", {**s, "Vp": 256, "T": 256, "C": 384}) == (
        [6, 256 + 32, 1], [256, 1, 1], 0)
    assert geometry.geometry("layernorm_backward", s) == ([1024, 1, 1], [96, 1, 1], 0)
    assert geometry.geometry("layernorm_backward", {"N": 77, "C": 13}) == ([20, 1, 1], [32, 1, 1], 0)
    # on sm_90 its loads go through two batches of two rows of shared memory, 3 packs a row a thread (C % 8 == 0,
    # C <= 1024); elsewhere, and for other widths, straight to registers
    assert geometry.geometry("layernorm_backward", s, "sm_90") == ([1024, 1, 1], [96, 1, 1], 2 * 2 * 3 * 16 * 96)
    assert geometry.geometry("layernorm_backward", {"N": 77, "C": 13}, "sm_90") == ([20, 1, 1], [32, 1, 1], 0)
    assert geometry.geometry("layernorm_backward", {"N": 77, "C": 2048}, "sm_90") == ([20, 1, 1], [256, 1, 1], 0)
    assert geometry.geometry("layernorm_backward", s, "sm_86") == geometry.geometry("layernorm_backward", s, "sm_121")
    assert geometry.geometry("layernorm_backward", s, "sm_86")[2] == 0
    assert geometry.geometry("layernorm_backward_weight", s) == ([48, 1, 1], [1024, 1, 1], 0)
    assert geometry.geometry("crossentropy_backward", s) == ([32768, 1, 1], [256, 1, 1], 0)
    # a byte vocabulary's rows take a warp each, 8 a block (the loss kernels; argmax and the _stats form a block a row)
    byte_rows = {"N": 16387, "V": 256, "Vp": 256}
    assert geometry.geometry("crossentropy_forward_backward", byte_rows) == ([2049, 1, 1], [256, 1, 1], 0)
    assert geometry.geometry("crossentropy_forward", {**byte_rows, "Vp": 264})[0] == [16387, 1, 1]
    assert geometry.geometry("argmax_forward", byte_rows)[0] == [16387, 1, 1]
    assert geometry.geometry("gelu_forward", {"N": 4 * 768 * 32768}) == ([49152, 1, 1], [256, 1, 1], 0)
    assert geometry.geometry("adamw", {"N": 1000}) == ([4, 1, 1], [256, 1, 1], 0)
    for kernel in catalog.KERNELS:
        scalars = {name: 64 for name, kind in catalog.KERNELS[kernel] if kind in catalog.SCALAR_KINDS}
        grid, block, shared = geometry.geometry(kernel, scalars)
        assert min(grid) >= 1 and block[0] * block[1] * block[2] <= 1024 and 0 <= shared <= 48 * 1024


def test_realize_for_a_gpu_target_records_the_cubin_and_its_kernel_info(cubins, monkeypatch):
    import json

    import yaml

    from coppelius.config import ROOT, resolve
    from coppelius.plan.build import build_plan, encode_plan
    from coppelius.realize import realize
    monkeypatch.setattr(nvrtc, "compile_cubin", lambda arch: cubins[arch])
    defaults = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = resolve(defaults | {"target": "h200", "model": "tiny"})
    plan = json.loads(encode_plan(build_plan(config)))
    out = realize(plan, config.target)
    assert out["image"] == cubins["sm_90"][0]
    info = json.loads(out["kernel_info"])
    assert info["arch"] == "sm_90" and info["nvrtc"] == cubins["sm_90"][1]
    assert sorted(info["kernels"]) == sorted(plan["kernels"])
    assert out["kernel_info"] == out["kernel_info"].strip() + b"\n"


def test_code_digest_covers_cuda_sources(tmp_path, monkeypatch):
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "a.cuh").write_text("// one")
    monkeypatch.setattr(cas, "PACKAGE", tmp_path)
    before = cas.code_digest(["cuda"])
    (tmp_path / "cuda" / "a.cuh").write_text("// two")
    assert cas.code_digest(["cuda"]) != before


def test_ptx_for_another_arch_holds_its_own_code_paths():
    """The GPU tests run rtx3090's kernels on the H200 from this PTX (tests/gpu/test_tensor_cores_gpu.py): it must be
    sm_86's code (its target, no wgmma or clusters), hold every catalog kernel, and end in the NUL the driver wants."""
    ptx = nvrtc.compile_ptx("sm_86")
    assert ptx.endswith(b"\0")
    text = ptx[:-1].decode()
    assert re.search(r"^\.target sm_86$", text, re.M)
    assert "wgmma" not in text and "cluster" not in text
    entries = set(re.findall(r"\.entry (\w+)", text))
    assert entries == set(catalog.KERNELS), entries ^ set(catalog.KERNELS)
    with pytest.raises(CoppeliusError, match="plain arch"):
        nvrtc.compile_ptx("sm_90a")
