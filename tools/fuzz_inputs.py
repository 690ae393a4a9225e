#!/usr/bin/env python3
"""Replays mutated inputs against the mnemo command and checks its contract on bad input.

    tools/fuzz_inputs.py [--mnemo build/mnemo] [--seed S] [--configs N] [--checkpoints N]
                         [--data N] [--onnx N] [--cli N] [--kills N] [--timeout SECONDS] [--memory-gb G]

Every run must end in success (exit 0) or a clear error (exit 1..127 with "error" in its output):
never a signal (SIGSEGV, SIGFPE, SIGABRT, SIGKILL by the kernel's OOM killer...), never a hang past
--timeout seconds, never more than --memory-gb of peak RSS (each child runs under that address-space
limit, so an allocation beyond it must fail cleanly). Inputs, all seeded:
  configs      the shipped configs mutated: values replaced by extremes (0, -1, 2^31, 2^63, 1e308,
               nan, strings), lines deleted, duplicated or swapped, bytes flipped, files cut short;
               run with `mnemo plan` (parse, build, plan) and, for small ones, `mnemo train --steps 1`;
  checkpoints  a real checkpoint with flipped, cut, extended or rewritten bytes: `train --resume`;
  data         tiny Fashion-MNIST idx files with damaged headers, sizes and gzip streams: `train`;
  onnx         the ONNX fixtures (tests/fixtures/onnx) with replaced, deleted and inserted bytes,
               and (every third file) with one node attribute's integer set to an edge value (0,
               -1, 2^31, 2^62, -2^63: a stride of 0 once ended mnemo with SIGFPE inside ONNX's shape
               inference); `mnemo plan MODEL.onnx` and `mnemo import`;
  cli          random subcommand and flag lines (unknown flags, bad numbers, huge values);
  kills        `train` with a checkpoint and metrics every step, killed (SIGKILL) at random times:
               afterwards no temporary file may remain once the next save ran, every metrics
               line must parse and the checkpoint must load.
Prints every failure (command, exit status, output tail) and a summary; exits 1 if any failed.
"""
import argparse
import gzip
import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXTREMES = ["0", "-1", "1", "2147483648", "4294967316", "9223372036854775807", "99999999999999999999",
            "1e308", "-1e308", "nan", ".inf", "0.5", "'x'", "[]", "{}", "null", "true", "1000000", "-0"]


class Stats:
    def __init__(self):
        self.runs = 0
        self.ok = 0
        self.errors = 0
        self.failures = []   # (kind, cmd, why, output)
        self.max_rss_mb = 0.0

    def fail(self, kind, cmd, why, out):
        self.failures.append((kind, cmd, why, out[-800:]))


def limit_memory(gb):
    def apply():
        if gb > 0:  # 0: no limit (a sanitized build maps terabytes of shadow memory)
            limit = int(gb * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.setsid()
    return apply


def run(stats, kind, cmd, args, cwd=None):
    """Runs cmd; checks the contract; returns (returncode, output)."""
    stats.runs += 1
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=cwd, env=env, preexec_fn=limit_memory(args.memory_gb))
    try:
        out, _ = proc.communicate(timeout=args.timeout)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        hung = True
    out = out.decode("utf-8", "replace")
    rc = proc.returncode
    elapsed = time.monotonic() - t0
    if hung:
        stats.fail(kind, cmd, f"hung past {args.timeout} s", out)
    elif "Sanitizer" in out or "runtime error:" in out:  # a sanitized build's report (ASan exits 1 by default)
        stats.fail(kind, cmd, "sanitizer report", out)
    elif rc < 0:
        stats.fail(kind, cmd, f"killed by signal {signal.Signals(-rc).name}", out)
    elif rc >= 128:
        stats.fail(kind, cmd, f"exit {rc} (a signal's code)", out)
    elif rc != 0 and "error" not in out.lower():
        stats.fail(kind, cmd, f"exit {rc} without an error message", out)
    elif rc == 0:
        stats.ok += 1
    else:
        stats.errors += 1
    return rc, out, elapsed


def child_max_rss_mb():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


