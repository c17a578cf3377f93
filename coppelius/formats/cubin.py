"""Reading a cubin (an ELF with e_machine EM_CUDA) with pyelftools: its arch and, per kernel,
registers, static shared bytes, max threads, parameter offsets and the parameter bank's size.

One reader for the realize stage (which records kernel_info) and admission (which re-reads the
image it certifies). Anything malformed raises CoppeliusError.
"""
import io
import struct

from ..errors import CoppeliusError

EM_CUDA = 190
# .nv.info attribute codes (NVIDIA's EIATTR_* numbering) and entry formats.
EIATTR_MAX_THREADS, EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE, EIATTR_REGCOUNT = 0x05, 0x17, 0x19, 0x2F
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
# From sm_90 on, a cubin with a .nv.shared.reserved.0 section lays each kernel's shared memory out
# after the 1 KiB the system reserves in every block, and .nv.shared.NAME's size counts it; the
# driver's CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, which is what the 48 KiB limit holds, does not
# (checked against every kernel on the H200, driver 580).
RESERVED_SHARED = 1024


def _attributes(data: bytes):
    """The (attribute, value) entries of a .nv.info section: value is bytes, an int, or None."""
    at = 0
    while at + 2 <= len(data):
        fmt, attr = data[at], data[at + 1]
        if fmt == EIFMT_SVAL:
            size, = struct.unpack_from("<H", data, at + 2)
            yield attr, data[at + 4:at + 4 + size]
            at += 4 + size
        elif fmt == EIFMT_HVAL:
            yield attr, struct.unpack_from("<H", data, at + 2)[0]
            at += 4
        elif fmt == EIFMT_BVAL:
            yield attr, data[at + 2]
            at += 4
        elif fmt == EIFMT_NVAL:
            yield attr, None
            at += 4
        else:
            raise CoppeliusError(f"cubin: unknown .nv.info entry format {fmt} at byte {at}; "
                                 f"rebuild it with `snakemake`")


def read_cubin(data: bytes) -> tuple[str, dict[str, dict]]:
    """(arch, {kernel: {registers, shared_bytes, max_threads, params, param_size}}).

    params are (ordinal, offset, size) of each parameter; param_size is EIATTR_CBANK_PARAM_SIZE
    (the end of the last parameter), None when absent.
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    try:
        elf = ELFFile(io.BytesIO(data))
        if elf["e_machine"] not in ("EM_CUDA", EM_CUDA):
            raise CoppeliusError(f"cubin: e_machine is {elf['e_machine']}, not EM_CUDA; the image is not a cubin")
        flags, abi = elf["e_flags"], elf.header["e_ident"]["EI_ABIVERSION"]
        arch = f"sm_{(flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF}"
        symbols = list(elf.get_section_by_name(".symtab").iter_symbols())
        registers = {}
        common = elf.get_section_by_name(".nv.info")
        for attr, value in _attributes(common.data() if common is not None else b""):
            if attr == EIATTR_REGCOUNT:
                index, count = struct.unpack("<II", value)
                registers[symbols[index].name] = count
        reserved = RESERVED_SHARED if elf.get_section_by_name(".nv.shared.reserved.0") is not None else 0
        kernels = {}
        for section in elf.iter_sections():
            if not section.name.startswith(".nv.info."):
                continue
            name = section.name[len(".nv.info."):]
            params, param_size, max_threads = [], None, 0
            for attr, value in _attributes(section.data()):
                if attr == EIATTR_KPARAM_INFO:
                    _, ordinal, offset, flags = struct.unpack("<IHHI", value)
                    params.append((ordinal, offset, (flags >> 18) & 0x3FFF))
                elif attr == EIATTR_CBANK_PARAM_SIZE:
                    param_size = value
                elif attr == EIATTR_MAX_THREADS:
                    x, y, z = struct.unpack("<III", value)
                    max_threads = x * y * z
            shared = elf.get_section_by_name(f".nv.shared.{name}")
            text = elf.get_section_by_name(f".text.{name}")
            kernels[name] = {"registers": registers.get(name, text["sh_info"] >> 24 if text is not None else 0),
                             "shared_bytes": max(0, shared["sh_size"] - reserved) if shared is not None else 0,
                             "max_threads": max_threads, "params": sorted(params), "param_size": param_size}
    except (ELFError, struct.error, AttributeError, IndexError, TypeError, ValueError) as e:
        raise CoppeliusError(f"cubin: not a readable cubin ({type(e).__name__}: {e}); "
                             f"rebuild it with `snakemake`") from None
    return arch, kernels
