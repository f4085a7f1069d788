"""Apache ``mqadmin`` (rocketmq-tools 4.9.8, ``MQAdminStartup``) as a test peer, and the Java program that
holds the state its commands look at.

:func:`mqadmin` runs one command in a child JVM (the peer JVM flags, logs under the given home, never
``~``) and returns its exit code and output; :func:`mqadmin_both` runs it against rmq and the Apache
broker at once. mqadmin reports many failures only as text (a stack trace, "...failed", exit code 0), so
:meth:`Run.ok` checks the text as well as the exit code.

:func:`hold_state` starts ``rmqpeer.AdminSetup hold`` (a topic, messages in known queues, a producer and a
consumer that has consumed and committed), waits for its JSON line and returns it with the process, which
keeps its clients connected until :meth:`Held.close`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.peers.apache import DRIVER_JVM, JAVA_OPENS, LOGBACK, PeerLibs

# What mqadmin prints when a command failed, whatever its exit code (a stack trace's exception class,
# "... command failed", "... not exist"); "exceptionDesc=null" in a message track is no failure.
FAILURE = re.compile(r"[A-Za-z.]*Exception\b|\bfailed\b|\berror\b|not exist", re.IGNORECASE)


@dataclass(frozen=True)
class Run:
    argv: tuple[str, ...]
    code: int
    out: str

    def ok(self) -> Run:
        """This run, once it is known to have succeeded (exit 0, no failure text)."""
        assert self.code == 0 and not FAILURE.search(self.out), f"mqadmin {' '.join(self.argv)}:\n{self.out}"
        return self


def _home(home: Path) -> Path:
    """A ROCKETMQ_HOME for mqadmin: its ``conf/logback_tools.xml`` logs to ``home/user/tools.log``."""
    conf = home / "rocketmq" / "conf"
    if not (conf / "logback_tools.xml").exists():
        conf.mkdir(parents=True, exist_ok=True)
        (home / "user").mkdir(exist_ok=True)
        (conf / "logback_tools.xml").write_text(LOGBACK % "tools")
    return home


MQADMIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
# MQAdminStartup plus getConsumerStatus, which rocketmq-tools 4.9.8 ships but does not register.
MQADMIN_PLUS = "rmqpeer.MQAdminPlus"


def mqadmin(
    libs: PeerLibs,
    home: Path,
    namesrv: str,
    *args: str,
    classes: Path | None = None,
    limit: float = 120.0,
    jars: Path | None = None,
) -> Run:
    """Run ``mqadmin <args> -n <namesrv>``; its stdout and stderr together. With ``classes`` (the compiled
    peer programs) the command runs under :data:`MQADMIN_PLUS`, else under ``MQAdminStartup`` itself.
    ``jars``: another rocketmq-tools (``libs.server5``: 5.5.0's mqadmin) than 4.9.8's."""
    home = _home(home)
    tools = jars or libs.client
    cp = f"{classes}:{tools}/*" if classes else f"{tools}/*"
    argv = [
        "java",
        *DRIVER_JVM,
        *JAVA_OPENS,
        f"-Duser.home={home / 'user'}",
        f"-Drocketmq.client.logRoot={home / 'client-logs'}",
        "-cp",
        cp,
        MQADMIN_PLUS if classes else MQADMIN,
        *args,
        "-n",
        namesrv,
    ]
    env = dict(os.environ, ROCKETMQ_HOME=str(home / "rocketmq"))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=limit, check=False, env=env, cwd=home)
    return Run(tuple(args), proc.returncode, proc.stdout + proc.stderr)


def mqadmin_both(
    libs: PeerLibs, home: Path, namesrvs: dict[str, str], *args: str, classes: Path | None = None
) -> dict[str, Run]:
    """The same command against each broker's name server (concurrently); runs by broker."""
    with ThreadPoolExecutor(len(namesrvs)) as pool:
        futures = {
            b: pool.submit(mqadmin, libs, home / b, ns, *args, classes=classes) for b, ns in namesrvs.items()
        }
        return {b: f.result() for b, f in futures.items()}


@dataclass
class Held:
    proc: subprocess.Popen[str]
    state: dict[str, Any]

    def close(self, timeout: float = 30.0) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def hold_state(libs: PeerLibs, classes: Path, home: Path, timeout: float = 90.0, **args: object) -> Held:
    """Start ``rmqpeer.AdminSetup hold`` and return once it printed its state (or fail with its output)."""
    home.mkdir(parents=True, exist_ok=True)
    logback = home / "setup-logback.xml"
    logback.write_text(LOGBACK % "setup")
    argv = [
        "java",
        *DRIVER_JVM,
        f"-Drocketmq.client.logRoot={home / 'client-logs'}",
        f"-Duser.home={home}",
        f"-Dlogback.configurationFile={logback}",
        "-cp",
        f"{classes}:{libs.client}/*",
        "rmqpeer.AdminSetup",
        "hold",
        *(f"{k}={v}" for k, v in args.items()),
        f"timeout={int(timeout)}",
    ]
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("{"):
            state = json.loads(line)
            if "error" not in state:
                return Held(proc, state)
            break
    proc.kill()
    proc.wait()
    raise AssertionError("AdminSetup hold failed:\n" + "".join(seen[-40:]))
