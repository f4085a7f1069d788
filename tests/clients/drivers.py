"""Build the Go and Rust client drivers (``tests/clients/go``, ``tests/clients/rust``) once and cache them.

Each driver is one executable taking a scenario name and flags and printing one JSON object on its last
stdout line (see the sources). The build is keyed by a hash of the driver's sources and lock files plus the
toolchain version, and lands in ``$RMQ_PEERS_CACHE`` (default ``~/.cache/rmq-peers``): a warm cache costs
one hash; a cold one runs ``go build`` (modules pinned by go.mod/go.sum, fetched from the module proxy) or
``cargo build --release --locked`` (crates pinned by Cargo.lock, with ``CARGO_TARGET_DIR`` under the cache so
dependencies are compiled once per machine). Concurrent builders serialize on a lock file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BUILD_TIMEOUT = 3600.0


def cache_root() -> Path:
    root = os.environ.get("RMQ_PEERS_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "rmq-peers"


@dataclass(frozen=True)
class Spec:
    name: str
    source_dir: Path
    inputs: tuple[str, ...]  # globs under source_dir that the build depends on
    version_cmd: tuple[str, ...]
    binary: str


GO = Spec("go", HERE / "go", ("go.mod", "go.sum", "*.go"), ("go", "version"), "rmq-go-driver")
# The Go client with TLS: its own module on a later commit of rocketmq-client-go (2.1.2 has no TLS).
GO_TLS = Spec("go-tls", HERE / "go-tls", ("go.mod", "go.sum", "*.go"), ("go", "version"), "rmq-go-tls-driver")
RUST = Spec(
    "rust",
    HERE / "rust",
    ("Cargo.toml", "Cargo.lock", "src/**/*.rs"),
    ("cargo", "--version"),
    "rmq-rust-client-driver",
)
SPECS = {"go": GO, "go-tls": GO_TLS, "rust": RUST}


class BuildError(RuntimeError):
    pass


def _key(spec: Spec) -> str:
    h = hashlib.sha256()
    try:
        toolchain = subprocess.run(spec.version_cmd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise BuildError(f"{spec.name} toolchain unavailable ({' '.join(spec.version_cmd)}): {e}") from e
    h.update(toolchain.encode())
    for pattern in spec.inputs:
        for path in sorted(spec.source_dir.glob(pattern)):
            h.update(str(path.relative_to(spec.source_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
    with log.open("w") as out:
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT
        )
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise BuildError(f"{' '.join(cmd)} failed ({proc.returncode}), log {log}:\n{tail}")


def build(name: str) -> Path:
    """The path of the built driver ``name`` ("go", "go-tls" or "rust"), building it if the cache lacks this
    version."""
    spec = SPECS[name]
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    out_dir = root / f"{spec.name}-{_key(spec)}"
    exe = out_dir / spec.binary
    if exe.exists():
        return exe
    with (root / f"{spec.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists():
            return exe
        tmp = out_dir.with_name(out_dir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        env = dict(os.environ)
        if spec in (GO, GO_TLS):
            env.setdefault("GOFLAGS", "-mod=readonly")
            cmd = ["go", "build", "-trimpath", "-o", str(tmp / spec.binary), "."]
            _run(cmd, spec.source_dir, env, tmp / "build.log")
        else:
            env["CARGO_TARGET_DIR"] = str(root / "rust-target")
            _run(["cargo", "build", "--release", "--locked"], spec.source_dir, env, tmp / "build.log")
            shutil.copy2(root / "rust-target" / "release" / spec.binary, tmp / spec.binary)
        tmp.rename(out_dir)
        for old in root.iterdir():  # older builds of this driver
            if old != out_dir and re.fullmatch(rf"{spec.name}-[0-9a-f]{{16}}", old.name):
                shutil.rmtree(old, ignore_errors=True)
    return exe


def run(exe: Path, scenario: str, *args: str, home: Path, timeout: float = 180.0) -> dict[str, Any]:
    """Run one scenario; returns the JSON object of the driver's last stdout line (with its stderr tail)."""
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [str(exe), scenario, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=home,
        env=dict(os.environ, HOME=str(home), RUST_LOG="warn", ROCKETMQ_GO_LOG_LEVEL="warn"),
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise AssertionError(
            f"{scenario}: no result (exit {proc.returncode}); stderr:\n{proc.stderr[-4000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    result["_stderr"] = proc.stderr[-4000:]
    result["_exit"] = proc.returncode
    return result
