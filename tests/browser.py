"""Headless Chromium for report tests: screenshot a page and read its DOM and console errors.

Chromium comes from the OS (Debian: ``apt-get install chromium``); the flags are those that work
on a machine without network (no background networking, no sync, no component updates).
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
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


#: WebGL in software (Model Explorer draws its graph with three.js): without these, headless
#: Chromium has no WebGL context and the graph never appears.
WEBGL_FLAGS = ["--enable-unsafe-swiftshader", "--use-angle=swiftshader"]


def render_frames(
    urls: Sequence[str], screenshot: Path, wait: float, width: int = 2400, height: int = 900
) -> list[str]:
    """Screenshot the pages at ``urls`` side by side, ``wait`` seconds after they started loading;
    return the console error lines.

    For single-page apps (Model Explorer) that load their data after the page's load event:
    ``--screenshot`` fires at that event, and ``--virtual-time-budget`` never ends while a page
    holds a request open (Model Explorer's event stream). So the pages sit in iframes of a page
    that also loads an image this helper's server answers only after ``wait`` seconds, which
    holds the load event, and the screenshot, until then. No DevTools protocol needed."""
    binary = chromium()
    assert binary, "no Chromium binary"
    frame_width = width // len(urls)
    frames = "".join(
        f'<iframe src="{url}" style="border:0;width:{frame_width}px;height:{height}px"></iframe>'
        for url in urls
    )
    page = (
        f'<html><body style="margin:0;display:flex;overflow:hidden">{frames}'
        f'<img src="/wait" width="1" height="1" style="position:absolute"></body></html>'
    ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.startswith("/wait"):
                time.sleep(wait)
                body, kind = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", "image/gif"
            else:
                body, kind = page, "text/html"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as profile:
            shot = subprocess.run(
                [
                    binary,
                    *[f for f in FLAGS if f != "--disable-gpu"],
                    *WEBGL_FLAGS,
                    f"--user-data-dir={profile}",
                    "--enable-logging=stderr",
                    "--v=0",
                    f"--window-size={width},{height}",
                    f"--screenshot={screenshot}",
                    f"http://127.0.0.1:{server.server_address[1]}/",
                ],
                capture_output=True,
                text=True,
                timeout=wait + 120,
                check=False,
            )
    finally:
        server.shutdown()
        server.server_close()
    return [
        line
        for line in shot.stderr.splitlines()
        if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)
    ]


def colour_pixels(
    png: Path,
    rgb: tuple[int, int, int],
    tolerance: int = 12,
    box: tuple[int, int, int, int] | None = None,
) -> int:
    """How many pixels of the screenshot (or of its ``box``: left, top, right, bottom) are
    within ``tolerance`` of ``rgb``."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    if box is not None:
        image = image.crop(box)
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
