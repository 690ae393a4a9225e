#!/usr/bin/env bash
# Step times of mnemo against PyTorch (CPU, float32) on the same models, in one run; prints a markdown table.
#
#   tools/compare_pytorch.sh [MNEMO [THREADS]] [--mnemo PATH] [--threads T] [--steps N] [--warmup K] [--rounds R]
#                            [--python PATH] [--models resnet56,lstm,lstm-ops-head,lstm-fused,lstm-fused-head,densenet121,inception_v3]
#
# MNEMO: the mnemo binary (default build/mnemo; a relative path is tried from the current directory, then from the
# repository root). THREADS (default 2): OMP_NUM_THREADS for mnemo and torch.set_num_threads for PyTorch.
# --steps/--warmup (default 10/2) go to both `mnemo bench` and tools/bench_pytorch.py. --python (default
# /work/venv-torch/bin/python, or $TORCH_PYTHON) must have torch installed. Builds and installs nothing.
#
# Models (--models, default resnet56,lstm): configs/resnet56-cifar.yaml (--memory share) against bench_pytorch.py
# resnet56, configs/bench-lstm-2x512.yaml against lstm (mnemo's default head, fused on the CPU; lstm-ops-head:
# configs/bench-lstm-2x512-ops-head.yaml, model.head: ops, a classifier and a loss per step; lstm-fused:
# configs/bench-lstm-2x512-fused.yaml, model.cell: fused; lstm-fused-head: configs/bench-lstm-2x512-fused-head.yaml,
# model.head: fused; all against the same PyTorch LSTM), configs/table2/densenet121.yaml and inception_v3.yaml at
# batch 8 against torchvision's densenet121 and inception_v3. Every round runs, per model, mnemo (memory share and
# sublinear) and PyTorch three times: with glibc's defaults, with the tuned allocator (MALLOC_MMAP_THRESHOLD_ and
# MALLOC_TRIM_THRESHOLD_ raised, so freed buffers are kept) and with jemalloc preloaded (Debian's libjemalloc.so.2,
# which mnemo's binary links), plus PyTorch's checkpointed variants with the tuned
# allocator (resnet56: checkpoint_sequential with 4 segments and every block checkpointed; lstm: time segments of
# 8 steps), alternating so that machine noise hits all. The table gives per variant the median over the rounds
# (with two rounds: their mean) of each run's median step time, and every round.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cmdline=$(printf '%q ' "$0" "$@")

mnemo=build/mnemo threads=2 steps=10 warmup=2 rounds=2 model_list=resnet56,lstm
python=${TORCH_PYTHON:-/work/venv-torch/bin/python}
usage() { sed -n '4,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "compare_pytorch: $*" >&2; exit 1; }
positional=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --mnemo) mnemo=${2:?--mnemo needs a path}; shift 2 ;;
    --threads) threads=${2:?--threads needs a number}; shift 2 ;;
    --steps) steps=${2:?--steps needs a number}; shift 2 ;;
    --warmup) warmup=${2:?--warmup needs a number}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --python) python=${2:?--python needs a path}; shift 2 ;;
    --models) model_list=${2:?--models needs a list}; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "compare_pytorch: unknown option $1" >&2; usage ;;
    *) case $positional in
         0) mnemo=$1 ;;
         1) threads=$1 ;;
         *) echo "compare_pytorch: too many arguments ($1)" >&2; usage ;;
       esac
       positional=$((positional + 1)); shift ;;
  esac
