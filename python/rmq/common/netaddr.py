"""The address a broker announces by default (``brokerIP1``), picked as RocketMQ picks it.

RocketMQ takes the IPv4 addresses of the host's network interfaces, leaving out loopback addresses and
Linux bridges, and announces the first one outside ``127.0.*`` and ``192.168.*``, else the last one
found, else the host name's address. Clients on other machines then get an address they can reach;
``brokerIP1`` overrides it.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct

__all__ = ["interface_addresses", "local_address"]

_SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def interface_addresses() -> list[tuple[str, str]]:
    """``(interface, IPv4 address)`` of each interface that has one, bridges left out, in index order."""
    out = []
    for _, name in socket.if_nameindex():
        if os.path.exists(f"/sys/class/net/{name}/bridge"):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                raw = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
            except OSError:  # no IPv4 address on this interface
                continue
        out.append((name, socket.inet_ntoa(raw[20:24])))
    return out


def local_address() -> str:
    try:
        candidates = [ip for _, ip in interface_addresses() if not ip.startswith("127.")]
    except OSError:
        candidates = []
    for ip in candidates:
        if not ip.startswith(("127.0", "192.168")):
            return ip
    if candidates:
        return candidates[-1]
    try:
        return socket.gethostbyname(socket.gethostname()) or "127.0.0.1"
    except OSError:
        return "127.0.0.1"
