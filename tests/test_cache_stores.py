"""The response cache's stores: a local SQLite file and a real ``redis-server``, one interface.

Each store keeps bytes under keys, expires them after its ``ttl``, counts and clears them, and is safe
for many threads and processes; a store that fails is a miss with one warning (``errors="raise"``:
``CacheError``), never a wrong answer.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis_server import RedisServer

from wrapper import Completion
from wrapper.cache import CacheError, RedisStore, SQLiteStore, Store, open_store
from wrapper.cache._cache import Cache, cache_of
from wrapper.cache._entry import Entry

STORES = ["sqlite", "redis"]


@pytest.fixture(params=STORES)
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path, redis_server: RedisServer
) -> Iterator[Callable[..., Store]]:
    """``make_store(**options)``: a new store of each kind, emptied, closed after the test."""
    made: list[Store] = []
    if request.param == "redis":
        if not redis_server.answers():
            redis_server.start()
        redis_server.flush()

    def make(**options: object) -> Store:
        store: Store
        if request.param == "sqlite":
            store = SQLiteStore(tmp_path / "cache" / "completions.db", **options)  # type: ignore[arg-type]
        else:
            store = RedisStore(redis_server.url, **options)  # type: ignore[arg-type]
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def entry(text: str) -> Entry:
    return Entry.of_completion(Completion(text, "stop", 3, 1, None, raw=_raw(text)))


def _raw(text: str) -> object:
    from wrapper._generated.scale.models import CompletionResponse

    return CompletionResponse.from_dict({"completions": [["prompt", [text]]], "finish_reason": "stop"})


def test_a_store_keeps_bytes_by_key_replaces_counts_and_clears(make_store: Callable[..., Store]) -> None:
    store = make_store()
    assert store.load("a") is None
    store.save("a", b"first")
    store.save("b", b"\x00binary\xff")
    store.save("a", b"second")
    assert store.load("a") == b"second"
    assert store.load("b") == b"\x00binary\xff"
    stats = store.stats()
    assert (stats.entries, stats.size, stats.ttl) == (2, len(b"second") + len(b"\x00binary\xff"), None)
    assert store.clear() == 2
    assert store.load("a") is None
    assert store.stats().entries == 0


def test_an_entry_is_not_served_after_its_ttl(make_store: Callable[..., Store]) -> None:
    store = make_store(ttl=1.0)  # a load right after the save is well within it, however busy the machine
    store.save("a", b"soon gone")
    assert store.load("a") == b"soon gone"
    time.sleep(1.1)
    assert store.load("a") is None
    assert store.stats().entries == 0


def test_bad_store_options_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ttl must be None"):
        SQLiteStore(tmp_path / "x.db", ttl=0)
    with pytest.raises(ValueError, match="errors must be 'warn' or 'raise'"):
        SQLiteStore(tmp_path / "x.db", errors="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a Redis URL starts with"):
        RedisStore("http://localhost:6379")
    with pytest.raises(ValueError, match="prefix must not be empty"):
        RedisStore("redis://localhost:6379", prefix="")
    with pytest.raises(ValueError, match="cache must be a path"):
        open_store(42)  # type: ignore[arg-type]


def test_a_path_or_url_names_one_store_per_process(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    assert open_store(str(path)) is open_store(path)
    assert isinstance(open_store(path), SQLiteStore)
    assert isinstance(open_store("redis://127.0.0.1:1/0"), RedisStore)
    mine = SQLiteStore(path)
    assert open_store(mine) is mine


def test_many_threads_share_a_store(make_store: Callable[..., Store]) -> None:
    store = make_store()
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            for i in range(50):
                store.save(f"{thread}-{i}", f"value {thread} {i}".encode())
                assert store.load(f"{thread}-{i}") == f"value {thread} {i}".encode()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.stats().entries == 400


def test_threads_opening_a_new_file_at_once_wait_for_each_other(tmp_path: Path) -> None:
    # each thread's first use switches the new file to WAL, which SQLite refuses at once ("database is
    # locked") while another connection holds the file; a batch's workers all start so on a new cache
    errors: list[BaseException] = []
    for round_ in range(100):
        store = SQLiteStore(tmp_path / f"{round_}.db")
        ready = threading.Barrier(8)

        def first_read(store: SQLiteStore = store, ready: threading.Barrier = ready) -> None:
            ready.wait()
            try:
                assert store.load("k") is None
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=first_read) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        store.close()
    assert errors == []


WRITER = """
import sys
from wrapper.cache import open_store
store = open_store(sys.argv[1])
for i in range(200):
    store.save(f"{sys.argv[2]}-{i}", b"x" * i)
    assert store.load(f"{sys.argv[2]}-{i}") == b"x" * i
