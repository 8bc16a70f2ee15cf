"""The batch command's progress: a tqdm bar with rate and ETA on a terminal, nothing otherwise."""

from __future__ import annotations

from typing import Any, Protocol, TextIO

__all__ = ["Progress", "progress"]


class Progress(Protocol):
    def advance(self, failed: int) -> None:
        """One more input finished; ``failed`` is the run's failure count so far."""

    def note(self, message: str) -> None:
        """Print a line (above the bar, if any)."""

    def close(self) -> None: ...


class _Quiet:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def advance(self, failed: int) -> None:
        pass

    def note(self, message: str) -> None:
        print(message, file=self._stream)

    def close(self) -> None:
        pass


class _Bar:
    def __init__(self, total: int | None, initial: int, stream: TextIO) -> None:
        from tqdm import tqdm  # only a terminal run pays for the import

        self._bar: Any = tqdm(total=total, initial=initial, unit="prompt", file=stream, dynamic_ncols=True)
        self._failed = 0
        self._stream = stream

    def advance(self, failed: int) -> None:
        if failed != self._failed:
            self._failed = failed
            self._bar.set_postfix(failed=failed, refresh=False)
        self._bar.update()

    def note(self, message: str) -> None:
        self._bar.write(message, file=self._stream)

    def close(self) -> None:
        self._bar.close()


def progress(stream: TextIO, show: bool | None, count: Any) -> Progress:
    """A bar on ``stream`` when ``show`` (``None``: when it is a terminal); ``count()`` gives total, done
    (total None: not known ahead, no ETA)."""
    if show is None:
        show = stream.isatty()
    if not show:
        return _Quiet(stream)
    total, initial = count()
    return _Bar(total, initial, stream)
