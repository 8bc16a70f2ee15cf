"""Connections belong to the process that opened them: a forked child drops the pools it inherited.

After ``os.fork()`` (gunicorn ``--preload``, Celery's prefork pool, ``multiprocessing`` with the fork
start method) parent and child hold the same sockets: a child sending on an inherited keep-alive
connection would read the parent's answer, and the parent the child's. So each pool the clients
build registers here, and in a forked child ``os.register_at_fork`` calls its ``after_fork``, which
forgets the connections it held. A fork that did not run the hooks (``fork()`` called by C code that
skips ``PyOS_AfterFork_Child``) is found by the child's first call, which compares ``pid`` with
``os.getpid()`` (``ClientCore._build``) and runs them then (``missed``): the one check, per call.

Nothing the child does may disturb the parent's connections. Closing a socket of the sync pools
sends nothing while the parent still holds it (no FIN, and Python sends no TLS close_notify on
close), so the child closes what it inherited (``release``) when that cannot block: when the parent
had no other thread at the fork, no lock of a pool can have been left held. Otherwise, and for the
async pools (an asyncio transport's close writes TLS close_notify, and needs its loop), what was
inherited is ``abandon``-ed: kept unused and unclosed.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol

__all__ = ["ForkAware", "abandon", "missed", "pid", "register", "release"]


class _Closable(Protocol):
    def close(self) -> None: ...


class ForkAware(Protocol):
    def after_fork(self) -> None:
        """In a forked child: forget (or close, if that sends nothing) the parent's connections."""
        ...


pid = os.getpid()
"""The process the registered pools belong to."""
_registered: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_abandoned: list[object] = []
"""What a child inherited and must neither use nor close: kept, so collecting it closes nothing either."""
_threads_at_fork = 0
_alone = False
"""True while the child's hooks run, if the parent had no other thread at the fork."""


def register(pool: ForkAware) -> None:
    """Call ``pool.after_fork()`` in every child forked from now on (while ``pool`` lives)."""
    _registered.add(pool)


def abandon(inherited: object) -> None:
    """Keep ``inherited`` (a parent's pool, in a child) unused and unclosed for the child's lifetime."""
    _abandoned.append(inherited)


def release(inherited: _Closable) -> None:
    """Close a sync pool the child inherited if that cannot block on a lock left held, else abandon it."""
    if _alone:
        inherited.close()
    else:
        abandon(inherited)


def _before() -> None:
    global _threads_at_fork
    _threads_at_fork = threading.active_count()


def _in_child() -> None:
    global _alone, pid
    pid = os.getpid()
    _alone = _threads_at_fork == 1
    try:
        for pool in list(_registered):
            pool.after_fork()
    finally:
        _alone = False


def missed() -> None:
    """In a child whose fork ran no hooks: run them now (what the parent's threads held is not known:
    what was inherited is abandoned, never closed)."""
    global _threads_at_fork
    _threads_at_fork = 0
    _in_child()


os.register_at_fork(before=_before, after_in_child=_in_child)
