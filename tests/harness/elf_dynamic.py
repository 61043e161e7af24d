"""The dynamic section of an ELF shared object: the libraries it needs and
its RPATH / RUNPATH, read with the standard library only (64- and 32-bit,
either byte order)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

DT_NULL, DT_NEEDED, DT_STRTAB, DT_RPATH, DT_RUNPATH = 0, 1, 5, 15, 29
PT_LOAD, PT_DYNAMIC = 1, 2


@dataclass
class Dynamic:
    needed: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)  # DT_RPATH entries, split at ':'
    runpath: list[str] = field(default_factory=list)  # DT_RUNPATH entries


def is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def read_dynamic(data: bytes) -> Dynamic:
    if not is_elf(data):
        raise ValueError("not an ELF file")
    bits64 = data[4] == 2
    endian = "<" if data[5] == 1 else ">"
    if bits64:
        (phoff,) = struct.unpack_from(endian + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(endian + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x2A)
    loads = []  # (virtual address, file offset, file size)
    dynamic = None  # (file offset, size)
    for i in range(phnum):
        base = phoff + i * phentsize
        if bits64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(endian + "IIQQQQ", data, base)
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(endian + "IIIII", data, base)
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    result = Dynamic()
    if dynamic is None:
        return result
    entry = struct.Struct(endian + ("qQ" if bits64 else "iI"))
    entries = []
    strtab_addr = None
    for offset in range(dynamic[0], dynamic[0] + dynamic[1], entry.size):
        tag, value = entry.unpack_from(data, offset)
        if tag == DT_NULL:
            break
        if tag == DT_STRTAB:
            strtab_addr = value
        entries.append((tag, value))
    if strtab_addr is None:
        raise ValueError("no DT_STRTAB")
    strtab = next(
        (off + strtab_addr - vaddr for vaddr, off, size in loads if vaddr <= strtab_addr < vaddr + size), None
    )
    if strtab is None:
        raise ValueError("DT_STRTAB outside every PT_LOAD segment")

    def string(index: int) -> str:
        start = strtab + index
        return data[start : data.index(b"\0", start)].decode()

    for tag, value in entries:
        if tag == DT_NEEDED:
            result.needed.append(string(value))
        elif tag == DT_RPATH:
            result.rpath += [p for p in string(value).split(":") if p]
        elif tag == DT_RUNPATH:
            result.runpath += [p for p in string(value).split(":") if p]
    return result