done
for v in threads steps rounds; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v must be a positive integer, got '${!v}'"
done
[[ $warmup =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer, got '$warmup'"

if [[ $mnemo != /* && ! -e $mnemo && -e $root/$mnemo ]]; then mnemo=$root/$mnemo; fi
[[ -x $mnemo && -f $mnemo ]] || die "no mnemo binary at '$mnemo'; build it first (cmake -S $root -B $root/build -G Ninja && ninja -C $root/build mnemo) or pass its path"
mnemo=$(cd "$(dirname "$mnemo")" && pwd)/$(basename "$mnemo")
[[ -x $python ]] || die "no Python at '$python' (the PyTorch virtual environment is missing). Create it with:
  python3 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch numpy
or pass --python PATH (or TORCH_PYTHON=PATH) to a Python that has torch."
torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
  die "torch cannot be imported by '$python'. Install it with:
  $python -m pip install torch numpy
(or create the environment: python3 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch numpy)"

cd "$root"
IFS=, read -r -a models <<<"$model_list"
declare -A config=([resnet56]=configs/resnet56-cifar.yaml [lstm]=configs/bench-lstm-2x512.yaml
                   [lstm-ops-head]=configs/bench-lstm-2x512-ops-head.yaml
                   [lstm-fused]=configs/bench-lstm-2x512-fused.yaml [lstm-fused-head]=configs/bench-lstm-2x512-fused-head.yaml
                   [densenet121]=configs/table2/densenet121.yaml [inception_v3]=configs/table2/inception_v3.yaml)
declare -A batch_of=([densenet121]=8 [inception_v3]=8)
for m in "${models[@]}"; do [[ -n ${config[$m]:-} ]] || die "unknown model $m (resnet56, lstm, lstm-ops-head, lstm-fused, lstm-fused-head, densenet121, inception_v3)"; done
results=$(mktemp)
trap 'rm -f "$results"' EXIT

# PyTorch's glibc settings that keep freed buffers instead of returning them to the OS (its "tuned allocator").
tuned_env=(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184)
# ... and jemalloc preloaded (PyTorch's CPU performance guide recommends it; mnemo's binary links it): Debian's
# libjemalloc2, which scripts/deps.sh installs with libjemalloc-dev.
jemalloc=$(ldconfig -p 2>/dev/null | awk '/libjemalloc\.so\.2 / {print $NF; exit}')
[[ -n $jemalloc ]] || die "libjemalloc.so.2 not found (install libjemalloc2: scripts/deps.sh does)"
jemalloc_env=(LD_PRELOAD="$jemalloc")
declare -A ckpts=([resnet56]="sequential:4 block" [lstm]="segment:8" [lstm-ops-head]="segment:8" [lstm-fused]="segment:8" [lstm-fused-head]="segment:8")
declare -A torch_model=([lstm-ops-head]=lstm [lstm-fused]=lstm [lstm-fused-head]=lstm)  # the PyTorch model a mnemo config is compared with (default: its name)
run_mnemo() {  # model round mode
  local bflag=()
  [[ -n ${batch_of[$1]:-} ]] && bflag=(--batch "${batch_of[$1]}")
  echo "round $2/$rounds: mnemo $1 --memory $3 ..." >&2
  line=$(OMP_NUM_THREADS=$threads "$mnemo" bench "${config[$1]}" --memory "$3" --steps "$steps" --warmup "$warmup" "${bflag[@]}" --json) ||
    die "mnemo bench ${config[$1]} --memory $3 failed"
  printf '{"framework": "mnemo", "variant": "mnemo %s", "model": "%s", "round": %d, "result": %s}\n' "$3" "$1" "$2" "$line" >>"$results"
}
run_torch() {  # model round allocator(0: glibc defaults, 1: tuned glibc, 2: jemalloc) checkpoint
  local bflag=() envs=() label="PyTorch"
  [[ -n ${batch_of[$1]:-} ]] && bflag=(--batch "${batch_of[$1]}")
  [[ $3 == 1 ]] && envs=("${tuned_env[@]}") && label="PyTorch tuned"
  [[ $3 == 2 ]] && envs=("${jemalloc_env[@]}") && label="PyTorch jemalloc"
  [[ $4 != none ]] && label="$label checkpoint $4"
  echo "round $2/$rounds: $label $1 ..." >&2
  line=$(env "${envs[@]}" "$python" tools/bench_pytorch.py --model "${torch_model[$1]:-$1}" --threads "$threads" --steps "$steps" --warmup "$warmup" \
         --checkpoint "$4" "${bflag[@]}") || die "tools/bench_pytorch.py --model $1 --checkpoint $4 failed"
  printf '{"framework": "pytorch", "variant": "%s", "model": "%s", "round": %d, "result": %s}\n' "$label" "$1" "$2" "$line" >>"$results"
}

# Every round runs, per model: mnemo share, PyTorch (glibc's defaults), mnemo sublinear, PyTorch with the tuned
# allocator, PyTorch with jemalloc, then PyTorch's checkpointed variants (tuned allocator), so that machine noise
# hits all of them.
for ((r = 1; r <= rounds; ++r)); do
  for m in "${models[@]}"; do
    run_mnemo "$m" "$r" share
    run_torch "$m" "$r" 0 none
    run_mnemo "$m" "$r" sublinear
    run_torch "$m" "$r" 1 none
    run_torch "$m" "$r" 2 none
    for c in ${ckpts[$m]:-}; do run_torch "$m" "$r" 1 "$c"; done
  done
done

cpu=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*:[[:space:]]*//' || true)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ $commit != unknown ]] && ! git -C "$root" diff --quiet HEAD 2>/dev/null; then commit="$commit (with local changes)"; fi

"$python" - "$results" "$threads" <<'EOF'
import json, statistics, sys
path, threads = sys.argv[1], int(sys.argv[2])
runs = [json.loads(l) for l in open(path)]
names = {"resnet56": "ResNet-56 CIFAR (3x32x32, 10 classes)", "lstm": "LSTM 2x512, 64 steps, in 50, 5000 classes",
         "lstm-ops-head": "LSTM 2x512 as above, mnemo with model.head: ops",
         "lstm-fused": "LSTM 2x512 as above, mnemo with model.cell: fused",
         "lstm-fused-head": "LSTM 2x512 as above, mnemo with model.head: fused",
         "densenet121": "DenseNet-121 (3x224x224, 1000 classes)", "inception_v3": "Inception-v3 (3x299x299, 1000 classes)"}
models = list(dict.fromkeys(r["model"] for r in runs))
notes, targets = [], []
def per_round(m, v):
    return [x["result"]["step_seconds_median"] for x in runs if x["model"] == m and x["variant"] == v]
print("| model | batch | variant | s/step | / PyTorch tuned | / mnemo share | every round (s/step) |")
print("|---|---:|---|---:|---:|---:|---|")
for m in models:
    variants = list(dict.fromkeys(x["variant"] for x in runs if x["model"] == m))
    med = {v: statistics.median(per_round(m, v)) for v in variants}
    batches = {x["result"]["batch"] for x in runs if x["model"] == m}
    got = {x["result"]["threads"] for x in runs if x["model"] == m}
    if got != {threads}:
        notes.append("%s ran with %s threads, not %d" % (m, sorted(got), threads))
    if len(batches) != 1:
        notes.append("%s: the batch differs between variants (%s)" % (m, sorted(batches)))
    for v in variants:
        print("| %s | %s | %s | %.4f | %.2f | %.2f | %s |" % (names[m], "/".join(map(str, sorted(batches))), v, med[v],
              med[v] / med["PyTorch tuned"], med[v] / med["mnemo share"], ", ".join("%.4f" % t for t in per_round(m, v))))
    for what, a, b, limit in (("mnemo share / PyTorch tuned", "mnemo share", "PyTorch tuned", 0.75),
                              ("mnemo share / PyTorch jemalloc", "mnemo share", "PyTorch jemalloc", 0.75),
                              ("mnemo share / PyTorch (glibc defaults)", "mnemo share", "PyTorch", None),
                              ("mnemo sublinear / mnemo share", "mnemo sublinear", "mnemo share", 1.25)):
        rs = [x / y for x, y in zip(per_round(m, a), per_round(m, b))]
        t = "%s: %s %.2fx (rounds %s)" % (m, what, statistics.median(rs), ", ".join("%.2f" % x for x in rs))
        if limit is not None:
            t += "; target <= %.2fx: %s" % (limit, "met" if statistics.median(rs) <= limit else "NOT met")
        targets.append(t)
print()
print("s/step: the median over the rounds of each run's median step time; the ratios divide those medians; "
      "\"PyTorch tuned\": MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184 (glibc keeps freed "
      "buffers); \"PyTorch jemalloc\": LD_PRELOAD of Debian's libjemalloc.so.2 (mnemo's binary links it); checkpointed "
      "PyTorch variants run with the tuned allocator.")
print()
print("Ratios per round (each round's own runs):")
for t in targets:
    print("- " + t)
mem = []
for m in models:
    p = [x["result"] for x in runs if x["model"] == m and x["variant"] == "PyTorch tuned"]
    for v in ("mnemo share", "mnemo sublinear"):
        q = [x["result"] for x in runs if x["model"] == m and x["variant"] == v]
        mem.append("%s %s: planned total %.1f MiB (%.3g GFLOP/step by its cost model)"
                   % (m, v, q[0]["total_bytes"] / 2**20, q[0]["step_flops"] / 1e9))
    for v in [v for v in dict.fromkeys(x["variant"] for x in runs if x["model"] == m) if v.startswith("PyTorch")]:
        r = [x["result"] for x in runs if x["model"] == m and x["variant"] == v]
        mem.append("%s %s: peak RSS growth %.1f MiB" % (m, v, max(x["peak_rss_growth_bytes"] for x in r) / 2**20))
print()
print("Memory (not like for like: planned arena vs. measured RSS growth): " + "; ".join(mem) + ".")
for n in notes:
    print("\nWARNING: " + n)
EOF
echo
echo "Command: \`$cmdline\` (steps $steps, warmup $warmup, rounds $rounds; mnemo: $mnemo)"
echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); CPU: ${cpu:-unknown} ($(nproc) CPUs online); torch $torch_version; mnemo commit $commit"
