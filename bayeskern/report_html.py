"""The HTML pieces of the reports, and printing a report to PDF.

The page and its style, escaping, tables, embedded figures, and headless Chromium's PDF print.

Shared by the single-model report (:mod:`bayeskern.report`) and the comparison report
(:mod:`bayeskern.report_compare`).
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from bayeskern.runs import atomic_write

__all__ = ["find_chromium", "export_pdf"]

_CSS = """
body{font-family:system-ui,Segoe UI,Helvetica,Arial,sans-serif;max-width:1000px;margin:2em auto;
color:#222;line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;font-size:.88em;margin:.6em 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.ok{background:#e7f6e7;border-left:5px solid #2a2;padding:.6em 1em}
.bad{background:#fdeaea;border-left:5px solid #c22;padding:.6em 1em}
.warn{background:#fff6e0;border-left:5px solid #e90;padding:.6em 1em}
img{max-width:100%;height:auto}.muted{color:#666;font-size:.85em}
.caption{font-size:.92em;color:#333;margin-top:.2em}
"""


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def _fig_html(fig_or_ax, alt: str) -> str:
    fig = getattr(fig_or_ax, "figure", fig_or_ax)
    if isinstance(fig_or_ax, np.ndarray):
        fig = fig_or_ax.flat[0].figure
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)  # a no-op for detached figures; frees a panel drawn through pyplot
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _table(rows, header) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{_e(_fmt(v))}</td>" for v in r) + "</tr>")
    return "".join(out) + "</table>"


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{v:.4g}"
    return str(v)


def _page(title: str, parts: list[str]) -> str:
    """Return the HTML page: a Content-Security-Policy forbidding any fetch, the CSS, ``parts``."""
    head = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "img-src data:; style-src 'unsafe-inline'\">"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
    )
    return head + "\n".join(parts) + "</body></html>"


def _version() -> str:
    from bayeskern._version import __version__

    return __version__


def find_chromium() -> str | None:
    """Return the path of a Chromium/Chrome executable, or ``None`` if absent.

    ``$BAYESKERN_CHROMIUM`` or the first of ``chromium``, ``chromium-browser``,
    ``google-chrome`` on ``PATH``.
    """
    import os
    import shutil

    env = os.environ.get("BAYESKERN_CHROMIUM")
    if env:
        return env if Path(env).is_file() else shutil.which(env)
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def export_pdf(html_path, pdf_path, *, timeout: float = 120.0) -> Path:
    """Print a (self-contained) HTML report to PDF with headless Chromium's ``--print-to-pdf``.

    The PDF is written to a temporary file and renamed onto ``pdf_path`` (atomic). Raises
    ``FileNotFoundError`` naming what to install when no Chromium is found, and
    ``RuntimeError`` when Chromium fails to produce a PDF.
    """
    import subprocess
    import tempfile

    html_path = Path(html_path)
    if not html_path.is_file():
        raise FileNotFoundError(f"html_path {str(html_path)!r} does not exist")
    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError(
            "PDF export needs headless Chromium, which was not found: install it (Debian/"
            "Ubuntu: apt-get install chromium) or set BAYESKERN_CHROMIUM to its executable; "
            "the HTML report itself was written"
        )

    def write(tmp):
        with tempfile.TemporaryDirectory() as profile:
            cmd = [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--no-pdf-header-footer",
                f"--print-to-pdf={tmp}",
                html_path.resolve().as_uri(),
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if not tmp.is_file() or tmp.stat().st_size == 0 or tmp.read_bytes()[:5] != b"%PDF-":
            last = (res.stderr.strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"Chromium did not produce a PDF (exit {res.returncode}): {last}")

    atomic_write(pdf_path, write, suffix=".pdf")
    return Path(pdf_path)
