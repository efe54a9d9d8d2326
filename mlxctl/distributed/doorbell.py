"""A doorbell that lets follower ranks sleep while rank 0 has nothing to do.

A rank waiting in a collective does not sleep: MLX's ring backend polls its sockets (a CPU
core at 80-100 % on an idle daemon), and NCCL keeps a kernel spinning on the GPU. So before
rank 0 blocks on an empty inbox it tells the followers "idle"; they then block in the kernel
on a plain TCP socket until rank 0 rings (one byte each) when work arrives, and both sides go
back to the collectives.

The sockets are set up once through the collectives: rank 0 listens on an ephemeral port and
broadcasts the addresses it may be reached at (rank 0's address as mlx.launch gave it to the
backend, then loopback) with a random token; each follower connects to the first that answers
and sends the token (rank 0 drops connections that do not, so a stranger cannot take a
follower's place); all ranks then
agree, by one ``all_sum``, on whether every follower got through. If one did not, no rank
uses the doorbell (the job works as before, polling while idle).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
from typing import Any

log = logging.getLogger("mlxctl.distributed")
CONNECT_TIMEOUT_S = 5.0


class Doorbell:
    def __init__(self, channel: Any):
        self.channel = channel
        self.peers: list[socket.socket] = []  # rank 0: one per follower
        self.line: socket.socket | None = None  # a follower: its connection to rank 0
        self.enabled = False
        self._token = secrets.token_bytes(16)  # rank 0's: a follower proves it is one by sending it

    def connect(self) -> bool:
        """Set up the sockets (every rank calls it at the same point); True when in use."""
        if self.channel.rank == 0:
            listener = socket.create_server(("", 0), backlog=self.channel.group.size())
            accepting = threading.Thread(target=self._accept, args=(listener,), daemon=True)
            accepting.start()
            self.channel.broadcast((rank0_addresses(), listener.getsockname()[1], self._token))
            ok = self.channel.agree(False) == self.channel.group.size() - 1
            accepting.join(CONNECT_TIMEOUT_S)
            listener.close()
        else:
            hosts, port, token = self.channel.broadcast()
            self.line = _dial(hosts, port, token)
            ok = self.channel.agree(self.line is not None) == self.channel.group.size() - 1
        self.enabled = ok and (self.channel.rank != 0 or len(self.peers) == self.channel.group.size() - 1)
        if not self.enabled:
            log.warning("follower ranks cannot reach rank 0 over TCP: they poll while the server is idle")
        return self.enabled

    def _accept(self, listener: socket.socket) -> None:
        listener.settimeout(CONNECT_TIMEOUT_S * 2)
        try:
            while len(self.peers) < self.channel.group.size() - 1:
                conn, _ = listener.accept()
                conn.settimeout(CONNECT_TIMEOUT_S)
                if _read_exactly(conn, len(self._token)) != self._token:  # not one of our ranks
                    conn.close()
                    continue
                conn.settimeout(None)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.peers.append(conn)
        except OSError:
            pass

    def ring(self) -> None:
        """Rank 0: wake every follower."""
        for peer in self.peers:
            peer.sendall(b"\x01")

    def peer_closed(self) -> bool:
        """A follower: whether rank 0's end of the line is closed (rank 0 is gone)."""
        if self.line is None:
            return False
        try:
            return self.line.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def wait(self) -> bool:
        """A follower: sleep until rank 0 rings; False when rank 0 is gone instead."""
        try:
            return self.line is not None and self.line.recv(1) == b"\x01"
        except OSError:
            return False


def rank0_addresses() -> list[str]:
    """Where rank 0 may be reached, as the launcher told the backend; loopback last."""
    found = [os.environ.get("NCCL_HOST_IP", ""), os.environ.get("MLX_JACCL_COORDINATOR", "").rsplit(":", 1)[0]]
    try:
        with open(os.environ.get("MLX_HOSTFILE", "")) as f:
            hosts = json.load(f)
        found += [entry.rsplit(":", 1)[0] for entry in hosts[0]]
    except (OSError, ValueError, IndexError, TypeError, AttributeError):
        pass
    found.append("127.0.0.1")
    return list(dict.fromkeys(h for h in found if h))


def _dial(hosts: list[str], port: int, token: bytes) -> socket.socket | None:
    for host in hosts:
        try:
            conn = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
            conn.sendall(token)
        except OSError:
            continue
        conn.settimeout(None)
        return conn
    return None


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    try:
        while len(data) < n:
            piece = conn.recv(n - len(data))
            if not piece:
                break
            data += piece
    except OSError:
        pass
    return data
