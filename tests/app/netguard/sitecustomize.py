"""Loaded by every Python process of a served test app (the server and its workers), through
PYTHONPATH: records each attempt to reach another machine (a name looked up, a connection to
an address off this machine) in $PLNLAB_NET_LOG, then lets it go on."""

import ipaddress
import os
import socket

_LOG = os.environ.get("PLNLAB_NET_LOG")
_LOCAL_NAMES = {"localhost", "", None}


def _local(host) -> bool:
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return str(host) == socket.gethostname()


def _record(what: str) -> None:
    with open(_LOG, "a") as log:
        log.write(f"{os.getpid()} {what}\n")


if _LOG:
    _connect, _connect_ex, _getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
            _record(f"connect {address!r}")
        return _connect(self, address)

    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
            _record(f"connect {address!r}")
        return _connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _local(host):
            _record(f"look up {host!r}")
        return _getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo
