"""The sampler demo's run in the browser beside the same run on the CPU: eight schools'
exported sampler (4 chains, 1,000 warm-up transitions, then 1,000 draws, in calls of 100
transitions), sampled by onnxruntime-web (WebAssembly, one thread, in a Web Worker of
Debian's headless Chromium) and by ONNX Runtime's CPU build (one thread), in interleaved
rounds from the same seeds. Seconds of sampling, wall and CPU (Chromium's processes' for
the page; the export and loading reported apart), and bulk ESS (the smallest over the
variables) per second.

Run: python benchmarks/sampler_browser.py   (needs the `pymc` extra, playwright, Debian's
chromium and `npm ci --ignore-scripts` in pt_onnxscript/demos/web)
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import arviz as az
import numpy as np
import psutil

from pt_onnxscript.demos import sampler
from pt_onnxscript.demos.web import server

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def min_ess(outputs, meta) -> float:
    posterior = {
        entry["name"]: np.swapaxes(np.asarray(outputs[entry["output"]]), 0, 1)
        for entry in meta["posterior"]
    }
    return float(az.ess(az.from_dict(posterior=posterior), method="bulk").to_array().min())


def children_cpu() -> float:
    """CPU seconds of this process's children so far: Chromium's processes (its renderer
    runs the page's Web Worker)."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    site = Path(tempfile.mkdtemp(prefix="sampler-bench-"))
    start = time.perf_counter()
    sampler.build_site(site)
    meta = json.loads((site / "sampler.json").read_text())
    path = site / "model" / "sampler.onnx"
    print(f"export: {time.perf_counter() - start:.1f} s ({path.stat().st_size / 1000:.0f} kB)")
    httpd, url = server.serve(site)
    rows = {"onnxruntime-web (Chromium, 1 thread)": [], "ONNX Runtime CPU (1 thread)": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=ARGS
        )
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(f"{url}/sampler.html")
        page.wait_for_function("window.__ready === true", timeout=120_000)
        print(f"page and model loaded in {time.perf_counter() - start:.1f} s")
        for seed in range(1, args.rounds + 1):
            cpu = children_cpu()
            result = page.evaluate("([s, d]) => window.sampleInBrowser(s, d)", [seed, args.draws])
            outputs = {
                name: np.array(v["data"]).reshape(v["dims"])
                for name, v in result["outputs"].items()
            }
            rows["onnxruntime-web (Chromium, 1 thread)"].append(
                (result["seconds"], children_cpu() - cpu, min_ess(outputs, meta))
            )
            wall, cpu = time.perf_counter(), time.process_time()
            outputs = sampler.run(path, meta, seed, args.draws)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            rows["ONNX Runtime CPU (1 thread)"].append((wall, cpu, min_ess(outputs, meta)))
        browser.close()
    httpd.shutdown()
    print(
        f"\neight schools, {meta['chains']} chains x {args.draws} draws after {meta['tune']} "
        f"warm-up transitions; medians of {args.rounds} interleaved rounds\n"
    )
    print("| runtime | wall s | CPU s | min bulk ESS | ESS per wall s |")
    print("|---|---|---|---|---|")
    for name, runs in rows.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        ess = statistics.median(r[2] for r in runs)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {ess:.0f} | {ess / wall:.0f} |")


if __name__ == "__main__":
    main()
