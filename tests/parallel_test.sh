#!/usr/bin/env bash
# Data parallelism end to end (docs/PARALLEL.md): `mpirun -np N mnemo train` against one process
# on the same global batches, for models without batch norm (an MLP graph, the same with dropout,
# and an LSTM, whose time-major batches are sharded along their second axis): per-step losses and the weights after
# the run within 1e-5 relative for N = 2 and 3; two runs of N = 2 bitwise equal; a resumed run
# bitwise equal to an uninterrupted one; one rank with parallel.reduce_one_rank bitwise equal to one
# process; a batch that does not divide over the ranks is a clear
# error; a hung rank stops the others within the timeout; a killed rank ends the job and leaves the
# last checkpoint whole. Run by ctest as `parallel`: tests/parallel_test.sh MNEMO SOURCE_DIR
set -u
mnemo=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
# CI runs as root, which Open MPI refuses unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! command -v mpirun >/dev/null; then
  echo "FAIL mpirun not found (scripts/deps.sh installs openmpi-bin)"
  exit 1
fi
# Under the sanitizer build (scripts/test-sanitized.sh sets ASAN_OPTIONS), Open MPI's own allocations
# are still held at exit (in its components, dlopen'ed and unloaded by MPI_Finalize, so their frames
# cannot be matched by a suppression): leak detection is off in the processes mpirun starts; the
# rest of ASan and UBSan stays on there, and leaks stay checked in the runs without mpirun.
mpi() {
  local n=$1
  shift
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe -np "$n" "$@"
}
fails=0
passes=0
check() {  # check NAME COMMAND...: the command succeeds
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then
    if [ "$1" = compare ]; then echo "ok   $name: $(tail -1 <<<"$out")"; else echo "ok   $name"; fi
    passes=$((passes + 1))
  else
    echo "FAIL $name:"
    echo "$out" | tail -20
    fails=$((fails + 1))
  fi
}
# verdict NAME STATUS OUTPUT (tests/verdict.sh)
. "$src/tests/verdict.sh"

cat >"$tmp/mlp.yaml" <<EOF
model:
  type: graph
  inputs:
    data: {shape: [12, 20]}
    labels: {shape: [12], dtype: int32}
  params:
    w1: {shape: [64, 20], init: uniform, scale: 0.2}
    b1: {shape: [64], init: zeros}
    w2: {shape: [64, 32], init: uniform, scale: 0.2}
    w3: {shape: [5, 64], init: uniform, scale: 0.15}
    b3: {shape: [5], init: zeros}
  nodes:
    - {name: loss, op: softmax_cross_entropy, inputs: [logits, labels]}
    - {name: logits, op: fully_connected, inputs: [sum, w3, b3]}
    - {name: h1, op: fully_connected, inputs: [data, w1, b1]}
    - {name: a1, op: tanh, inputs: [h1]}
    - {name: halves, op: split, inputs: [a1], attrs: {axis: 1, parts: 2}}
    - {name: gate, op: sigmoid, inputs: ["halves:1"]}
    - {name: gated, op: mul, inputs: ["halves:0", gate]}
    - {name: h2, op: fully_connected, inputs: [gated, w2]}
    - {name: sum, op: add, inputs: [h2, a1]}
  loss: loss
  logits: logits
data: {source: synthetic, classes: 5, batch: 12, size: 360, eval: false}
optimizer: {lr: 0.1}
train: {steps: 8, metrics: METRICS}
parallel: {bucket_bytes: 4096}
memory: sublinear
EOF
cat >"$tmp/lstm.yaml" <<EOF
model: {type: lstm, layers: 2, hidden: 16, per_step: true}
data: {source: synthetic-seq, shape: [6, 5], classes: 4, batch: 12, size: 240, eval: false}
optimizer: {lr: 0.2}
train: {steps: 6, metrics: METRICS}
parallel: {bucket_bytes: 2048}
memory: share
EOF

