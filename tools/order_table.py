#!/usr/bin/env python3
# The schedule-order table of docs/REPRODUCTION.md "Schedule order": per config and mode, the
# live-bytes peak of PyTorch's order (updates-last), the default and greedy orders, and the bound.
#   python3 tools/order_table.py CONFIG...   (run from the repository root, after scripts/build.sh)
import json, subprocess, sys
cfgs = sys.argv[1:]
print("| config | batch | mode | updates-last peak | default peak | greedy peak | bound | default vs updates-last | greedy vs default |")
print("|---|---|---|---|---|---|---|---|---|")
for cfg in cfgs:
    for mode in ["share", "sublinear"]:
        r = {}
        for o in ["updates-last", "greedy"]:
            out = subprocess.run(["./build/mnemo", "plan", cfg, "--memory", mode, "--order", o, "--json"], capture_output=True, text=True, check=True).stdout
            j = json.loads(out)
            r[o] = j["modes"][0]["order"]
            batch = j["batch"]
        ul, d, g = r["updates-last"]["peak_bytes"], r["greedy"]["default_peak_bytes"], r["greedy"]["peak_bytes"]
        b = r["greedy"]["bound_bytes"]
        M = 2**20
        print(f"| {cfg} | {batch} | {mode} | {ul/M:.1f} MiB | {d/M:.1f} MiB | {g/M:.1f} MiB | {b/M:.1f} MiB | {100*(d-ul)/ul:+.1f}% | {100*(g-d)/d:+.1f}% |")
