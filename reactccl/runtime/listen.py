"""Which addresses a reactccl job listens on, and how to keep them on one network.

A job over torch.distributed opens these listening sockets:

1. the rendezvous store (a ``TCPStore``) on ``MASTER_ADDR:MASTER_PORT``, in the
   process that hosts it (torchrun's agent, or rank 0 with ``env://``). torch binds it
   to *every* interface of that host; :func:`bound_store` hosts one on a single
   address instead (``run_local`` binds 127.0.0.1, the testbed worker MASTER_ADDR).
2. every rank's Gloo pairs (data plane and RTuner's control group), on ephemeral
   ports of the interface named by ``GLOO_SOCKET_IFNAME``, else the address the host
   name resolves to. RTuner's control group uses ``control_ifname`` when given, else
   :func:`control_interface`: ``GLOO_SOCKET_IFNAME`` if set, else the interface this
   host reaches ``MASTER_ADDR`` through (``lo`` for a single-machine job).
3. NCCL's bootstrap sockets (``NCCL_SOCKET_IFNAME``), with the NCCL backend.

Nothing the control plane receives is unpickled (:mod:`.wire` sends JSON), so a
stranger reaching these ports cannot run code on a rank; they can still disturb the
job (e.g. write rendezvous keys), so keep MASTER_ADDR and the interfaces above on a
private network or behind a firewall, as for any torch.distributed job.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import struct

__all__ = ["control_interface", "interface_of", "bound_store", "init_process_group"]

_SIOCGIFADDR = 0x8915


def interface_of(addr: str) -> str | None:
    """Name of the local IPv4 interface that holds address ``addr``, or None (also off Linux)."""
    try:
        import fcntl  # POSIX only: off Linux there is no interface to name
    except ImportError:
        return None
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                raw = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
        if socket.inet_ntoa(raw[20:24]) == addr:
            return name
    return None


def control_interface(master_addr: str | None = None) -> str | None:
    """The interface for RTuner's control group when none is given: ``GLOO_SOCKET_IFNAME``
    if set (first name of a comma list), else the interface through which this host
    reaches ``master_addr`` (default ``$MASTER_ADDR``; a loopback address gives the
    loopback interface), else None (torch's own choice: the host name's address)."""
    env = os.environ.get("GLOO_SOCKET_IFNAME")
    if env:
        return env.split(",")[0]
    addr = master_addr if master_addr is not None else os.environ.get("MASTER_ADDR")
    if not addr:
        return None
    try:
        ip = socket.gethostbyname(addr)
        if ipaddress.ip_address(ip).is_loopback:
            return interface_of(ip) or interface_of("127.0.0.1")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((ip, 9))  # UDP: no packet is sent; the kernel picks the route and source address
            return interface_of(s.getsockname()[0])
    except (OSError, ValueError):
        return None


def bound_store(addr: str, port: int, world_size: int, is_master: bool,
                timeout: float = 300.0):
    """A ``torch.distributed.TCPStore`` for a job: on the master, listening on ``addr``
    only (not every interface, as ``TCPStore(addr, port, is_master=True)`` does); elsewhere
    a client of ``addr:port``. Give it to ``init_process_group(store=..., rank=..., world_size=...)``.

    ``port`` 0 on the master picks a free one (read it from ``store.port``).

    Raises:
        OSError: ``addr:port`` cannot be bound (in use, not a local address).
    """
    import torch.distributed as dist
    td = datetime.timedelta(seconds=timeout)
    if not is_master:
        return dist.TCPStore(addr, port, world_size, False, td)
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addr, port))
        sock.listen(max(64, world_size))
        store = dist.TCPStore(addr, sock.getsockname()[1], world_size, True, td,
                              wait_for_workers=False, master_listen_fd=sock.detach())
    finally:
        sock.close()
    return store


def init_process_group(backend: str = "gloo", timeout: float = 1800.0) -> None:
    """``torch.distributed.init_process_group`` from torchrun's variables (``RANK``,
    ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), with the store on rank 0 bound to
    ``MASTER_ADDR`` only. Under torchrun's agent store (``TORCHELASTIC_USE_AGENT_STORE``)
    the agent hosts the store and this is the plain ``env://`` initialisation.

    Raises:
        ValueError: a variable is missing or not a number (naming it).
    """
    import torch.distributed as dist
    td = datetime.timedelta(seconds=timeout)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true":
        dist.init_process_group(backend, timeout=td)
        return
    env = {}
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if not os.environ.get(name):
            raise ValueError(f"{name} is not set (run under torchrun or `reactccl testbed run`)")
        env[name] = os.environ[name]
    try:
        rank, world, port = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["MASTER_PORT"])
    except ValueError:
        raise ValueError(f"RANK, WORLD_SIZE and MASTER_PORT must be integers, got {env}") from None
    store = bound_store(env["MASTER_ADDR"], port, world, is_master=rank == 0, timeout=timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=td)
