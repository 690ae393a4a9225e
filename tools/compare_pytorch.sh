#!/usr/bin/env bash
# Step times of mnemo against PyTorch (CPU, float32) on the same models, in one run; prints a markdown table.
#
#   tools/compare_pytorch.sh [MNEMO [THREADS]] [--mnemo PATH] [--threads T] [--steps N] [--warmup K] [--rounds R]
#                            [--python PATH] [--models resnet56,lstm,densenet121,inception_v3]
#
# MNEMO: the mnemo binary (default build/mnemo; a relative path is tried from the current directory, then from the
# repository root). THREADS (default 2): OMP_NUM_THREADS for mnemo and torch.set_num_threads for PyTorch.
# --steps/--warmup (default 10/2) go to both `mnemo bench` and tools/bench_pytorch.py. --python (default
# /work/venv-torch/bin/python, or $TORCH_PYTHON) must have torch installed. Builds and installs nothing.
#
# Models (--models, default resnet56,lstm): configs/resnet56-cifar.yaml (--memory share) against bench_pytorch.py
# resnet56, configs/bench-lstm-2x512.yaml against lstm, configs/table2/densenet121.yaml and inception_v3.yaml at
# batch 8 against torchvision's densenet121 and inception_v3. Every round runs, per model,
# mnemo then PyTorch, so that machine noise hits both; the table gives per framework the median over the rounds
# (with two rounds: their mean) of each run's median step time.
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
                   [densenet121]=configs/table2/densenet121.yaml [inception_v3]=configs/table2/inception_v3.yaml)
declare -A batch_of=([densenet121]=8 [inception_v3]=8)
for m in "${models[@]}"; do [[ -n ${config[$m]:-} ]] || die "unknown model $m (resnet56, lstm, densenet121, inception_v3)"; done
results=$(mktemp)
trap 'rm -f "$results"' EXIT

for ((r = 1; r <= rounds; ++r)); do
  for m in "${models[@]}"; do
    echo "round $r/$rounds: mnemo $m ..." >&2
    bflag=()
    [[ -n ${batch_of[$m]:-} ]] && bflag=(--batch "${batch_of[$m]}")
    line=$(OMP_NUM_THREADS=$threads "$mnemo" bench "${config[$m]}" --memory share --steps "$steps" --warmup "$warmup" "${bflag[@]}" --json) ||
      die "mnemo bench ${config[$m]} failed"
    printf '{"framework": "mnemo", "model": "%s", "round": %d, "result": %s}\n' "$m" "$r" "$line" >>"$results"
    echo "round $r/$rounds: pytorch $m ..." >&2
    line=$("$python" tools/bench_pytorch.py --model "$m" --threads "$threads" --steps "$steps" --warmup "$warmup" "${bflag[@]}") ||
      die "tools/bench_pytorch.py --model $m failed"
    printf '{"framework": "pytorch", "model": "%s", "round": %d, "result": %s}\n' "$m" "$r" "$line" >>"$results"
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
         "densenet121": "DenseNet-121 (3x224x224, 1000 classes)", "inception_v3": "Inception-v3 (3x299x299, 1000 classes)"}
models = list(dict.fromkeys(r["model"] for r in runs))
print("| model | batch | threads | mnemo s/step | PyTorch s/step | mnemo/PyTorch | rounds |")
print("|---|---:|---:|---:|---:|---:|---|")
notes = []
for m in models:
    med, batch = {}, {}
    for fw in ("mnemo", "pytorch"):
        rs = [x["result"] for x in runs if x["model"] == m and x["framework"] == fw]
        med[fw] = statistics.median(r["step_seconds_median"] for r in rs)
        batch[fw] = {r["batch"] for r in rs}
        got = {r["threads"] for r in rs}
        if got != {threads}:
            notes.append("%s %s ran with %s threads, not %d" % (fw, m, sorted(got), threads))
    if batch["mnemo"] != batch["pytorch"]:
        notes.append("%s: batch differs (mnemo %s, PyTorch %s)" % (m, sorted(batch["mnemo"]), sorted(batch["pytorch"])))
    per_round = ", ".join("%.4f/%.4f" % (a["result"]["step_seconds_median"], b["result"]["step_seconds_median"])
                          for a, b in zip([x for x in runs if x["model"] == m and x["framework"] == "mnemo"],
                                          [x for x in runs if x["model"] == m and x["framework"] == "pytorch"]))
    print("| %s | %s | %d | %.4f | %.4f | %.2f | %s |" % (names[m], "/".join(map(str, sorted(batch["mnemo"]))), threads,
                                                      med["mnemo"], med["pytorch"], med["mnemo"] / med["pytorch"], per_round))
print()
print("Rounds column: each round's mnemo/PyTorch median step time in seconds.")
mem = []
for m in models:
    p = [x["result"] for x in runs if x["model"] == m and x["framework"] == "pytorch"]
    q = [x["result"] for x in runs if x["model"] == m and x["framework"] == "mnemo"]
    mem.append("%s: mnemo planned total %.1f MiB (params %.1f MiB, %.3g GFLOP/step by its cost model); PyTorch peak RSS growth %.1f MiB (%d params)"
               % (m, q[0]["total_bytes"] / 2**20, q[0]["param_bytes"] / 2**20, q[0]["step_flops"] / 1e9,
                  max(r["peak_rss_growth_bytes"] for r in p) / 2**20, p[0]["params"]))
print("Memory (not like for like: planned arena vs. measured RSS growth): " + "; ".join(mem) + ".")
for n in notes:
    print("\nWARNING: " + n)
EOF
echo
echo "Command: \`$cmdline\` (steps $steps, warmup $warmup, rounds $rounds; mnemo: $mnemo)"
echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); CPU: ${cpu:-unknown} ($(nproc) CPUs online); torch $torch_version; mnemo commit $commit"
