"""Running the mnemo command from the benchmark tools (ab_bench.py, mode_bench.py, budget_bench.py)."""
import json
import os
import subprocess
import sys


def run(cmd, who, env=None):
    """stdout of `cmd`; exits naming `who`, the command and its stderr when it fails."""
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{who}: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def bench(mnemo, config, who, memory="", steps=10, warmup=2, threads=2, batch=0, device=""):
    """The JSON report of `mnemo bench CONFIG --json` with OMP_NUM_THREADS=threads (on `device` when
    given, else the config's)."""
    cmd = [mnemo, "bench", config, "--json", "--steps", str(steps), "--warmup", str(warmup)]
    if device:
        cmd += ["--device", device]
    if memory:
        cmd += ["--memory", memory]
    if batch:
        cmd += ["--batch", str(batch)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return json.loads(run(cmd, who, env).strip().splitlines()[-1])


def plan(mnemo, config, memory, who, threads=None, device=""):
    """The report of one memory mode from `mnemo plan CONFIG --memory MODE --json` (with
    OMP_NUM_THREADS=threads when given; planned for `device` when given, else the config's)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    cmd = [mnemo, "plan", config, "--memory", memory, "--json"] + (["--device", device] if device else [])
    return json.loads(run(cmd, who, env))["modes"][0]
