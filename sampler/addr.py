"""host:port checks shared by the daemon's CLI and warpk's config (no other imports)."""

from __future__ import annotations

import ipaddress


def is_loopback(addr: str) -> bool:
    """True when host:port names a loopback host (127.0.0.0/8, ::1, localhost)."""
    host = addr.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
