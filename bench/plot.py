"""PNG plots of the results: latency distributions, statements per fire by kind, spread."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _latency(ax: Any, series: dict[str, Sequence[float]], title: str) -> None:
    for label, seconds in series.items():
        if not seconds:
            continue
        ms = sorted(s * 1000 for s in seconds)
        ys = [(i + 1) / len(ms) for i in range(len(ms))]
        ax.step(ms, ys, where="post", label=f"{label} (n={len(ms)})")
    ax.axhline(0.99, color="grey", lw=0.6, ls=":")
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(left=0)
    ax.set_xlabel("fire-to-start latency, ms")
    ax.set_ylabel("fraction of occurrences")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _kinds(ax: Any, kinds: dict[str, dict[str, Any]], key: str, title: str) -> None:
    names = list(kinds)[:10]
    values = [kinds[n][key] or 0 for n in names]
    ax.barh(range(len(names)), values, color="tab:blue")
    ax.set_yticks(range(len(names)), [n[:28] for n in names], fontsize=8)
    ax.invert_yaxis()
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.3g}", va="center", fontsize=8)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)


def _replicas(ax: Any, reps: list[dict[str, Any]]) -> None:
    xs = range(len(reps))
    ax.bar(xs, [r["cpu_s_per_min"] for r in reps], color="tab:orange", label="CPU s/min")
    ax.set_ylabel("CPU s per minute")
    twin = ax.twinx()
    twin.plot(xs, [r["rss_mib_max"] for r in reps], "o", color="tab:green", label="RSS MiB")
    twin.set_ylabel("RSS MiB (max)")
    twin.set_ylim(bottom=0)
    ax.set_xticks(list(xs), [r["replica"] for r in reps], fontsize=7, rotation=90)
    ax.set_title("per replica: CPU (bars), RSS (dots)")


def steady(result: dict[str, Any], handler: Sequence[float], claim: Sequence[float],
           path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    p = result["params"]
    _latency(axes[0], {"handler start": handler, "claim (started_at)": claim},
             f"a: {p['jobs']} jobs {p['schedule']}, {p['replicas']} replicas")
    st = result["statements"]
    _kinds(axes[1], st["by_kind"], "per_fire", f"statements per fire: {st['per_fire']}")
    _replicas(axes[2], result["replicas"])
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def herd(result: dict[str, Any], offsets: Sequence[float], path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    p = result["params"]
    _latency(axes[0], {"handler start": offsets},
             f"b: {p['jobs']} jobs due at one instant, {p['replicas']} replicas")
    spread = result["spread"]["runs_per_replica"]
    fair = result["spread"]["fair_share"]
    names = list(spread)
    axes[1].bar(range(len(names)), [spread[n] for n in names], color="tab:blue")
    axes[1].axhline(fair, color="green", ls="--", label="fair share")
    axes[1].axhline(2 * fair, color="red", ls=":", label="2 x fair share")
    axes[1].set_xticks(range(len(names)), names, fontsize=7, rotation=90)
    axes[1].legend(fontsize=8)
    axes[1].set_title("runs per replica")
    st = result["statements"]
    _kinds(axes[2], st["by_kind"], "per_fire", f"statements per fire: {st['per_fire']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def drain(result: dict[str, Any], curve: Sequence[tuple[float, int]], path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    p = result["params"]
    axes[0].plot([at for at, _ in curve], [done for _, done in curve], color="tab:blue")
    axes[0].axhline(p["backlog"], color="grey", lw=0.6, ls=":")
    axes[0].set_xlabel("seconds after the backfill was queued")
    axes[0].set_ylabel("runs done")
    axes[0].set_title(f"f: {p['backlog']} backfilled runs, {p['replicas']} replicas x "
                      f"{p['max_concurrency']} slots: done in {result['drained_s']} s")
    axes[0].grid(alpha=0.3)
    spread = result["runs"]["per_replica"]
    names = list(spread)
    axes[1].bar(range(len(names)), [spread[n] for n in names], color="tab:blue")
    axes[1].axhline(p["backlog"] / max(len(names), 1), color="green", ls="--",
                    label="fair share")
    axes[1].set_xticks(range(len(names)), names, fontsize=7, rotation=90)
    axes[1].legend(fontsize=8)
    axes[1].set_title("runs per replica")
    st = result["statements"]
    _kinds(axes[2], st["by_kind"], "per_fire", f"statements per run: {st['per_run']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def throughput(result: dict[str, Any], per_second: Sequence[int], path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    axes[0].plot(range(len(per_second)), per_second, marker=".")
    axes[0].set_xlabel("second of the window")
    axes[0].set_ylabel("handler starts per second")
    axes[0].set_title("c: agent claims per second")
    axes[0].grid(alpha=0.3)
    rates = {"agents (claims/s)": result["agents"]["claims_per_s"]}
    for label, entry in result["pgbench"].items():
        rates[f"pgbench {label}"] = entry["rows_per_s"]
    axes[1].barh(range(len(rates)), list(rates.values()), color="tab:purple")
    axes[1].set_yticks(range(len(rates)), list(rates), fontsize=8)
    axes[1].invert_yaxis()
    axes[1].set_xscale("log")
    axes[1].set_title(f"rows/s (ratio {result['ratio']})")
    st = result["statements"]
    _kinds(axes[2], st["by_kind"], "per_fire", f"statements per claim: {st['per_claim']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def many(result: dict[str, Any], frequent: Sequence[float], daily: Sequence[float],
         path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    p = result["params"]
    _latency(axes[0], {"@every 1s..60s": frequent, "daily": daily},
             f"e: {p['jobs']:,} schedules, {p['replicas']} replicas")
    _replicas(axes[1], result["replicas"])
    changes = result["changes"]
    cx = range(len(changes))
    axes[2].bar(cx, [c["visible_s"] or 0 for c in changes], color="tab:blue")
    axes[2].axhline(1.0, color="grey", lw=0.8, ls=":")
    for x, c in zip(cx, changes, strict=True):
        axes[2].text(x, c["visible_s"] or 0, f"{c['rows_per_replica']:g} rows", ha="center",
                     va="bottom", fontsize=8)
    axes[2].set_xlabel("change")
    axes[2].set_ylabel("s until every replica read it")
    axes[2].set_title("schedule change visible (rows read per replica)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def status(result: dict[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    sizes = result["sizes"]
    labels = [str(s["schedules"]) for s in sizes]
    xs = range(len(sizes))
    axes[0].bar([x - 0.2 for x in xs], [s["cold_s"] for s in sizes], 0.4, label="first (cold)")
    axes[0].bar([x + 0.2 for x in xs], [s["warm_s"]["mean"] for s in sizes], 0.4,
                label="later (warm)")
    axes[0].set_xticks(list(xs), labels)
    axes[0].set_xlabel("schedules")
    axes[0].set_ylabel("seconds per refresh")
    axes[0].legend()
    axes[0].set_title("d: operator status refresh")
    axes[1].bar(xs, [s["statements_per_refresh"] for s in sizes], color="tab:green")
    axes[1].set_xticks(list(xs), labels)
    axes[1].set_xlabel("schedules")
    axes[1].set_title("statements per refresh")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def web_render(result: dict[str, Any], path: Path) -> None:
    pages = result["pages"]
    labels = [p["path"] if len(p["path"]) < 22 else p["path"][:20] + "…" for p in pages]
    xs = range(len(pages))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    params = result["params"]
    axes[0].bar(xs, [p["median_s"] * 1000 for p in pages], color="tab:blue")
    for x, p in zip(xs, pages, strict=True):
        axes[0].text(x, p["median_s"] * 1000, f"{p['median_s'] * 1000:.0f}", ha="center",
                     va="bottom", fontsize=8)
    axes[0].axhline(1000, color="grey", lw=0.8, ls=":")
    axes[0].set_xticks(list(xs), labels, fontsize=8, rotation=15)
    axes[0].set_ylabel("median GET, ms")
    axes[0].set_title(f"claimsched web: {params['schedules']} schedules, "
                      f"{result['setup']['runs']:,} runs")
    axes[1].bar(xs, [p["statements_per_get"] for p in pages], color="tab:green")
    axes[1].set_xticks(list(xs), labels, fontsize=8, rotation=15)
    axes[1].set_title("statements per GET")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
