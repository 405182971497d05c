"""Progress bars on stderr: tqdm where installed, else a plain line every few percent."""

from __future__ import annotations

import sys
from typing import Any


class _Plain:
    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.done, self.shown = max(1, total), desc, 0, -1

    def update(self, n: int = 1) -> None:
        self.done += n
        pct = 100 * self.done // self.total
        if pct // 10 != self.shown:
            self.shown = pct // 10
            print(f"{self.desc}: {self.done}/{self.total}", file=sys.stderr, flush=True)

    def close(self) -> None:
        return None


def progress(total: int, desc: str) -> Any:
    """A bar with ``update(n)`` and ``close()`` on stderr."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _Plain(total, desc)
    return tqdm(total=total, desc=desc, file=sys.stderr, mininterval=1.0, leave=True)
