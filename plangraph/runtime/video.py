"""Writing episode frames to a video file (``plangraph eval --video out.mp4``).

Frames (uint8 ``[H, W, 3]``, from ``env.render()`` with ``render_mode="rgb_array"``) are
encoded as they come, never all held in memory, by imageio's PyAV plugin: ``.mp4``
(H.264), ``.gif`` (256-colour palette). Both libraries are the optional extra
``plangraph[video]`` (with pygame, which renders gymnasium's classic-control envs);
``tools/bootstrap`` installs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from plangraph.errors import BuildError

__all__ = ["VIDEO_CODECS", "VideoExtraMissing", "VideoWriter", "check_video_extra"]

VIDEO_CODECS: dict[str, tuple[str, str | None]] = {
    ".mp4": ("libx264", None),
    ".gif": ("gif", "rgb8"),
}
"""Suffix -> (PyAV codec, pixel format or ``None`` for the codec's default)."""

INSTALL_HINT = "pip install 'plangraph[video]' (imageio, av and pygame)"


class VideoExtraMissing(BuildError):
    """The optional video libraries (``plangraph[video]``) are not installed."""


def check_video_extra() -> None:
    """Raise ``VideoExtraMissing`` (naming the install command) unless imageio's PyAV
    plugin can be used."""
    try:
        import av  # noqa: F401
        import imageio.v3  # noqa: F401
    except ImportError as exc:
        raise VideoExtraMissing(
            f"writing a video needs the video extra ({exc.name} is missing): {INSTALL_HINT}"
        ) from None


class VideoWriter:
    """Appends frames to ``path`` at ``fps`` frames per second; a context manager.

    Raises:
        ValueError: the suffix of ``path`` is not one of ``VIDEO_CODECS``.
        VideoExtraMissing: imageio or av is not installed.
    """

    def __init__(self, path: str | Path, fps: float) -> None:
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in VIDEO_CODECS:
            raise ValueError(
                f"{self.path}: video format {suffix or '(none)'} not supported; use "
                + " or ".join(VIDEO_CODECS)
            )
        check_video_extra()
        import imageio.v3 as iio

        self.codec, self.pixel_format = VIDEO_CODECS[suffix]
        self.fps = fps
        self.frames = 0
        self._file: Any = iio.imopen(self.path, "w", plugin="pyav")
        self._started = False

    def append(self, frame: np.ndarray) -> None:
        """Encode one frame, uint8 ``[H, W, 3]`` (padded to even sides: H.264 needs them)."""
        frame = np.asarray(frame, dtype=np.uint8)
        pad_h, pad_w = frame.shape[0] % 2, frame.shape[1] % 2
        if pad_h or pad_w:
            frame = np.pad(frame, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge")
        if not self._started:
            kwargs = {} if self.pixel_format is None else {"pixel_format": self.pixel_format}
            self._file.init_video_stream(self.codec, fps=self.fps, **kwargs)
            self._started = True
        self._file.write_frame(frame)
        self.frames += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
