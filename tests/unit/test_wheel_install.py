"""The suite runs against the installed wheel (scripts/test sets RMQ_TEST_WHEEL to the wheel it built
and installed into a fresh venv): rmq and its native module come from that venv's site-packages, the
native module is byte for byte the one in the wheel, and the wheel is a stripped abi3 manylinux one.
In any run, no other build of the native module sits beside the one imported."""

from __future__ import annotations

import hashlib
import os
import re
import struct
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import rmq
import rmq._store

WHEEL = os.environ.get("RMQ_TEST_WHEEL")
from_wheel = pytest.mark.skipif(not WHEEL, reason="RMQ_TEST_WHEEL unset: not a run of scripts/test")

# cp311-abi3-manylinux_2_28_x86_64, or an older manylinux.
TAG = re.compile(r"cp311-abi3-manylinux_2_(\d+)_x86_64")


def elf_section_names(path: Path) -> set[str]:
    """Section names of a little-endian ELF64 file, read from its section header table."""
    data = path.read_bytes()
    assert data[:6] == b"\x7fELF\x02\x01", "not a little-endian ELF64 file"
    shoff, _, _, _, _, shentsize, shnum, shstrndx = struct.unpack_from("<QIHHHHHH", data, 0x28)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab_off = headers[shstrndx][4]
    return {data[strtab_off + name : data.index(b"\0", strtab_off + name)].decode() for name, *_ in headers}


@from_wheel
def test_rmq_is_imported_from_the_venv_install() -> None:
    assert sys.prefix != sys.base_prefix, "the suite should run in scripts/test's venv"
    site = Path(sysconfig.get_paths()["platlib"]).resolve()
    for module in (rmq, rmq._store):
        assert module.__file__ is not None
        assert Path(module.__file__).resolve().is_relative_to(site), module.__file__
    assert Path(rmq._store.__file__).name == "_store.abi3.so"


@from_wheel
def test_native_module_is_the_wheels_and_stripped() -> None:
    assert WHEEL is not None
    wheel = Path(WHEEL)
    tag = TAG.search(wheel.name)
    assert tag and int(tag.group(1)) <= 28, wheel.name
    assert f"Tag: {tag.group(0)}" in (metadata.distribution("rmq").read_text("WHEEL") or "")
    with zipfile.ZipFile(wheel) as zf:
        packed = zf.read("rmq/_store.abi3.so")
    native = Path(rmq._store.__file__)
    assert hashlib.sha256(native.read_bytes()).digest() == hashlib.sha256(packed).digest()
    sections = elf_section_names(native)
    assert ".dynsym" in sections and ".text" in sections
    assert not {s for s in sections if s == ".symtab" or s.startswith(".debug")}, sorted(sections)


def test_no_stale_native_module_beside_the_imported_one() -> None:
    # Python prefers `_store.cpython-311-x86_64-linux-gnu.so` (left by an editable install from before
    # the abi3 build) to `_store.abi3.so`, so a stale one would be imported instead of a fresh build.
    assert rmq._store.__file__ is not None
    native = Path(rmq._store.__file__)
    builds = sorted(p.name for p in native.parent.glob("_store.*") if p.suffix in (".so", ".pyd"))
    assert builds == [native.name], (
        f"{len(builds)} builds of rmq._store in {native.parent}, and Python imports {native.name}: "
        "delete the stale ones (an old _store.cpython-*.so) and reinstall"
    )