# run NAME RANKS CONFIG [ARGS...]: trains, writing NAME.safetensors and NAME.jsonl
run() {
  local name=$1 n=$2 cfg=$3
  shift 3
  sed "s|METRICS|$tmp/$name.jsonl|" "$cfg" >"$tmp/$name.yaml"
  rm -f "$tmp/$name.jsonl"
  if [ "$n" = 1 ]; then
    "$mnemo" train "$tmp/$name.yaml" --checkpoint "$tmp/$name.safetensors" "$@"
  else
    mpi "$n" "$mnemo" train "$tmp/$name.yaml" --checkpoint "$tmp/$name.safetensors" "$@"
  fi
}

# compare A B TOL: per-step losses (metrics) and every tensor of the checkpoints within TOL relative
# (TOL 0: bitwise); prints the largest differences.
compare() {
  python3 - "$tmp/$1" "$tmp/$2" "$3" <<'PY'
import json, math, struct, sys
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        fmt = {"F32": "f", "F64": "d", "I32": "i", "I64": "q"}[v["dtype"]]
        data = raw[8 + n + lo:8 + n + hi]
        out[k] = struct.unpack("<%d%s" % (len(data) // struct.calcsize(fmt), fmt), data)
    return out
def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if '"loss"' in l]
ta, tb = tensors(a + ".safetensors"), tensors(b + ".safetensors")
la, lb = losses(a + ".jsonl"), losses(b + ".jsonl")
ok = sorted(ta) == sorted(tb) and len(la) == len(lb) and len(la) > 0
worst_w = 0.0
for k in ta:
    if k not in tb or len(ta[k]) != len(tb[k]):
        ok = False
        continue
    scale = max(max((abs(x) for x in ta[k]), default=0.0), 1e-30)
    d = max((abs(x - y) for x, y in zip(ta[k], tb[k])), default=0.0) / scale
    if not math.isfinite(d):
        ok = False
    worst_w = max(worst_w, d)
worst_l = max((abs(x - y) / max(abs(x), 1e-30) for x, y in zip(la, lb)), default=0.0)
if not (math.isfinite(worst_l) and worst_w <= tol and worst_l <= tol):
    ok = False
print("%d tensors, %d steps: largest relative difference %.3g (weights), %.3g (losses); tolerance %g"
      % (len(ta), len(la), worst_w, worst_l, tol))
sys.exit(0 if ok else 1)
PY
}

# The MLP with dropout: each rank draws the masks of its rows of the global batch (DropoutParams'
# offset); every rank drew the first rows' masks before.
sed -e 's/    - {name: halves, op: split, inputs: \[a1\]/    - {name: a1d, op: dropout, inputs: [a1], attrs: {p: 0.3}}\n    - {name: halves, op: split, inputs: [a1d]/' \
  "$tmp/mlp.yaml" >"$tmp/mlp_dropout.yaml"
grep -q 'op: dropout' "$tmp/mlp_dropout.yaml"
verdict "the dropout MLP's config has its dropout node" $? "$(sed -n 10,20p "$tmp/mlp_dropout.yaml")"
for model in mlp lstm mlp_dropout; do
  check "$model: one process" run "$model-1" 1 "$tmp/$model.yaml"
  for n in 2 3; do
    check "$model: $n ranks" run "$model-$n" "$n" "$tmp/$model.yaml"
    check "$model: $n ranks = one process within 1e-5" compare "$model-1" "$model-$n" 1e-5
  done
done
check "mlp: 2 ranks again" run mlp-2b 2 "$tmp/mlp.yaml"
check "mlp: two runs of 2 ranks bitwise equal" compare mlp-2 mlp-2b 0
# parallel.reduce_one_rank: one rank keeps the all-reduce path (its gathers are counted in the
# communication line), under `mpirun -np 1` (gathers over MPI) and without mpirun (no MPI), and
# trains bitwise as one process does (the mean over one rank is the gradient itself).
for how in mpirun plain; do
  sed "s|METRICS|$tmp/mlp-r1$how.jsonl|; s|bucket_bytes: 4096}|bucket_bytes: 4096, reduce_one_rank: true}|" "$tmp/mlp.yaml" >"$tmp/reduce1$how.yaml"
  if [ "$how" = mpirun ]; then
    out=$(mpi 1 "$mnemo" train "$tmp/reduce1$how.yaml" --checkpoint "$tmp/mlp-r1$how.safetensors" 2>&1)
  else
    out=$("$mnemo" train "$tmp/reduce1$how.yaml" --checkpoint "$tmp/mlp-r1$how.safetensors" 2>&1)
  fi
  rc=$?
  [ "$rc" -eq 0 ] && grep -q "data parallel: 1 rank (parallel.reduce_one_rank" <<<"$out" &&
    grep -Eq "communication: [1-9][0-9]* gradient gathers per step" <<<"$out"
  verdict "mlp: one rank with parallel.reduce_one_rank ($how) runs the all-reduce path (exit $rc)" $? "$out"
  check "mlp: reduce_one_rank ($how) bitwise equal to one process" compare mlp-1 "mlp-r1$how" 0
done

# Resume: 4 steps with a checkpoint, then on to 8 from it (the data position restored on every
# rank): the weights of an uninterrupted run.
sed "s|METRICS|$tmp/resumed.jsonl|" "$tmp/mlp.yaml" >"$tmp/resume.yaml"
echo "checkpoint: {dir: $tmp/ckpt}" >>"$tmp/resume.yaml"
check "mlp: 2 ranks, 4 steps, checkpoint" mpi 2 "$mnemo" train "$tmp/resume.yaml" --steps 4
check "mlp: resumed to 8 steps" mpi 2 "$mnemo" train "$tmp/resume.yaml" --resume "$tmp/ckpt/checkpoint.safetensors" \
  --checkpoint "$tmp/resumed.safetensors"
check "mlp: resumed run bitwise equal to the uninterrupted one" compare mlp-2 resumed 0

# A global batch that does not divide over the ranks: a clear error from every rank, no training.
out=$(mpi 5 "$mnemo" train "$tmp/mlp-1.yaml" --steps 1 2>&1)
rc=$?
[ "$rc" -ne 0 ] && grep -q "data.batch 12 does not divide over the 5 ranks" <<<"$out"
verdict "batch 12 over 5 ranks is an error (exit $rc)" $? "$out"

# fault NAME SIGNAL LINES: trains NAME.yaml on 2 ranks, sends SIGNAL to one rank once NAME.jsonl has
# LINES lines, and waits up to 30 s for mpirun to end; sets victim, stopped (1: it ended), rc
# (mpirun's status) and secs (from the signal to the end). Leftover processes are killed.
fault() {
  local name=$1 sig=$2 lines=$3 job t0 q
  mpi 2 "$mnemo" train "$tmp/$name.yaml" >"$tmp/$name.out" 2>&1 &
  job=$!
  victim=""
  for _ in $(seq 100); do
    sleep 0.1
    if [ -f "$tmp/$name.jsonl" ] && [ "$(wc -l <"$tmp/$name.jsonl")" -ge "$lines" ]; then
      for q in $(pgrep -f "$tmp/$name.yaml"); do [ "$(cat /proc/$q/comm 2>/dev/null)" = mnemo ] && victim=$q; done
      break
    fi
  done
  t0=$(date +%s)
  [ -n "$victim" ] && kill -"$sig" "$victim"
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  secs=$(($(date +%s) - t0))
  stopped=1
  kill -0 "$job" 2>/dev/null && stopped=0
  wait "$job"
  rc=$?
  [ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
  for q in $(pgrep -f "$tmp/$name.yaml"); do kill -9 "$q" 2>/dev/null; done
}

# A rank that hangs (stopped with SIGSTOP mid-run): the others stop within parallel.timeout_s with
# a message naming the rank and the collective, and mpirun ends the job with a failure.
sed "s|METRICS|$tmp/hang.jsonl|; s|steps: 6|steps: 1000000|; s|bucket_bytes: 2048|bucket_bytes: 2048, timeout_s: 3|" \
  "$tmp/lstm.yaml" >"$tmp/hang.yaml"
# Which collective times out depends on where the victim stopped: a gradient bucket's all-reduce or
# the step's loss sum (CI once saw the latter); the message names it either way.
fault hang STOP 1
if [ -n "$victim" ] && [ "$stopped" = 1 ] && [ "$rc" -ne 0 ] &&
  grep -Eq "rank [01] of 2: (the all-reduce of a gradient bucket|the loss of step [0-9]+ \(lr [^)]*\)) did not complete within 3 s \(parallel.timeout_s\)" "$tmp/hang.out"; then
  echo "ok   a hung rank stops the run in $secs s (timeout 3 s)"
  passes=$((passes + 1))
else
  echo "FAIL a hung rank (victim '$victim', ended $stopped, exit $rc):"
  grep -v '^\[#' "$tmp/hang.out" | tail -10
  fails=$((fails + 1))
fi

# A rank that dies (SIGKILL) while rank 0 checkpoints every 2 steps: mpirun ends the job with a
# failure, and the last checkpoint is whole: a run resumes from it.
sed "s|METRICS|$tmp/die.jsonl|; s|steps: 6|steps: 1000000|" "$tmp/lstm.yaml" >"$tmp/die.yaml"
echo "checkpoint: {dir: $tmp/die-ckpt, every: 2}" >>"$tmp/die.yaml"
fault die KILL 20
sed -i "s|steps: 1000000|steps: 1000|" "$tmp/die.yaml"
if [ -n "$victim" ] && [ "$stopped" = 1 ] && [ "$rc" -ne 0 ] &&
  out=$("$mnemo" train "$tmp/die.yaml" --resume "$tmp/die-ckpt/checkpoint.safetensors" --steps 1 2>&1) &&
  grep -q "resumed from" <<<"$out"; then
  echo "ok   a killed rank ends the job (exit $rc); the last checkpoint resumes: $(grep -o 'resumed from .*' <<<"$out" | sed "s|$tmp/||")"
  passes=$((passes + 1))
else
  echo "FAIL a killed rank (victim '$victim', ended $stopped, exit $rc):"
  grep -v '^\[#' "$tmp/die.out" | tail -10
  echo "${out:-}" | tail -5
  fails=$((fails + 1))
fi

# --save-init under mpirun: rank 0 writes the file, the others write nothing and succeed.
check "--save-init on 3 ranks succeeds (rank 0 writes)" mpi 3 "$mnemo" train "$tmp/mlp-1.yaml" --save-init "$tmp/init.safetensors"
check "the initial weights load" "$mnemo" train "$tmp/mlp-1.yaml" --init "$tmp/init.safetensors" --steps 1

# On a machine without a GPU, a data-parallel run on `cuda` stops on every rank with a clear error
# (NCCL is loaded, the id exchanged; opening the device fails), no hang.
if ! command -v nvidia-smi >/dev/null; then
  out=$(timeout 120 mpirun --oversubscribe -np 2 "$mnemo" train "$tmp/lstm-1.yaml" --device cuda 2>&1)
  rc=$?
  # (a build without the CUDA backend, e.g. the sanitizer build, says it has no NCCL)
  pattern="rank [01] of 2: opening NCCL on cuda:[01]: |data parallelism on a GPU needs NCCL, which this build does not have"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qE "$pattern" <<<"$out"; then
    echo "ok   --device cuda without a GPU: $(grep -m1 -oE "($pattern).{0,60}" <<<"$out")"
    passes=$((passes + 1))
  else
    echo "FAIL --device cuda without a GPU: exit $rc"
    echo "$out" | tail -8
    fails=$((fails + 1))
  fi
fi

# Under mpirun only train is data-parallel: bench (and grad, plan, curve) ran one copy per rank,
# two benches competing for the cores and two grads writing one file.
out=$(mpi 2 "$mnemo" bench "$tmp/mlp-1.yaml" --steps 1 --warmup 0 2>&1)
rc=$?
[ "$rc" -ne 0 ] && grep -q "mnemo bench under mpirun with 2 ranks: only 'mnemo train' runs data-parallel" <<<"$out"
verdict "bench under mpirun is refused (exit $rc)" $? "$out"

echo "parallel: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
