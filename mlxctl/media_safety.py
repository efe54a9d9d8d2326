"""Opening media bytes a client sent with FFmpeg (PyAV) so that only those bytes are ever read.

A few of FFmpeg's demuxers are not formats but pointers to other files: a concat script
(``ffconcat version 1.0`` / ``file secret.mp4``), an HLS or DASH playlist, an image-sequence
pattern, a VobSub index (it opens the ``.sub`` beside it), an SDP/RTSP/RTP description, an IMF
composition, a filter graph. Uploaded as a video or an audio file, they would make FFmpeg open
files or URLs on the server and hand back what it found there. Video (vision/video.py) and
audio (audio/decode.py) both open client bytes through :func:`open_input`, which sets two locks:

- ``protocol_whitelist=none``: FFmpeg may open no file or URL at all, and nested demuxers
  inherit that. The bytes themselves come through PyAV's own I/O, which needs no protocol.
- ``format_whitelist``: every demuxer of this FFmpeg except :data:`DENIED_DEMUXERS`, so those
  are refused after probing, before their header (which opens the named files) is read. The
  opened format's name is checked against the list again, in case a build ignores the option.
"""

from __future__ import annotations

import functools
import io
from typing import Any

DENIED_DEMUXERS = frozenset({
    "concat",  # ffconcat scripts: "file NAME" lines are opened
    "hls", "applehttp",  # m3u8 playlists: segments are opened by name or URL
    "dash",  # MPD manifests: the same
    "image2",  # image sequences: a file name pattern is opened
    "vobsub",  # .idx opens its .sub by name
    "imf",  # IMF compositions: the assets they name are opened
    "sdp", "rtp", "rtsp", "sap",  # session descriptions: network streams are opened
    "lavfi",  # filter graphs: movie= and amovie= open files
    "avisynth", "vapoursynth",  # scripts, run
    "dvdvideo",  # a DVD by path
    "ffmetadata",  # FFmpeg metadata, not media: nothing to decode
})
REFUSED = ("it is a playlist, script or image sequence that names other files (concat, HLS, DASH, "
           "image2 and the like), which is refused: send the media itself")


class RefusedMedia(ValueError):
    """Bytes FFmpeg reads as one of :data:`DENIED_DEMUXERS`; callers report it as bad input."""


def open_input(data: bytes) -> Any:
    """``data`` opened as a PyAV input container (the caller closes it, e.g. ``with``); a
    :class:`RefusedMedia` for a denied demuxer; PyAV's own errors for anything unreadable."""
    import av

    try:
        container = av.open(io.BytesIO(data), mode="r", options=dict(_options()))
    except av.ArgumentError:  # EINVAL: what the format whitelist answers for a denied demuxer
        raise RefusedMedia(f"FFmpeg would not open it: {REFUSED}") from None
    check_format(container)
    return container


def check_format(container: Any) -> None:
    """A RefusedMedia (the container closed) when ``container`` was opened by a denied demuxer."""
    name = container.format.name or ""
    if set(name.split(",")) & DENIED_DEMUXERS:
        container.close()
        raise RefusedMedia(f"FFmpeg reads it as {name}: {REFUSED}")


@functools.cache
def _options() -> tuple[tuple[str, str], ...]:
    """The open options: no protocols, and every input format this PyAV's FFmpeg has but the denied."""
    import av

    allowed: set[str] = set()
    for short in av.formats_available:
        fmt = av.ContainerFormat(short)
        names = set((fmt.name or "").split(",")) if fmt.is_input else set()
        if names and not names & DENIED_DEMUXERS:
            allowed |= names
    return (("protocol_whitelist", "none"), ("format_whitelist", ",".join(sorted(allowed))))