"""


def test_processes_share_a_store_what_one_wrote_the_others_read(make_store: Callable[..., Store]) -> None:
    store = make_store()
    where = str(store.path) if isinstance(store, SQLiteStore) else store.location
    store.save("warm", b"opened first")  # the file exists, in WAL mode, before the writers start
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, where, f"p{n}"], stderr=subprocess.PIPE)
        for n in range(3)
    ]
    for writer in writers:
        _, stderr = writer.communicate(timeout=60)
        assert writer.returncode == 0, stderr.decode()
    assert store.stats().entries == 601
    assert store.load("p2-199") == b"x" * 199


def _save_in_child(store: SQLiteStore) -> None:
    store.save("child", b"written after fork")
    assert store.load("parent") == b"written before fork"


def test_a_forked_child_opens_its_own_sqlite_connection(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.db")
    store.save("parent", b"written before fork")
    child = multiprocessing.get_context("fork").Process(target=_save_in_child, args=(store,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert store.load("child") == b"written after fork"
    store.save("parent again", b"the parent's connection still works")
    assert store.load("parent again") == b"the parent's connection still works"
    store.close()


def test_another_programs_sqlite_file_is_refused_not_written(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as theirs:
        theirs.execute("CREATE TABLE accounts (name TEXT)")
    with pytest.raises(sqlite3.DatabaseError, match="another program's SQLite database"):
        SQLiteStore(path).load("a")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as theirs:
        tables = [row[0] for row in theirs.execute("SELECT name FROM sqlite_schema WHERE type='table'")]
    assert tables == ["accounts"]


def test_a_cache_file_of_another_layout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    SQLiteStore(path).save("a", b"x")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA user_version=99")
    with pytest.raises(sqlite3.DatabaseError, match="layout 99, not 1"):
        SQLiteStore(path).load("a")


# --- failures: a miss and one warning, never a wrong answer ---------------------------------------------


def test_an_entry_reads_back_only_under_its_key_and_intact() -> None:
    stored = entry("Paris").encode("key-1")
    assert Entry.decode("key-1", stored).completion().text == "Paris"
    from wrapper.cache._entry import CorruptEntry

    with pytest.raises(CorruptEntry, match="another key"):
        Entry.decode("key-2", stored)
    flipped = stored.replace(b"Paris", b"Parks")
    with pytest.raises(CorruptEntry, match="checksum"):
        Entry.decode("key-1", flipped)
    with pytest.raises(CorruptEntry, match="checksum"):
        Entry.decode("key-1", b"not an entry at all")


def test_a_corrupt_sqlite_file_is_a_miss_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.db"
    good = SQLiteStore(path)
    good.save("a", entry("x").encode("a"))
    good.close()
    path.write_bytes(b"garbage, not SQLite " * 500)
    for name in ("c.db-wal", "c.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    cache = Cache(SQLiteStore(path))
    with caplog.at_level(logging.DEBUG, "wrapper.cache"):
        assert cache.get("a") is None
        cache.put("a", entry("y"))
        assert cache.get("a") is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "could not read an entry" in warnings[0].getMessage()
    assert str(path) in warnings[0].getMessage()


def test_errors_raise_makes_a_failing_store_an_error(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    path.write_bytes(b"garbage, not SQLite " * 500)
    cache = Cache(SQLiteStore(path, errors="raise"))
    with pytest.raises(CacheError, match="could not read an entry"):
        cache.get("a")
    with pytest.raises(CacheError, match="could not write an entry"):
        cache.put("a", entry("y"))


def test_a_damaged_entry_is_a_miss_with_one_warning_then_replaced(
    make_store: Callable[..., Store], caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store()
    cache = Cache(store)
    cache.put("a", entry("right"))
    store.save("a", store.load("a").replace(b"right", b"wrong"))  # type: ignore[union-attr]
    store.save("b", entry("b's answer").encode("not b"))  # another key's entry
    with caplog.at_level(logging.WARNING, "wrapper.cache"):
        assert cache.get("a") is None
        assert cache.get("b") is None
    assert len(caplog.records) == 1
    assert "is corrupt" in caplog.records[0].getMessage()
    cache.put("a", entry("right"))
    assert cache.get("a").completion().text == "right"  # type: ignore[union-attr]
    with pytest.raises(CacheError, match="is corrupt"):
        Cache(make_store(errors="raise")).get("b")  # the same file or server


def test_redis_down_is_a_miss_warned_once_per_outage_then_used_again(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not redis_server.answers():
        redis_server.start()
    tried: list[str] = []

    class Counted(RedisStore):
        def load(self, key: str) -> bytes | None:
            tried.append(key)
            return super().load(key)

    store = Counted(redis_server.url, timeout=0.5)
    cache = Cache(store)
    cache.put("a", entry("kept"))
    redis_server.kill()
    try:
        with caplog.at_level(logging.INFO, "wrapper.cache"):
            assert cache.get("a") is None  # down: a miss, warned
            assert cache.get("a") is None  # resting: the store is not even tried
            cache.put("b", entry("not kept"))
            assert tried == ["a"]
            redis_server.start()
            assert cache.get("a") is None  # still resting: RETRY_AFTER has not passed
            monkeypatch.setattr(cache, "_down_until", 0.0)
            cache.put("a", entry("kept again"))
            assert cache.get("a").completion().text == "kept again"  # type: ignore[union-attr]
    finally:
        store.close()
    levels = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
    assert levels[0] == ("WARNING", f"the response cache at {store.location} could not read an entry")
    assert [level for level, _ in levels] == ["WARNING", "INFO"]
    assert "works again" in caplog.records[-1].getMessage()


def test_the_redis_location_hides_the_password() -> None:
    store = RedisStore("redis://user:s3cret@127.0.0.1:1/0")
    assert "s3cret" not in store.location
    assert "s3cret" not in repr(store)
    assert store.location == "redis://user:***@127.0.0.1:1/0"


async def test_async_store_calls_run_off_the_event_loop(tmp_path: Path) -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    class Watched(SQLiteStore):
        def load(self, key: str) -> bytes | None:
            seen.append(threading.get_ident())
            return super().load(key)

        def save(self, key: str, value: bytes) -> None:
            seen.append(threading.get_ident())
            super().save(key, value)

    cache = cache_of(Watched(tmp_path / "c.db"))
    await cache.aput("a", entry("off the loop"))
    got = await cache.aget("a")
    assert got is not None
    assert got.completion().text == "off the loop"
    assert len(seen) == 2
    assert loop_thread not in seen
    assert cache_of(cache.store) is cache
    cache.store.close()


def test_the_pid_check_reopens_in_a_child_without_fork_hooks(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.db")
    store.save("a", b"1")
    pid = os.fork()
    if pid == 0:  # the child: its first use opens a connection of its own
        code = 0 if store.load("a") == b"1" else 1
        store.save("b", b"2")
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.load("b") == b"2"


def test_a_forked_child_opens_its_own_redis_connection(redis_url: str) -> None:
    import redis

    store = RedisStore(redis_url)
    store.save("a", b"1")  # the parent's connection, idle when it forks
    pid = os.fork()
    if pid == 0:  # the child: its first command connects anew, never on its parent's socket
        with redis.Redis.from_url(redis_url) as server:
            before = server.info("stats")["total_connections_received"]
            code = 0 if store.load("a") == b"1" else 1
            store.save("b", b"2")
            code |= 0 if server.info("stats")["total_connections_received"] == before + 1 else 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.load("b") == b"2"  # the parent's own connection still pairs its commands and replies
    store.close()


def test_a_redis_command_that_timed_out_never_hands_its_reply_to_the_next(
    redis_server: RedisServer, redis_url: str
) -> None:
    import redis

    store = RedisStore(redis_url, timeout=0.3)
    store.save("a", b"the answer of a")
    store.save("b", b"the answer of b")
    redis_server.pause()
    try:
        with pytest.raises(redis.TimeoutError):
            store.load("a")
    finally:
        redis_server.resume()
    time.sleep(0.1)  # the server answers the GET of "a" it was sent while frozen
    assert store.load("b") == b"the answer of b"
    store.close()


# --- python -m wrapper cache stats|clear -----------------------------------------------------------------


def test_the_command_line_shows_and_clears_a_store(
    make_store: Callable[..., Store], capsys: pytest.CaptureFixture[str]
) -> None:
    from wrapper._cli import main

    store = make_store()
    for name in ("a", "b", "c"):
        store.save(name, b"12345")
    where = str(store.path) if isinstance(store, SQLiteStore) else store.location
    assert main(["cache", "stats", where]) == 0
    out = capsys.readouterr().out
    assert out == f"store: {store.location}\nentries: 3\nsize: 15 bytes\nttl: none (entries never expire)\n"
    assert main(["cache", "clear", where]) == 0
    assert capsys.readouterr().out == f"removed 3 entries from {store.location}\n"
    assert store.stats().entries == 0


def test_the_command_line_creates_no_cache_and_reports_a_broken_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wrapper._cli import main

    missing = tmp_path / "typo.db"
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "stats", str(missing)])
    assert exit_.value.code == 2
    assert "there is no cache at" in capsys.readouterr().err
    assert not missing.exists()
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"not SQLite " * 100)
    assert main(["cache", "clear", str(broken)]) == 1
    assert "error: the cache at" in capsys.readouterr().err
    assert main(["cache", "stats", "redis://127.0.0.1:1/0"]) == 1  # nothing listens on port 1
    assert "failed" in capsys.readouterr().err