# ---- configs -------------------------------------------------------------------------------------
def mutate_config(text, rng):
    lines = text.splitlines()
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if not lines:
            break
        i = rng.randrange(len(lines))
        if op < 0.5:  # replace a value
            line = lines[i]
            if ":" in line:
                key, _, _ = line.partition(":")
                lines[i] = key + ": " + rng.choice(EXTREMES)
            else:
                lines[i] = line + " " + rng.choice(EXTREMES)
        elif op < 0.6:
            del lines[i]
        elif op < 0.7:
            lines.insert(i, lines[i])  # duplicate key
        elif op < 0.8:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op < 0.9:
            b = bytearray("\n".join(lines).encode())
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
            lines = b.decode("utf-8", "replace").splitlines()
        else:
            lines = lines[: rng.randrange(len(lines) + 1)]
    out = "\n".join(lines) + "\n"
    # Keep runs short: the models' own sizes are what the planner handles, but training is cut.
    return out


def fuzz_configs(stats, args, rng, tmp):
    sources = []
    for name in sorted(os.listdir(os.path.join(ROOT, "configs"))):
        if name.endswith(".yaml"):
            with open(os.path.join(ROOT, "configs", name)) as f:
                sources.append((name, f.read()))
    for k in range(args.configs):
        name, text = sources[k % len(sources)]
        path = os.path.join(tmp, f"c{k}.yaml")
        with open(path, "w", errors="replace") as f:
            f.write(mutate_config(text, rng))
        run(stats, "config", [args.mnemo, "plan", path, "--memory", rng.choice(["share", "sublinear", "recursive", "optimal", "none"])], args)
        if name == "mlp-graph.yaml" and (k // len(sources)) % 4 == 0:  # a small model: train it too
            run(stats, "config", [args.mnemo, "train", path, "--steps", "1", "--no-eval"], args, cwd=tmp)
        progress("configs", k + 1, args.configs)


# ---- checkpoints ---------------------------------------------------------------------------------
def fuzz_checkpoints(stats, args, rng, tmp):
    cfg = os.path.join(tmp, "ck.yaml")
    with open(cfg, "w") as f:
        f.write("model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 16, eval_size: 4}\n"
                "train: {steps: 2, seed: 1, threads: 1}\n")
    good = os.path.join(tmp, "good.safetensors")
    rc, out, _ = run(stats, "checkpoint", [args.mnemo, "train", cfg, "--steps", "1", "--checkpoint", good, "--no-eval"], args)
    if rc != 0:
        stats.fail("checkpoint", ["setup"], "could not make the checkpoint to damage", out)
        return
    data = open(good, "rb").read()
    header_len = struct.unpack("<Q", data[:8])[0]
    for k in range(args.checkpoints):
        b = bytearray(data)
        op = rng.random()
        if op < 0.3:    # flip bytes in the data
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(8 + header_len, len(b))
                b[i] ^= 1 << rng.randrange(8)
        elif op < 0.5:  # flip bytes in the header
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(0, 8 + header_len)
                b[i] = rng.randrange(256)
        elif op < 0.65:  # cut
            b = b[: rng.randrange(len(b))]
        elif op < 0.75:  # extend
            b += bytes(rng.randrange(1, 100))
        elif op < 0.85:  # a huge header size
            b[:8] = struct.pack("<Q", rng.choice([len(b), 1 << 40, (1 << 64) - 1, header_len + 1]))
        else:           # rewrite a header value
            h = b[8: 8 + header_len].decode("utf-8", "replace")
            for token in ["\"F32\"", "\"step\"", "mnemo-checkpoint-1", "[4,3,3,3]", "data_offsets"]:
                if token in h and rng.random() < 0.5:
                    h = h.replace(token, rng.choice(["\"F16\"", "\"x\"", "[99999999999,3]", "[]", "-1", "1e400"]), 1)
            hb = h.encode()
            b = bytearray(struct.pack("<Q", len(hb))) + hb + b[8 + header_len:]
        path = os.path.join(tmp, f"bad{k}.safetensors")
        with open(path, "wb") as f:
            f.write(b)
        run(stats, "checkpoint", [args.mnemo, "train", cfg, "--resume", path, "--steps", "2", "--no-eval"], args)
        progress("checkpoints", k + 1, args.checkpoints)


# ---- ONNX files ----------------------------------------------------------------------------------
# Protocol-buffer wire format, enough to rewrite one integer of a node attribute (ModelProto.graph
# = 7, GraphProto.node = 1, NodeProto.attribute = 5, AttributeProto.i = 3 and .ints = 8) without
# the onnx package.
def pb_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def pb_enc_varint(v):
    v &= (1 << 64) - 1  # int64: negative values as their two's complement
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_fields(b):
    """A message's fields as [field number, wire type, value]: an int for varints, else bytes."""
    out, i = [], 0
    while i < len(b):
        key, i = pb_varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = pb_varint(b, i)
        elif wt == 2:
            n, i = pb_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        out.append([num, wt, v])
    return out


def pb_encode(fields):
    out = bytearray()
    for num, wt, v in fields:
        out += pb_enc_varint(num << 3 | wt)
        if wt == 0:
            out += pb_enc_varint(v)
        elif wt == 2:
            out += pb_enc_varint(len(v)) + bytes(v)
        else:
            out += bytes(v)
    return bytes(out)


def onnx_attribute_edge(model, rng):
    """`model` with one integer of one node attribute (i or ints) set to an edge value; None when
    it has no such attribute."""
    m = pb_fields(model)
    gk = next((k for k, f in enumerate(m) if f[0] == 7 and f[1] == 2), None)
    if gk is None:
        return None
    g = pb_fields(m[gk][2])
    spots = []  # (node field, attribute field, attribute's integer field)
    for nk, nf in enumerate(g):
        if nf[0] != 1 or nf[1] != 2:
            continue
        for ak, af in enumerate(pb_fields(nf[2])):
            if af[0] == 5 and af[1] == 2:
                spots += [(nk, ak, ik) for ik, f in enumerate(pb_fields(af[2])) if f[0] in (3, 8)]
    if not spots:
        return None
    nk, ak, ik = rng.choice(spots)
    node = pb_fields(g[nk][2])
    attr = pb_fields(node[ak][2])
    edge = rng.choice([0, -1, 2 ** 31, 2 ** 62, -2 ** 63])
    f = attr[ik]
    if f[1] == 2:  # packed ints
        vals, i = [], 0
        while i < len(f[2]):
            v, i = pb_varint(f[2], i)
            vals.append(v)
        if vals:
            vals[rng.randrange(len(vals))] = edge
        f[2] = b"".join(pb_enc_varint(v) for v in vals)
    else:
        f[2] = edge & ((1 << 64) - 1)
    node[ak][2] = pb_encode(attr)
    g[nk][2] = pb_encode(node)
    m[gk][2] = pb_encode(g)
    return pb_encode(m)


def fuzz_onnx(stats, args, rng, tmp):
    fixtures = os.path.join(ROOT, "tests", "fixtures", "onnx")
    sources = [open(os.path.join(fixtures, n), "rb").read() for n in ("small.onnx", "resnet18_structure.onnx")]
    for k in range(args.onnx):
        b = bytearray(sources[k % len(sources)])
        edited = onnx_attribute_edge(bytes(b), rng) if k % 3 == 2 else None
        if edited is not None:
            b = bytearray(edited)
        for _ in range(0 if edited is not None else rng.randint(1, 8)):
            i = rng.randrange(len(b))
            op = rng.random()
            if op < 0.6:
                b[i] = rng.randrange(256)
            elif op < 0.8:
                del b[i: i + rng.randint(1, 16)]
            else:
                b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        path = os.path.join(tmp, f"m{k}.onnx")
        with open(path, "wb") as f:
            f.write(b)
        if k % 2:
            run(stats, "onnx", [args.mnemo, "import", path, "-o", os.path.join(tmp, f"m{k}.yaml")], args)
        else:
            run(stats, "onnx", [args.mnemo, "plan", path, "--memory", "share"], args)
        progress("onnx", k + 1, args.onnx)


# ---- data files ----------------------------------------------------------------------------------
def idx_images(n, count, side=28, magic=0x803):
    # At most 1 MiB of pixels: headers may claim more than the file holds (that is the point).
    return struct.pack(">IIII", magic, n, side, side) + bytes(min(count * side * side, 1 << 20))


def idx_labels(n, count, magic=0x801):
    return struct.pack(">II", magic, n) + bytes(i % 10 for i in range(count))


def fuzz_data(stats, args, rng, tmp):
    for k in range(args.data):
        d = os.path.join(tmp, f"fm{k}")
        os.makedirs(d, exist_ok=True)
        n = 8
        files = {
            "train-images-idx3-ubyte.gz": gzip.compress(idx_images(n, n)),
            "train-labels-idx1-ubyte.gz": gzip.compress(idx_labels(n, n)),
            "t10k-images-idx3-ubyte.gz": gzip.compress(idx_images(4, 4)),
            "t10k-labels-idx1-ubyte.gz": gzip.compress(idx_labels(4, 4)),
        }
        victim = rng.choice(sorted(files))
        b = bytearray(files[victim])
        op = k % 8
        if op == 0:
            files[victim] = gzip.compress(idx_images(10_000_000, n) if "images" in victim else idx_labels(10_000_000, n))
        elif op == 1:
            files[victim] = bytes(b[: rng.randrange(len(b))])  # cut (trailer or stream)
        elif op == 2:
            b[rng.randrange(10, len(b))] ^= 0xff
            files[victim] = bytes(b)
        elif op == 3:
            raw = idx_images(n, n, magic=0x804) if "images" in victim else idx_labels(n, n, magic=0x803)
            files[victim] = gzip.compress(raw)
        elif op == 4:
            files[victim] = gzip.compress(idx_images(n, n, side=rng.choice([0, 27, 65535])) if "images" in victim
                                          else idx_labels(n, n - 1))
        elif op == 5:
            del files[victim]
        elif op == 6:
            files[victim] = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        else:
            files[victim] = gzip.compress(idx_labels(n, n)[:8] + bytes([200] * n)) if "labels" in victim else bytes(b[:-4])
        for name, content in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(content)
        cfg = os.path.join(tmp, f"fm{k}.yaml")
        with open(cfg, "w") as f:
            f.write("model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                    f"data: {{source: fashion-mnist, path: {d}, batch: 4}}\ntrain: {{steps: 1, threads: 1}}\n")
        run(stats, "data", [args.mnemo, "train", cfg], args)
        progress("data", k + 1, args.data)


# ---- command lines -------------------------------------------------------------------------------
def fuzz_cli(stats, args, rng, tmp):
    cfg = os.path.join(ROOT, "configs", "mlp-graph.yaml")
    subs = ["train", "plan", "bench", "grad", "curve", "graph", "ops", "nope", ""]
    flags = ["--memory", "--steps", "--device", "--resume", "--init", "--batch", "--warmup", "--values", "--vary",
             "--out", "--json", "--force", "--eager", "--no-eval", "--weights", "--format", "--training", "--bogus"]
    values = ["share", "sublinear", "recursive=0", "recursive=999999", "-1", "0", "99999999999999999999", "1e9", "abc",
              "cpu", "cuda:77", "tpu", "/dev/zero", "/proc/self/status", "/nonexistent", tmp, "", "depth", "1,2,x",
              "text", "mlp", "2"]
    for k in range(args.cli):
        sub = rng.choice(subs)
        cmd = [args.mnemo] + ([sub] if sub else [])
        if sub in ("train", "plan", "bench", "grad"):
            cmd.append(rng.choice([cfg, cfg, "/dev/null", "/nonexistent.yaml", tmp]))
        for _ in range(rng.randint(0, 4)):
            cmd.append(rng.choice(flags))
            if rng.random() < 0.8:
                cmd.append(rng.choice(values))
        if sub in ("train", "bench") and "--steps" not in cmd:
            cmd += ["--steps", "1"]
        run(stats, "cli", cmd, args, cwd=tmp)
        progress("cli", k + 1, args.cli)


# ---- kills ---------------------------------------------------------------------------------------
def fuzz_kills(stats, args, rng, tmp):
    d = os.path.join(tmp, "kills")
    os.makedirs(d, exist_ok=True)
    metrics = os.path.join(d, "metrics.jsonl")
    cfg = os.path.join(d, "k.yaml")
    with open(cfg, "w") as f:
        f.write("model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 16, eval_size: 4}\n"
                f"train: {{steps: 100000, seed: 1, threads: 1, metrics: {metrics}}}\n"
                f"checkpoint: {{dir: {d}/ck, every: 1}}\n")
    ck = os.path.join(d, "ck", "checkpoint.safetensors")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in range(args.kills):
        cmd = [args.mnemo, "train", cfg, "--no-eval"] + (["--resume", ck] if os.path.exists(ck) else [])
        stats.runs += 1
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        time.sleep(rng.uniform(0.3, 1.5))
        p.kill()
        _, err = p.communicate()
        if p.returncode not in (-signal.SIGKILL, 0):
            stats.fail("kill", cmd, f"ended {p.returncode} before the kill", err.decode("utf-8", "replace"))
        if not os.path.exists(metrics):  # killed before the first record
            stats.ok += 1
            continue
        steps = []
        with open(metrics, "rb") as f:
            for i, line in enumerate(f.read().split(b"\n")):
                if not line:
                    continue
                try:
                    steps.append(json.loads(line)["step"])
                except (ValueError, KeyError):
                    stats.fail("kill", cmd, f"metrics line {i + 1} does not parse after kill {k + 1}", line.decode("utf-8", "replace"))
        # Resumed runs cut the file back to their checkpoint: the steps stay 1, 2, 3, ... once each.
        if steps != list(range(1, len(steps) + 1)):
            stats.fail("kill", cmd, f"metrics steps after kill {k + 1} are not 1..n once each", str(steps[-10:]))
        stats.ok += 1
        progress("kills", k + 1, args.kills)
    # One more run that saves (two steps past the last recorded one): stale temporary files of the
    # killed runs must be gone afterwards, and the checkpoint must load.
    last = 0
    if os.path.exists(metrics):
        with open(metrics) as f:
            for line in f:
                try:
                    last = max(last, json.loads(line).get("step", 0))
                except ValueError:
                    pass
    run(stats, "kill", [args.mnemo, "train", cfg, "--no-eval", "--steps", str(last + 2)] + (["--resume", ck] if os.path.exists(ck) else []),
        args)
    stray = [n for n in os.listdir(os.path.join(d, "ck")) if ".tmp." in n] if os.path.isdir(os.path.join(d, "ck")) else []
    if stray:
        stats.fail("kill", ["ls", d + "/ck"], f"{len(stray)} temporary files left: {stray[:3]}", "")
    if os.path.exists(ck):
        rc, out, _ = run(stats, "kill", [args.mnemo, "train", cfg, "--resume", ck, "--steps", "1", "--no-eval"], args)
        if rc != 0 and "nothing to train" not in out:
            stats.fail("kill", ["resume"], "the last checkpoint does not load", out)


def progress(what, i, n):
    if sys.stdout.isatty() or i == n or i % 200 == 0:
        print(f"\r{what}: {i}/{n}", end="\n" if i == n else "", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mnemo", default=os.path.join(ROOT, "build", "mnemo"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--configs", type=int, default=3000)
    p.add_argument("--checkpoints", type=int, default=500)
    p.add_argument("--data", type=int, default=48)
    p.add_argument("--onnx", type=int, default=400)
    p.add_argument("--cli", type=int, default=200)
    p.add_argument("--kills", type=int, default=40)
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--memory-gb", type=float, default=4.0)
    args = p.parse_args()
    args.mnemo = os.path.abspath(args.mnemo)  # some runs start in the scratch directory
    if not os.access(args.mnemo, os.X_OK):
        sys.exit(f"fuzz_inputs: {args.mnemo} is not an executable (build first: scripts/build.sh)")
    rng = random.Random(args.seed)
    stats = Stats()
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="mnemo-fuzz-")
    try:
        fuzz_configs(stats, args, rng, tmp)
        fuzz_checkpoints(stats, args, rng, tmp)
        fuzz_data(stats, args, rng, tmp)
        fuzz_onnx(stats, args, rng, tmp)
        fuzz_cli(stats, args, rng, tmp)
        fuzz_kills(stats, args, rng, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for kind, cmd, why, out in stats.failures:
        print(f"FAIL [{kind}] {why}: {' '.join(map(str, cmd))}\n  {out.strip()[-400:]}")
    rss = child_max_rss_mb()
    print(f"fuzz_inputs: seed {args.seed}: {stats.runs} runs ({args.configs} configs, {args.checkpoints} checkpoints, "
          f"{args.data} data sets, {args.onnx} ONNX files, {args.cli} command lines, {args.kills} kills) in {time.monotonic() - t0:.0f} s: "
          f"{stats.ok} succeeded, {stats.errors} clear errors, {len(stats.failures)} failures "
          f"(signals, aborts, hangs past {args.timeout:g} s, messageless exits); largest child peak RSS {rss:.0f} MiB "
          f"(limit {args.memory_gb:g} GiB address space)")
    sys.exit(1 if stats.failures or (args.memory_gb > 0 and rss > args.memory_gb * 1024) else 0)


if __name__ == "__main__":
    main()
