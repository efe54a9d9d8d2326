"""The prefix cache's disk tier: blocks evicted from memory spill to a directory.

Layout: one safetensors file per block (``blocks/<hash>.safetensors``) and a SQLite index
(``index.sqlite``) of what is there: hash, parent, fingerprint, tokens, size, a CRC-32 of the
file and when it was last used.

Crash safety: a block file is written to a temporary name, flushed and ``fsync``-ed, then renamed
into place, and only then indexed. A crash before the rename leaves a temporary file (removed at
the next start); between the rename and the index commit, an unindexed file (also removed). A
lookup checks the row's fingerprint and tokens, the file's checksum and the hash and fingerprint
recorded inside the file, so a torn, truncated or foreign file is dropped and counted, never
served. The index lives with the files and survives restarts; rows of other fingerprints (other
models, dtypes, quantisations) are never returned.

Not thread-safe: the engine thread owns it.
"""

from __future__ import annotations

import zlib
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx

from mlxctl.errors import BadInputError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS blocks (
    hash BLOB PRIMARY KEY,
    parent BLOB,
    fingerprint TEXT NOT NULL,
    tokens BLOB NOT NULL,
    nbytes INTEGER NOT NULL,
    checksum TEXT NOT NULL,
    last_used REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS blocks_lru ON blocks (last_used);
CREATE INDEX IF NOT EXISTS blocks_parent ON blocks (parent);
"""


@dataclass(frozen=True)
class DiskBlock:
    parent: bytes | None
    tokens: tuple[int, ...]
    arrays: dict[str, mx.array]


def _pack_tokens(tokens: Sequence[int]) -> bytes:
    return b"".join(int(t).to_bytes(8, "little", signed=True) for t in tokens)


def _unpack_tokens(blob: bytes) -> tuple[int, ...]:
    return tuple(int.from_bytes(blob[i : i + 8], "little", signed=True) for i in range(0, len(blob), 8))


def _checksum(path: Path) -> str:
    """CRC-32 of the file: catches torn, truncated and flipped bytes at disk speed (a SHA-256
    here cost more than recomputing the KV on a GPU)."""
    crc = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(4 << 20), b""):
            crc = zlib.crc32(chunk, crc)
    return f"crc32:{crc:08x}"


class DiskTier:
    def __init__(self, directory: str | os.PathLike, max_bytes: int, fingerprint: str):
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.directory = Path(directory).expanduser()
        self.max_bytes = max_bytes
        self.fingerprint = fingerprint
        self._blocks_dir = self.directory / "blocks"
        try:
            self._blocks_dir.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.directory / "index.sqlite", isolation_level=None, check_same_thread=False)
            self._db.executescript(_SCHEMA)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        except (OSError, sqlite3.Error) as exc:
            raise BadInputError(f"cannot use cache directory {self.directory}: {exc}") from exc
        self._counts = Counter(disk_hits=0, disk_writes=0, disk_evictions=0, disk_errors=0)
        self._bytes = self._count = 0
        self._cleanup()

    # -- queries --------------------------------------------------------------------------------

    def __contains__(self, block_hash: object) -> bool:
        row = self._db.execute("SELECT 1 FROM blocks WHERE hash=? AND fingerprint=?",
                               (block_hash, self.fingerprint)).fetchone()
        return row is not None

    @property
    def bytes(self) -> int:
        """Bytes of every block in the directory (all fingerprints share the size cap)."""
        return self._bytes

    def __len__(self) -> int:
        """Blocks of this fingerprint."""
        return self._count

    def stats(self) -> dict:
        """Counters kept in memory, so any thread may read them without touching SQLite."""
        return {**self._counts, "disk_blocks": self._count, "disk_bytes": self._bytes, "disk_max_bytes": self.max_bytes,
                "cache_dir": str(self.directory)}

    def _recount(self) -> None:
        self._bytes = int(self._db.execute("SELECT COALESCE(SUM(nbytes), 0) FROM blocks").fetchone()[0])
        self._count = int(self._db.execute("SELECT COUNT(*) FROM blocks WHERE fingerprint=?",
                                           (self.fingerprint,)).fetchone()[0])

    # -- reads and writes -----------------------------------------------------------------------

    def get(self, block_hash: bytes, tokens: Sequence[int]) -> DiskBlock | None:
        """The block with this hash and these tokens, verified; None when absent or damaged."""
        row = self._db.execute(
            "SELECT parent, tokens, checksum FROM blocks WHERE hash=? AND fingerprint=?",
            (block_hash, self.fingerprint)).fetchone()
        if row is None:
            return None
        parent, blob, checksum = row
        want = tuple(int(t) for t in tokens)
        if _unpack_tokens(blob) != want:
            return None
        path = self._path(block_hash)
        try:
            if _checksum(path) != checksum:
                raise ValueError("checksum mismatch")
            arrays, meta = mx.load(str(path), return_metadata=True)
            if meta.get("hash") != block_hash.hex() or meta.get("fingerprint") != self.fingerprint:
                raise ValueError("file belongs to another block")
        except Exception:  # a damaged file is dropped, never served
            self._counts["disk_errors"] += 1
            self._drop(block_hash)
            return None
        self._db.execute("UPDATE blocks SET last_used=? WHERE hash=?", (time.time(), block_hash))
        self._counts["disk_hits"] += 1
        return DiskBlock(parent, want, arrays)

    def children(self, parent: bytes | None) -> list[tuple[bytes, tuple[int, ...]]]:
        """(hash, tokens) of every block of this fingerprint under ``parent`` (the checkpoints
        hanging off a block are found this way; ``get`` then verifies the one taken)."""
        rows = self._db.execute("SELECT hash, tokens FROM blocks WHERE parent IS ? AND fingerprint=?",
                                (parent, self.fingerprint)).fetchall()
        return [(bytes(h), _unpack_tokens(blob)) for h, blob in rows]

    def put(self, block_hash: bytes, parent: bytes | None, tokens: Sequence[int], arrays: dict[str, mx.array]) -> bool:
        """Write a block (atomically) unless it is there already; False when it does not fit."""
        if block_hash in self:
            self._db.execute("UPDATE blocks SET last_used=? WHERE hash=?", (time.time(), block_hash))
            return True
        path = self._path(block_hash)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                mx.save_safetensors(f, arrays, metadata={"hash": block_hash.hex(), "fingerprint": self.fingerprint})
                f.flush()
                os.fsync(f.fileno())
            nbytes = tmp.stat().st_size
            if nbytes > self.max_bytes:
                tmp.unlink(missing_ok=True)
                return False
            checksum = _checksum(tmp)
            os.replace(tmp, path)
        except OSError:
            self._counts["disk_errors"] += 1
            tmp.unlink(missing_ok=True)
            return False
        self._db.execute(
            "INSERT OR REPLACE INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?)",
            (block_hash, parent, self.fingerprint, _pack_tokens(tokens), nbytes, checksum, time.time()))
        self._bytes += nbytes
        self._count += 1
        self._counts["disk_writes"] += 1
        self._evict_to_budget()
        return True

    def clear(self) -> int:
        """Remove every block of this fingerprint; returns how many."""
        hashes = [h for (h,) in self._db.execute("SELECT hash FROM blocks WHERE fingerprint=?", (self.fingerprint,))]
        for h in hashes:
            self._drop(h)
        return len(hashes)

    def close(self) -> None:
        self._db.close()

    # -- housekeeping ---------------------------------------------------------------------------

    def _path(self, block_hash: bytes) -> Path:
        return self._blocks_dir / f"{block_hash.hex()}.safetensors"

    def _drop(self, block_hash: bytes) -> None:
        row = self._db.execute("SELECT nbytes, fingerprint FROM blocks WHERE hash=?", (block_hash,)).fetchone()
        self._db.execute("DELETE FROM blocks WHERE hash=?", (block_hash,))
        self._path(block_hash).unlink(missing_ok=True)
        if row is not None:
            self._bytes -= row[0]
            self._count -= row[1] == self.fingerprint

    def _evict_to_budget(self) -> None:
        while self.bytes > self.max_bytes:
            row = self._db.execute("SELECT hash FROM blocks ORDER BY last_used LIMIT 1").fetchone()
            if row is None:
                return
            self._drop(row[0])
            self._counts["disk_evictions"] += 1

    def _cleanup(self) -> None:
        """Remove what a crash left: temporary files, files no row names, rows with no file."""
        indexed = {h.hex() for (h,) in self._db.execute("SELECT hash FROM blocks")}
        for path in self._blocks_dir.iterdir():
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)
            elif path.suffix == ".safetensors" and path.stem not in indexed:
                path.unlink(missing_ok=True)
        on_disk = {p.stem for p in self._blocks_dir.glob("*.safetensors")}
        for h in indexed - on_disk:
            self._db.execute("DELETE FROM blocks WHERE hash=?", (bytes.fromhex(h),))
        self._recount()
        self._evict_to_budget()
