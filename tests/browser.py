"""Headless Chromium for report tests: screenshot a page and read its DOM and console errors.

Chromium comes from the OS (Debian: ``apt-get install chromium``); the flags are those that work
on a machine without network (no background networking, no sync, no component updates).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium() -> str | None:
    """Path of a Chromium/Chrome binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render(
    page: Path, screenshot: Path, width: int = 1600, height: int = 1000
) -> tuple[str, list[str]]:
    """Screenshot ``page`` and return (the DOM after scripts ran, console error lines)."""
    binary = chromium()
    assert binary, "no Chromium binary"
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        common = [
            binary,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--window-size={width},{height}",
        ]
        shot = subprocess.run(
            [*common, f"--screenshot={screenshot}", url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        dom = subprocess.run(
            [*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False
        )
    console = [
        line
        for line in (shot.stderr + dom.stderr).splitlines()
        if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)
    ]
    return dom.stdout, console


def colour_pixels(png: Path, rgb: tuple[int, int, int], tolerance: int = 12) -> int:
    """How many pixels of the screenshot are within ``tolerance`` of ``rgb``."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    r0, g0, b0 = rgb
    data = image.tobytes()
    return sum(
        1
        for i in range(0, len(data), 3)
        if abs(data[i] - r0) <= tolerance
        and abs(data[i + 1] - g0) <= tolerance
        and abs(data[i + 2] - b0) <= tolerance
    )


def bluish_pixels(png: Path) -> int:
    """Pixels clearly blue (the box plots' lines and translucent fills, the trend dots)."""
    from PIL import Image

    data = Image.open(png).convert("RGB").tobytes()
    return sum(
        1
        for i in range(0, len(data), 3)
        if data[i + 2] > data[i] + 60 and data[i + 2] > data[i + 1] + 25
    )
