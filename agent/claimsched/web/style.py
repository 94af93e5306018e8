"""The pages' one stylesheet, inline, and the Content-Security-Policy that admits it by hash
and nothing else: no script, no remote style, images only as data: URLs."""

from __future__ import annotations

import base64
import hashlib

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",sans-serif;
margin:0;color:#1f2328;background:#fff}
header{display:flex;flex-wrap:wrap;gap:.3em 1.5em;align-items:baseline;padding:.6em 1.2em;
background:#24292f;color:#fff}
header a{color:#fff;text-decoration:none}header .brand{font-weight:600;font-size:1.1em}
header nav a{margin-right:1em}header .clock{margin-left:auto;color:#d0d7de;font-size:.9em}
main,footer{padding:1em 1.2em}h1{font-size:1.4em;margin:.2em 0 .6em}
h2{font-size:1.1em;margin:1.4em 0 .5em}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35em .6em;
border-bottom:1px solid #d8dee4;vertical-align:middle}th{font-weight:600;background:#f6f8fa}
td.num{text-align:right}
.scroll{overflow-x:auto;max-width:100%}.scroll.newest{direction:rtl}
.scroll.newest>*{direction:ltr;display:block;margin-right:auto}
code,pre{font-family:ui-monospace,"Liberation Mono",monospace;font-size:.92em}
pre.error{background:#fff8f8;border:1px solid #ffcecb;padding:.8em;white-space:pre-wrap;
overflow-wrap:anywhere}
.muted{color:#656d76}.small{font-size:.88em}.problem{color:#cf222e}
.state{display:inline-block;padding:0 .5em;border-radius:1em;font-size:.85em;border:1px solid}
.state.enabled{color:#1a7f37;border-color:#1a7f37}.state.suspended{color:#9a6700;border-color:#9a6700}
.state.disabled{color:#656d76;border-color:#8c959f}.state.invalid{color:#cf222e;border-color:#cf222e}
.alive{color:#1a7f37;font-weight:600}.dead{color:#656d76}
.health.healthy{color:#1a7f37}.health.unhealthy{color:#cf222e;font-weight:600}
.summary{margin:.2em 0 1em}.summary span{margin-right:1.5em}
.legend{display:flex;flex-wrap:wrap;gap:1em;margin:.4em 0 1em;font-size:.88em}
.legend svg{vertical-align:middle;margin-right:.3em}
dl.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.3em 1.2em}
dl.facts dt{font-weight:600}dl.facts dd{margin:0;min-width:0;overflow-wrap:anywhere}
.clockchange{color:#9a6700;font-weight:600}
svg .sq{stroke-width:1.5}
.done{fill:#2da44e;stroke:#2da44e}.failed{fill:#cf222e;stroke:#cf222e}
.skipped{fill:#afb8c1;stroke:#afb8c1}.missed{fill:#fff;stroke:#cf222e}
.late{fill:#ffd8b5;stroke:#bc4c00}
.running{fill:#0969da;stroke:#0969da}
.waiting{fill:#8250df;stroke:#8250df}.due,.any{fill:#fff;stroke:#8c959f}
svg .mark{fill:#1f2328;stroke:#fff;stroke-width:.75}
svg .axis{stroke:#d0d7de;stroke-width:1}svg text{font-size:11px;fill:#656d76}
.strips{display:flex;justify-content:flex-end}.strips svg{flex:none}
@media (max-width:720px){
main,footer{padding:.8em}
.scroll th,.scroll td{white-space:nowrap}.scroll td.small{white-space:normal;min-width:16em}
.scroll td.what{white-space:normal;min-width:9em}
table.overview thead{display:none}
table.overview,table.overview tbody,table.overview tr,table.overview td{display:block}
table.overview tr{padding:.5em 0;border-bottom:1px solid #d8dee4}
table.overview td{border:0;padding:.15em 0;white-space:normal}
table.overview td:nth-child(-n+3){display:inline-block;margin-right:.8em}
table.overview td.num{text-align:left}
table.overview td[data-label]::before{content:attr(data-label) ": ";font-weight:600}
.strips{flex-wrap:wrap;justify-content:flex-start;row-gap:3px}
}
"""

STYLE_SOURCE = "sha256-" + base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()

CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src '{STYLE_SOURCE}'; img-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
