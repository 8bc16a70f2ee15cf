"""The suite's ``redis-server`` (``tests/redis_server.py``): real, emptied per test, and able to go away
and come back on its port, as the outage tests of the Redis stores need."""

from __future__ import annotations

import socket

from redis_server import RedisServer


def _command(port: int, *words: str) -> bytes:
    request = f"*{len(words)}\r\n" + "".join(f"${len(w)}\r\n{w}\r\n" for w in words)
    with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
        connection.sendall(request.encode())
        return connection.recv(256)


def test_a_test_gets_an_empty_real_server(redis_url: str, redis_server: RedisServer) -> None:
    assert redis_url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert _command(redis_server.port, "DBSIZE") == b":0\r\n"
    assert _command(redis_server.port, "SET", "k", "v") == b"+OK\r\n"
    assert _command(redis_server.port, "INFO", "server").startswith(b"$")  # a real server answers INFO


def test_what_the_last_test_stored_is_gone(redis_url: str, redis_server: RedisServer) -> None:
    assert _command(redis_server.port, "GET", "k") == b"$-1\r\n"


def test_a_stopped_server_comes_back_on_its_port(redis_url: str, redis_server: RedisServer) -> None:
    port = redis_server.port
    redis_server.stop()
    assert not redis_server.answers()
    redis_server.start()
    assert redis_server.port == port
    assert redis_server.answers()
    redis_server.kill()
    assert not redis_server.answers()


def test_the_next_test_finds_it_running_again(redis_url: str, redis_server: RedisServer) -> None:
    assert redis_server.answers()
