#!/usr/bin/env bash
# The mnemo command end to end: every subcommand once on small inputs, and its error paths
# (exit code and message). Run by ctest as `cli`: tests/cli_test.sh MNEMO SOURCE_DIR
set -u
mnemo=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
fails=0
passes=0
# expect NAME EXPECTED_EXIT PATTERN -- COMMAND...: the command exits as expected and its output
# (stdout + stderr) contains PATTERN (an extended regex).
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $rc (expected $code), output lacks /$pattern/:"
    echo "$out" | tail -15
    fails=$((fails + 1))
  else
    echo "ok   $name"
    passes=$((passes + 1))
  fi
}
# verdict NAME STATUS OUTPUT (tests/verdict.sh)
. "$src/tests/verdict.sh"
cfg=$src/configs/mlp-graph.yaml
expect unknown-command 2 "unknown command 'trian' \\(mnemo COMMAND \\[options\\]; the commands: ops, graph, plan, import, train, grad, bench, curve\\)" -- "$mnemo" trian x.yaml
expect option-before-command 2 "option '--bogus' before a command \\(mnemo COMMAND" -- "$mnemo" --bogus
expect version 0 '^mnemo [0-9]+\.[0-9]+\.[0-9]+' -- "$mnemo" --version
expect ops 0 'conv2d +compute +- +in0,in1 -' -- "$mnemo" ops
# MNEMO_CPU_GEMM (ops/fully_connected.cpp): a value other than mkl or onednn fails every command,
# naming the variable; onednn is always allowed, and --version names the library in use.
expect gemm-env-bad 1 "environment variable MNEMO_CPU_GEMM: expected mkl or onednn .*got 'eigen'" -- env MNEMO_CPU_GEMM=eigen "$mnemo" ops
expect gemm-env-onednn 0 'CPU backward GEMMs: oneDNN' -- env MNEMO_CPU_GEMM=onednn "$mnemo" --version
# mkl: accepted in a build with MKL; in one without (the sanitizer build, the GPU bundle) an error.
if env -u MNEMO_CPU_GEMM "$mnemo" --version | grep -q 'GEMMs: MKL'; then
  expect gemm-env-mkl 0 'CPU backward GEMMs: MKL\)' -- env MNEMO_CPU_GEMM=mkl "$mnemo" --version
  # By default MKL overwrites only on Intel CPUs; elsewhere it only accumulates (use_mkl).
  if grep -q 'vendor_id.*GenuineIntel' /proc/cpuinfo; then
    expect gemm-default-intel 0 'CPU backward GEMMs: MKL\)' -- env -u MNEMO_CPU_GEMM "$mnemo" --version
  else
    expect gemm-default-other 0 'CPU backward GEMMs: MKL accumulating, oneDNN overwriting\)' -- env -u MNEMO_CPU_GEMM "$mnemo" --version
  fi
else
  expect gemm-env-mkl-absent 1 'MNEMO_CPU_GEMM=mkl: this build has no MKL' -- env MNEMO_CPU_GEMM=mkl "$mnemo" ops
fi
expect graph-dot 0 'digraph mnemo' -- "$mnemo" graph cnn --format dot
expect graph-training 0 '\[recompute of ' -- "$mnemo" graph lstm --training 1
expect plan-table 0 'sublinear .*MiB|sublinear .*KiB' -- "$mnemo" plan "$cfg"
expect plan-json 0 '"format": "mnemo-plan-1"' -- "$mnemo" plan "$cfg" --memory share --json
expect plan-search 0 '"kept_cuts"' -- "$mnemo" plan "$cfg" --memory sublinear --json
# sublinear reports Chen's plan and whether its fill replaced it; sublinear:chen is Chen's plan as it is.
expect plan-sublinear-filled 0 "filled: Chen's plan total .*recompute" -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory sublinear
expect plan-sublinear-filled-json 0 '"filled": true' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory sublinear --json
expect plan-sublinear-chen 0 '^sublinear:chen ' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory sublinear:chen
# The activations' layout in the plan: plain where the config pins it (model.layout, docs/CONFIG.md).
expect plan-layout 0 '"layout": "plain"' -- "$mnemo" plan "$src/configs/table2/resnet18.yaml" --memory share --json --placement-seconds 0
# An LSTM's head in the plan: fused by default (auto) on the CPU, ops where the config says so.
expect plan-head-default 0 '^[^ ]*bench-lstm-2x512.yaml: lstm \(fused head\), ' -- "$mnemo" plan "$src/configs/bench-lstm-2x512.yaml" --memory share --placement-seconds 0
expect plan-head-ops-json 0 '"head": "ops"' -- "$mnemo" plan "$src/configs/bench-lstm-2x512-ops-head.yaml" --memory share --json --placement-seconds 0
printf 'model: {type: lstm, layers: 1, hidden: 8, per_step: true}\ndata: {source: synthetic-seq, shape: [6, 5], classes: 7, batch: 4, size: 16}\ntrain: {steps: 1}\n' >"$tmp/lstm-tiny.yaml"
expect bench-head-json 0 '"head": ?"fused"' -- "$mnemo" bench "$tmp/lstm-tiny.yaml" --steps 1 --warmup 0 --json
expect plan-optimal 0 '"model_optimum_bytes"' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory optimal --json
expect plan-optimal-log 0 "papers' objective: optimum .*max terms" -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory optimal
expect train-optimal 0 'test accuracy [0-9.]+%' -- "$mnemo" train "$cfg" --steps 3 --memory optimal
expect plan-budget 0 'budget .*the least recompute cost whose total fits' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory budget=0.5x
expect plan-budget-fills 0 'fills: [0-9]+ live-bytes levels filled from the top; [0-9]+ below them not filled' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory budget=0.5x
# A plan that takes more than a second reports its progress on stderr, a line a second (DenseNet-201
# at 0.5x plans for 3-4 s on one thread).
expect plan-budget-progress 0 'mnemo: budget=0\.5x: [0-9]+\.[0-9] s: [0-9]+ of [0-9]+ (distinct members scored|keep-back members scored|members packed)' -- "$mnemo" plan "$src/configs/table2/densenet201.yaml" --memory budget=0.5x --placement-seconds 0
expect plan-budget-fills-json 0 '"fill_levels_skipped": [0-9]+' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory budget=0.5x --json
# budget's local search (:search): it reports where it started and how it ended; on ResNet-20 b128
# at 0.5x it takes moves (7 on 2026-11-29), does not build again plans it met before (27 in the
# fifteenth session) and its plan is named `search`.
expect plan-budget-search 0 'local search: from the family.s choice \([0-9.]+ G\), [0-9]+ moves tried, [1-9][0-9]* taken, [0-9]+ plans evaluated \([1-9][0-9]* met again, not built\), .*a local optimum' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory budget=0.5x:search=60 --placement-seconds 0
expect plan-budget-search-json 0 '"local_optimum": true' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory budget=0.5x:search=60 --placement-seconds 0 --json
expect plan-budget-search-json-remembered 0 '"remembered": [1-9]' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory budget=0.5x:search=60 --placement-seconds 0 --json
# A search longer than a second reports its progress, a line a second (ResNet-56 at 0.5x searches
# for 3.6 s on two threads; here one, stopped at 2 s).
expect plan-budget-search-progress 0 'mnemo: budget search: [0-9]+\.[0-9] s: [0-9]+ moves tried, [0-9]+ taken: least recompute cost that fits' -- "$mnemo" plan "$src/configs/resnet56-cifar.yaml" --memory budget=0.5x:search=2 --placement-seconds 0
expect budget-search-zero 1 "':search=0': the local search needs SECONDS > 0" -- "$mnemo" plan "$cfg" --memory budget=0.5x:search=0
# :bound=SECONDS gives the search's plan the bound :fast=SECONDS has (the LP's rounds and the root's cuts).
expect plan-budget-search-bound 0 'solver: search .*bound: programme lp.*, root cuts' -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory budget=0.4x:search=60:bound=2 --placement-seconds 0
expect budget-bound-exact 1 "':bound=SECONDS' with :exact: the exact solver's bound has its own time" -- "$mnemo" plan "$cfg" --memory budget=0.5x:exact=5:bound=2
# One rank's plan of a data-parallel run (docs/PARALLEL.md): the generic graph at half its batch, with its buckets.
expect plan-ranks 0 'one rank of 2 .*batch 16 per rank' -- "$mnemo" plan "$cfg" --memory share --ranks 2
expect plan-ranks-buckets 0 'all-reduce: [0-9]+ bucket\(s\) of at most 1048576 bytes' -- "$mnemo" plan "$cfg" --memory share --ranks 2
expect plan-ranks-json 0 '"ranks": 2' -- "$mnemo" plan "$cfg" --memory share --ranks 2 --json
expect plan-ranks-indivisible 1 'data.batch 32 does not divide over --ranks 3' -- "$mnemo" plan "$cfg" --ranks 3
# parallel.reduce_one_rank: one rank's plan keeps the all-reduce buckets (docs/PARALLEL.md).
{ cat "$cfg"; echo "parallel: {reduce_one_rank: true}"; } >"$tmp/reduce1.yaml"
expect plan-reduce-one-rank 0 'all-reduce: [0-9]+ bucket\(s\)' -- "$mnemo" plan "$tmp/reduce1.yaml" --memory share
expect budget-too-small 1 "no plan fits in .*the least total found is .*use budget=[0-9]+ or more" -- "$mnemo" plan "$src/configs/resnet20-fashion-mnist.yaml" --memory budget=1MiB
expect budget-bad 1 "expected budget=SIZE" -- "$mnemo" plan "$cfg" --memory budget=2QB
expect bench 0 'median [0-9.]+ s/step' -- "$mnemo" bench "$cfg" --steps 2 --warmup 0
expect train 0 'test accuracy [0-9.]+%' -- "$mnemo" train "$cfg" --steps 5 --memory sublinear
expect train-profile 0 'profile \(2 steps after the run.s first, whose one-off costs are left out' -- "$mnemo" train "$cfg" --steps 3 --no-eval --profile
expect train-profile-one 0 'profile \(1 step, the first with its one-off costs' -- "$mnemo" train "$cfg" --steps 1 --no-eval --profile
expect save-init 0 'wrote the initial weights' -- "$mnemo" train "$cfg" --save-init "$tmp/w.safetensors"
expect curve 0 'log-log slopes' -- "$mnemo" curve "$src/configs/resnet56-cifar.yaml" --vary batch --values 2,4 --memory share --out "$tmp/curve" --no-plot
# The built-in LSTM of Chen's curves is the per-step graph (head: ops; the default head would plan
# the fused one, 29935872 bytes of feature maps at 4 steps).
expect curve-lstm 0 'wrote .*curve.csv' -- "$mnemo" curve lstm --vary seq --values 4 --memory share --out "$tmp/curve-lstm" --no-plot
grep -q '^lstm,seq,4,17,share,32990464,' "$tmp/curve-lstm/curve.csv"
verdict curve-lstm-per-step $? "$(tail -1 "$tmp/curve-lstm/curve.csv" 2>&1)"
expect curve-budget 0 'sublinear +total +[0-9.]+ [KMG]iB, recompute' -- "$mnemo" curve "$src/configs/resnet20-fashion-mnist.yaml" --vary budget --budgets 3 --memory share,sublinear --out "$tmp/curve-budget" --no-plot
expect curve-budget-values 0 'budget +1.0 MiB: below the least feasible .*skipped' -- "$mnemo" curve "$src/configs/resnet20-fashion-mnist.yaml" --vary budget --values 1,500 --memory share --out "$tmp/curve-budget-values" --no-plot
expect curve-budgets-vary 1 '--budgets needs --vary budget' -- "$mnemo" curve "$src/configs/resnet56-cifar.yaml" --vary batch --values 2 --budgets 3 --out "$tmp/curve-x" --no-plot
expect curve-budget-args 1 'give either --values \(MiB\) or --budgets N' -- "$mnemo" curve "$src/configs/resnet20-fashion-mnist.yaml" --vary budget --out "$tmp/curve-budget" --no-plot
# Error paths: a clear message and a non-zero exit, never a crash.
# AlexNet's share plan (shapes only): best fit is 6.9% above its live bytes, the exact placement reaches them.
alex="$src/configs/table2/alexnet.yaml"
expect placement-exact 0 '"placement": "at the live-bytes bound"' -- "$mnemo" plan "$alex" --memory share --json
expect placement-best-fit 0 'placement: best fit; no packing of these buffers is below' -- "$mnemo" plan "$alex" --memory share --placement-seconds 0
expect placement-bad 2 'placement-seconds: expected seconds in \[0, 86400\], got .-1.' -- "$mnemo" plan "$alex" --placement-seconds -1
expect placement-bench 0 'median [0-9.]+ s/step' -- "$mnemo" bench "$cfg" --steps 1 --warmup 0 --placement-seconds 0.5
expect bad-mode 1 "memory mode 'shared'" -- "$mnemo" plan "$cfg" --memory shared
expect bad-mode-train 1 "memory mode 'sublinar'" -- "$mnemo" train "$cfg" --memory sublinar
# --device cuda: trains where a GPU works (nvidia-smi lists one), else a clear error (no device, or
# a build without the CUDA backend).
if nvidia-smi -L >/dev/null 2>&1; then
  expect cuda-train 0 'test accuracy [0-9.]+%' -- "$mnemo" train "$cfg" --steps 5 --memory sublinear --device cuda
  expect cuda-plan 0 'planned for cuda:0' -- "$mnemo" plan "$cfg" --device cuda
else
  expect cuda 1 'no CUDA device is usable|has no CUDA backend' -- "$mnemo" train "$cfg" --device cuda
  expect cuda-plan 1 'no CUDA device is usable|has no CUDA backend' -- "$mnemo" plan "$cfg" --device cuda
  expect cuda-bench 1 'no CUDA device is usable|has no CUDA backend' -- "$mnemo" bench "$cfg" --device cuda:0
fi
expect plan-host 0 'planned for cpu' -- "$mnemo" plan "$cfg" --device host --memory share
expect bench-host-eager 0 '"captured_graphs":0.*"device":"cpu' -- "$mnemo" bench "$cfg" --device host --eager --steps 2 --warmup 0 --json
expect curve-host 0 'log-log slopes' -- "$mnemo" curve "$src/configs/resnet56-cifar.yaml" --vary batch --values 2,4 --memory share --device host --out "$tmp/curve-host" --no-plot
# tools/gpu_report.py on hand-written benchmark lines: mnemo's step over PyTorch's on the same model.
mkdir -p "$tmp/gpu-out"
echo '{"config": "configs/resnet56-cifar.yaml", "mode": "share", "batch": 4, "step_seconds_median": 0.05, "captured_graphs": 1, "device_measured_bytes": 1073741824, "total_bytes": 536870912}' >"$tmp/gpu-out/bench.log"
echo '{"framework": "pytorch", "model": "resnet56", "batch": 4, "torch": "2.x", "step_seconds_median": 0.1, "peak_allocated_bytes": 2147483648}' >"$tmp/gpu-out/torch.log"
expect gpu-report 0 '\| resnet56 \| mnemo \| share \| 4 \| 50\.0 ms \| 80 \| 0\.50x \| 1\.00 GiB \| 0\.50 GiB' -- python3 "$src/tools/gpu_report.py" "$tmp/gpu-out"
# ONNX: import a model with weights, train from them; plan a structure-only export directly.
onnx=$src/tests/fixtures/onnx
expect onnx-import 0 'wrote its 11 initializers to .*small.safetensors' -- "$mnemo" import "$onnx/small.onnx" -o "$tmp/small.yaml"
expect onnx-train 0 'trained 3 steps' -- "$mnemo" train "$tmp/small.yaml" --init "$tmp/small.safetensors" --steps 3 --no-eval
expect train-rss 0 'peak RSS grew [0-9.]+ [KMG]?i?B after planning \([0-9.]+x the planned total\): code paged in [0-9.]+ [KMG]?i?B .*, data [0-9.]+ [KMG]?i?B \([0-9.]+x the planned total' -- "$mnemo" train "$tmp/small.yaml" --init "$tmp/small.safetensors" --steps 2 --no-eval
expect onnx-plan 0 'graph, .*11689512 parameters.*batch 4' -- "$mnemo" plan "$onnx/resnet18_structure.onnx" --batch 4 --memory share
printf 'not onnx' >"$tmp/junk.onnx"
expect onnx-junk 1 'junk.onnx: not an ONNX model' -- "$mnemo" plan "$tmp/junk.onnx"
expect bad-device 1 "'tpu' is not a device" -- "$mnemo" train "$cfg" --device tpu
expect missing-config 2 'config: File does not exist' -- "$mnemo" plan "$tmp/nope.yaml"
expect unknown-flag 2 'not expected: .*--stepz' -- "$mnemo" train "$cfg" --stepz 3
printf 'model: {type: resnet, depth: 21}\n' >"$tmp/bad.yaml"
expect bad-config 1 'bad.yaml:1:.*6n\+2' -- "$mnemo" plan "$tmp/bad.yaml"
expect bad-resume 1 'not a mnemo checkpoint' -- "$mnemo" train "$cfg" --steps 1 --resume "$tmp/w.safetensors"
# --batch overrides a config's data.batch in plan (it was ignored for YAML configs).
expect plan-batch 0 'batch 6, ' -- "$mnemo" plan "$src/configs/resnet56-cifar.yaml" --batch 6 --memory share
expect plan-batch-graph 0 'batch 6, ' -- "$mnemo" plan "$cfg" --batch 6 --memory share
# bench's --batch and curve's --vary batch on a graph config too (set_batch: they set data.batch
# alone, and the config's own check refused the shape).
expect bench-batch-graph 0 '"batch":6,' -- "$mnemo" bench "$cfg" --batch 6 --steps 1 --warmup 0 --json
expect curve-batch-graph 0 'log-log slopes' -- "$mnemo" curve "$cfg" --vary batch --values 2,4 --memory share --device host --out "$tmp/curve-graph" --no-plot
# A time limit of nan was let through by the range check.
expect plan-seconds-nan 2 'expected seconds in \[0, 86400\]' -- "$mnemo" plan "$cfg" --placement-seconds nan
expect train-seconds-nan 2 'expected seconds in \[0, 86400\]' -- "$mnemo" train "$cfg" --placement-seconds nan
# Where the run saves is checked before it trains (a directory given to --checkpoint was refused
# only after the last step, the weights unsaved).
mkdir -p "$tmp/adir"
out=$("$mnemo" train "$cfg" --steps 2 --no-eval --checkpoint "$tmp/adir" 2>&1)
rc=$?
[ "$rc" -eq 1 ] && grep -q 'exists and is not a regular file' <<<"$out" && ! grep -q 'trained' <<<"$out"
verdict checkpoint-dir-first $? "exit $rc: $out"
expect checkpoint-nodir 1 "the directory '$tmp/nodir' does not exist" -- "$mnemo" train "$cfg" --steps 2 --no-eval --checkpoint "$tmp/nodir/c.safetensors"
# A checkpoint's model_signature (the parameters' names and types) is checked on --resume: one
# edited in place (same length, the tensors untouched) was taken as it was.
expect save-ckpt 0 'trained 1 step' -- "$mnemo" train "$cfg" --steps 1 --no-eval --checkpoint "$tmp/ck.safetensors"
python3 - "$tmp/ck.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = open(p, 'rb').read()
i = b.index(b'"model_signature":"') + len(b'"model_signature":"')
b = b[:i] + (b'X' if b[i:i + 1] != b'X' else b'Y') + b[i + 1:]
open(p, 'wb').write(b)
PY
expect resume-signature 1 "metadata 'model_signature' does not match its tensors and this model" -- "$mnemo" train "$cfg" --steps 2 --no-eval --resume "$tmp/ck.safetensors"
# No output is written over an input or another output (each was written, destroying the model,
# the weights or the config): the file is left as it was.
cp "$onnx/small.onnx" "$tmp/keep.onnx"
expect import-over-model 1 "-o '$tmp/keep.onnx' is the same file as the ONNX model" -- "$mnemo" import "$tmp/keep.onnx" -o "$tmp/keep.onnx"
expect import-weights-over-config 1 "-o '$tmp/same.yaml' is the same file as --weights" -- "$mnemo" import "$tmp/keep.onnx" -o "$tmp/same.yaml" --weights "$tmp/./same.yaml"
cmp -s "$onnx/small.onnx" "$tmp/keep.onnx"
verdict import-model-kept $? "the ONNX model changed"
cp "$cfg" "$tmp/mine.yaml"
expect save-init-over-config 1 "--save-init '$tmp/mine.yaml' is the same file as the config" -- "$mnemo" train "$tmp/mine.yaml" --save-init "$tmp/mine.yaml"
expect checkpoint-over-init 1 "--checkpoint '$tmp/small.safetensors' is the same file as --init" -- "$mnemo" train "$tmp/small.yaml" --init "$tmp/small.safetensors" --steps 1 --no-eval --checkpoint "$tmp/small.safetensors"
expect grad-over-weights 1 "--out '$tmp/small.safetensors' is the same file as --weights" -- "$mnemo" grad "$tmp/small.yaml" --weights "$tmp/small.safetensors" --batch "$tmp/small.safetensors" --out "$tmp/small.safetensors"
cmp -s "$cfg" "$tmp/mine.yaml"
verdict config-kept $? "the config changed"
# Resuming from --checkpoint's own file is a continuation: allowed.
expect save-ckpt2 0 'trained 1 step' -- "$mnemo" train "$cfg" --steps 1 --no-eval --checkpoint "$tmp/ck2.safetensors"
expect resume-into-itself 0 'trained 1 step' -- "$mnemo" train "$cfg" --steps 2 --no-eval --resume "$tmp/ck2.safetensors" --checkpoint "$tmp/ck2.safetensors"
# A curve run that fails leaves the last good curve as it was (its CSV was truncated first), and
# its error names the value; one value gives no slope (nan was written, exit 0); no value twice.
r20=$src/configs/resnet20-fashion-mnist.yaml
expect curve-good 0 'log-log slopes' -- "$mnemo" curve "$r20" --vary depth --values 8,14 --memory share --device host --out "$tmp/cv" --no-plot
cp "$tmp/cv/curve.csv" "$tmp/cv-before.csv"
expect curve-bad-value 1 '--vary depth --values 9: .*6n\+2' -- "$mnemo" curve "$r20" --vary depth --values 8,9 --memory share --device host --out "$tmp/cv" --no-plot
cmp -s "$tmp/cv/curve.csv" "$tmp/cv-before.csv"
verdict curve-kept $? "curve.csv changed by a failed run"
expect curve-one-value 0 'need two values or more' -- "$mnemo" curve "$r20" --vary depth --values 8 --memory share --device host --out "$tmp/cv1" --no-plot
grep -qx 'share,,' "$tmp/cv1/slopes.csv" && ! grep -q nan "$tmp/cv1/slopes.csv"
verdict curve-one-value-slopes $? "$(cat "$tmp/cv1/slopes.csv")"
expect curve-twice 1 '--values: 8 is given twice' -- "$mnemo" curve "$r20" --vary depth --values 8,8 --memory share --device host --out "$tmp/cv2" --no-plot
# Text: the test split is the file's last tenth (it was the training text); a test split smaller
# than one batch is scored, its loss too (it read 0.0000, then "not measured").
python3 -c "print('the quick brown fox jumps over the lazy dog ' * 5)" >"$tmp/t.txt"
printf 'model: {type: lstm, layers: 1, hidden: 8, per_step: true}\ndata: {source: text, path: %s, steps: 10, batch: 4}\ntrain: {steps: 2}\n' "$tmp/t.txt" >"$tmp/text.yaml"
expect text-held-out 0 'test accuracy [0-9.]+% on 20 examples \(test loss [0-9.]+, ' -- "$mnemo" train "$tmp/text.yaml"
sed "s|^train: {steps: 2}|train: {steps: 2, metrics: $tmp/text-metrics.jsonl}|" "$tmp/text.yaml" >"$tmp/text-m.yaml"
expect text-metrics-run 0 'test loss [0-9.]+, ' -- "$mnemo" train "$tmp/text-m.yaml"
grep -qE '^\{"step":2,"test_accuracy":[0-9.e-]+,"test_examples":20,"test_loss":[0-9.e-]+,"test_loss_examples":20\}$' "$tmp/text-metrics.jsonl"
verdict text-metrics-loss $? "$(tail -2 "$tmp/text-metrics.jsonl" 2>&1)"
# A graph config's loss is its graph's, over full batches: a test set smaller than one batch has
# none, reported as not measured, and in the metrics file null (JSON has no NaN).
sed -e 's/^  size: 3200/  size: 3200\n  eval_size: 10/' -e "s|^train:|train:\n  metrics: $tmp/graph-small.jsonl|" "$cfg" >"$tmp/graph-small.yaml"
expect graph-small-test 0 'test accuracy [0-9.]+% on 10 examples \(test loss not measured: no full batch of 32' -- "$mnemo" train "$tmp/graph-small.yaml" --steps 2
grep -qE '^\{"step":2,"test_accuracy":[0-9.e-]+,"test_examples":10,"test_loss":null,"test_loss_examples":0\}$' "$tmp/graph-small.jsonl"
verdict graph-metrics-null $? "$(tail -2 "$tmp/graph-small.jsonl" 2>&1)"
# A learning rate past float32's range (inf in the step), and checkpoint.dir naming a file (a raw
# filesystem error naming neither the config nor the key).
sed 's/^  lr: .*/  lr: 1e40/' "$cfg" >"$tmp/lr.yaml"
grep -q 'lr: 1e40' "$tmp/lr.yaml"
verdict lr-edited $? "the config has no lr line to edit"
expect lr-past-float 1 'optimizer.lr: expected a number in \[0, 3.40282e\+38\], got .1e40.' -- "$mnemo" plan "$tmp/lr.yaml"
touch "$tmp/afile"
{ cat "$cfg"; echo "checkpoint: {dir: $tmp/afile}"; } >"$tmp/ckfile.yaml"
expect checkpoint-dir-file 1 "ckfile.yaml: checkpoint.dir '$tmp/afile' exists and is not a directory" -- "$mnemo" train "$tmp/ckfile.yaml" --steps 1 --no-eval
# checkpoint.dir's checkpoint file naming the --init weights (they would be overwritten).
mkdir -p "$tmp/ckd"
cp "$tmp/w.safetensors" "$tmp/ckd/checkpoint.safetensors"
{ cat "$cfg"; echo "checkpoint: {dir: $tmp/ckd}"; } >"$tmp/ckd.yaml"
expect checkpoint-dir-over-init 1 "ckd.yaml: checkpoint.dir's checkpoint '$tmp/ckd/checkpoint.safetensors' is the same file as --init" -- "$mnemo" train "$tmp/ckd.yaml" --init "$tmp/ckd/checkpoint.safetensors" --steps 1 --no-eval
# A checkpoint's data position counts batches of the data it was saved with: a resume reading
# other batches (data.batch or data.size changed) was taken silently.
printf 'model: {type: resnet, depth: 8, width: 4}\ndata: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 16, eval: false}\ntrain: {steps: 2}\n' >"$tmp/b4.yaml"
sed 's/batch: 4/batch: 2/' "$tmp/b4.yaml" >"$tmp/b2.yaml"
expect data-order-save 0 'trained 1 step' -- "$mnemo" train "$tmp/b4.yaml" --steps 1 --checkpoint "$tmp/b4.safetensors"
expect data-order-resume 1 'was saved reading batches of 4 from 16 synthetic examples; this run reads batches of 2 from 16 synthetic examples' -- "$mnemo" train "$tmp/b2.yaml" --resume "$tmp/b4.safetensors"
expect data-order-same 0 'resumed from .* at step 1' -- "$mnemo" train "$tmp/b4.yaml" --resume "$tmp/b4.safetensors"
# A checkpoint saved before checkpoints recorded their data order resumes with a note saying what
# its data position is taken to count (nothing to check it against).
python3 - "$tmp/b4.safetensors" "$tmp/old.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
head = json.loads(raw[8:8 + n])
del head['__metadata__']['data_order']
text = json.dumps(head).encode()
text += b' ' * (-len(text) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(text)) + text + raw[8 + n:])
PY
verdict data-order-strip $? "could not rewrite the checkpoint's header"
expect data-order-older 0 'note: checkpoint .*old.safetensors does not record the data it was saved reading .*: its data position \(1 batches\) is taken as counting this run.s batches of 2 from 16 synthetic examples' -- "$mnemo" train "$tmp/b2.yaml" --resume "$tmp/old.safetensors"
# train.metrics naming the config itself (the config became JSON lines).
{ cat "$cfg"; echo "checkpoint: {dir: $tmp/mck}"; } | sed "s|^train:|train:\n  metrics: $tmp/selfm.yaml|" >"$tmp/selfm.yaml"
expect metrics-over-config 1 "train.metrics '$tmp/selfm.yaml' is the same file as the config" -- "$mnemo" train "$tmp/selfm.yaml" --steps 1 --no-eval
# A node the gradient pass cannot go through, named with its line (the message named the node alone).
sed 's/{name: a1, op: tanh, inputs: \[h1\]/{name: a1, op: tanh_grad, inputs: [h1, h1]/' "$cfg" >"$tmp/nograd.yaml"
expect not-differentiable 1 'nograd.yaml:18:7: node .a1. \(tanh_grad\) is on the gradient path but its op is not differentiable' -- "$mnemo" plan "$tmp/nograd.yaml" --memory share
# Found by a hunt for silent wrong behaviour (2026-11-28):
# - plan and grad take train.threads, as train and bench do (the CPU workspace depends on it).
printf 'model: {type: resnet, style: cifar, depth: 8, width: 4}\ndata: {source: synthetic, shape: [3, 16, 16], classes: 5, batch: 4, size: 42, eval_size: 10}\noptimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.0005}\nschedule: {type: cosine, warmup_steps: 3, min_lr: 0.001}\ntrain: {steps: 12, log_every: 1, seed: 3, threads: 1, metrics: %s/h.jsonl, eval_every: 5}\ncheckpoint: {dir: %s/hck, every: 4}\n' "$tmp" "$tmp" >"$tmp/h.yaml"
expect plan-threads 0 'planned for cpu \(1 threads\)' -- env OMP_NUM_THREADS=2 "$mnemo" plan "$tmp/h.yaml" --memory share
# - each epoch's examples left out of full batches are said; the test loss says which examples it
#   covers: a built-in model's every one (its rows' cross-entropy, scored on the host), a graph
#   config's the full batches'.
"$mnemo" train "$tmp/h.yaml" --steps 4 --checkpoint "$tmp/h4.ck" >"$tmp/h4.txt" 2>&1
verdict h4-run $? "$(tail -3 "$tmp/h4.txt")"
grep -q 'each epoch leaves 2 of its 42 shuffled training examples out' "$tmp/h4.txt"
verdict left-out $? "$(sed -n 1,3p "$tmp/h4.txt")"
grep -qE 'test accuracy [0-9.]+% on 10 examples \(test loss [0-9.]+, ' "$tmp/h4.txt"
verdict loss-covers $? "$(grep 'test accuracy' "$tmp/h4.txt")"
grep -q '"test_examples":10,"test_loss":[0-9.e-]*,"test_loss_examples":10' "$tmp/h.jsonl"
verdict loss-covers-metrics $? "$(tail -1 "$tmp/h.jsonl")"
sed 's/^  size: 3200/  size: 3200\n  eval_size: 40/' "$cfg" >"$tmp/graph-eval.yaml"
expect loss-covers-graph 0 'test accuracy [0-9.]+% on 40 examples \(test loss [0-9.]+ on the first 32, in full batches of 32' -- "$mnemo" train "$tmp/graph-eval.yaml" --steps 2
# - a resume whose optimiser or schedule differs from the checkpoint's says so (a cosine's total
#   steps changed its learning rate silently); the loss average continues from the checkpoint's.
"$mnemo" train "$tmp/h.yaml" --resume "$tmp/h4.ck" >"$tmp/h-resumed.txt" 2>&1
verdict resume-run $? "$(tail -3 "$tmp/h-resumed.txt")"
grep -q 'note: checkpoint .*h4.ck was training with sgd lr 0.05 momentum 0.9 weight_decay 5e-04, schedule cosine to min_lr 0.001 over 4 steps, warm-up 3 steps; this run trains with .* over 12 steps' "$tmp/h-resumed.txt"
verdict resume-schedule-note $? "$(grep -m1 note "$tmp/h-resumed.txt")"
# With a schedule that does not depend on the total (a step schedule), a resume from 4 steps
# trains as the straight run: no note, and the same final loss and loss average.
sed -e 's/schedule: {type: cosine, warmup_steps: 3, min_lr: 0.001}/schedule: {type: step, warmup_steps: 3, milestones: [6], gamma: 0.5}/' \
    -e "s|metrics: $tmp/h.jsonl, ||" -e '/^checkpoint:/d' "$tmp/h.yaml" >"$tmp/hs.yaml"
"$mnemo" train "$tmp/hs.yaml" >"$tmp/hs-straight.txt" 2>&1
"$mnemo" train "$tmp/hs.yaml" --steps 4 --checkpoint "$tmp/hs4.ck" >/dev/null 2>&1
"$mnemo" train "$tmp/hs.yaml" --resume "$tmp/hs4.ck" >"$tmp/hs-resumed.txt" 2>&1
! grep -q 'note: checkpoint' "$tmp/hs-resumed.txt"
verdict resume-same-no-note $? "$(grep note "$tmp/hs-resumed.txt")"
a=$(grep -o 'final loss .*' "$tmp/hs-straight.txt"); b=$(grep -o 'final loss .*' "$tmp/hs-resumed.txt")
[ -n "$a" ] && [ "$a" = "$b" ]
verdict resume-loss-average $? "straight: $a; resumed: $b"
# - a run with nothing to train writes nothing (it put the older state over checkpoint.dir's
#   newer one and cut the metrics back, adding an evaluation record).
cp "$tmp/hck/checkpoint.safetensors" "$tmp/hck-before"; cp "$tmp/h.jsonl" "$tmp/h-before.jsonl"
expect nothing-to-train 0 'nothing to train: already at step 4 of 3 \(no checkpoint or metrics written\)' -- "$mnemo" train "$tmp/h.yaml" --resume "$tmp/h4.ck" --steps 3
cmp -s "$tmp/hck/checkpoint.safetensors" "$tmp/hck-before" && cmp -s "$tmp/h.jsonl" "$tmp/h-before.jsonl"
verdict nothing-to-train-writes-nothing $? "the checkpoint or the metrics changed"
# - an evaluation due at a checkpoint's step runs before the checkpoint: a run killed during it
#   resumes from the checkpoint before and evaluates again (its metrics record was lost). The
#   resumed metrics equal a straight run's wherever the kill lands.
printf 'model: {type: resnet, style: cifar, depth: 8, width: 4}\ndata: {source: synthetic, shape: [3, 16, 16], classes: 5, batch: 4, eval_batch: 500, size: 400, eval_size: 20000}\noptimizer: {lr: 0.05}\ntrain: {steps: 100, log_every: 50, seed: 3, threads: 1, metrics: %s/k.jsonl, eval_every: 50}\ncheckpoint: {dir: %s/kck, every: 50}\n' "$tmp" "$tmp" >"$tmp/k.yaml"
"$mnemo" train "$tmp/k.yaml" >/dev/null 2>&1 && mv "$tmp/k.jsonl" "$tmp/k-straight.jsonl" && rm -rf "$tmp/kck"
"$mnemo" train "$tmp/k.yaml" >/dev/null 2>&1 &
kpid=$!
for _ in $(seq 2000); do grep -q '"step":50,' "$tmp/k.jsonl" 2>/dev/null && break; sleep 0.01; done
kill -TERM $kpid 2>/dev/null; wait $kpid 2>/dev/null
if [ -f "$tmp/kck/checkpoint.safetensors" ]; then "$mnemo" train "$tmp/k.yaml" --resume "$tmp/kck/checkpoint.safetensors" >/dev/null 2>&1; else "$mnemo" train "$tmp/k.yaml" >/dev/null 2>&1; fi
python3 - "$tmp/k-straight.jsonl" "$tmp/k.jsonl" <<'PY'
import json, sys
def recs(p):
    out = []
    for line in open(p):
        r = json.loads(line)
        for k in ("steps_per_s", "examples_per_s"): r.pop(k, None)
        out.append(r)
    return out
a, b = recs(sys.argv[1]), recs(sys.argv[2])
sys.exit(0 if a == b and any("test_accuracy" in r and r["step"] == 50 for r in b) else 1)
PY
verdict eval-before-checkpoint $? "$(diff "$tmp/k-straight.jsonl" "$tmp/k.jsonl" | head -4)"
# - schedule.min_lr above optimizer.lr (the cosine rose) and a graph config's eval_batch (ignored).
sed 's/min_lr: 0.001/min_lr: 0.5/' "$tmp/h.yaml" >"$tmp/minlr.yaml"
expect min-lr-above-lr 1 'minlr.yaml:4:[0-9]+: schedule.min_lr: expected at most optimizer.lr \(0.05\): the cosine schedule decays from lr to min_lr, got .0.5.' -- "$mnemo" plan "$tmp/minlr.yaml"
sed 's/^data:$/data:\n  eval_batch: 8/' "$cfg" >"$tmp/gev.yaml"
expect graph-eval-batch 1 'gev.yaml:[0-9]+:[0-9]+: data.eval_batch: expected no eval_batch here: a graph config is evaluated at the batch of its graph.s inputs' -- "$mnemo" plan "$tmp/gev.yaml"
# - a write cut short by the file-size limit leaves no torn line in the metrics file.
printf 'model: {type: resnet, style: cifar, depth: 8, width: 4}\ndata: {source: synthetic, shape: [3, 16, 16], classes: 5, batch: 4, size: 40, eval_size: 10}\ntrain: {steps: 40, seed: 3, threads: 1, metrics: %s/lim.jsonl}\n' "$tmp" >"$tmp/lim.yaml"
expect metrics-size-limit 1 "writing the metrics file '.*lim.jsonl' failed: File too large" -- bash -c "ulimit -f 4; exec \"$mnemo\" train \"$tmp/lim.yaml\" --no-eval"
python3 -c "
import json, sys
t = open(sys.argv[1]).read()
assert t.endswith('\n') and len(t) <= 4096, len(t)
[json.loads(l) for l in t.splitlines()]" "$tmp/lim.jsonl"
verdict metrics-no-torn-line $? "$(tail -c 120 "$tmp/lim.jsonl")"
# Found by a third hunt (2026-11-28):
# - --save-init over the config's metrics file or checkpoint.dir's checkpoint (both destroyed, exit 0).
{ cat "$cfg"; echo "checkpoint: {dir: $tmp/sick}"; } | sed "s|^train:|train:\n  metrics: $tmp/si.jsonl|" >"$tmp/si.yaml"
expect save-init-over-metrics 1 "--save-init '$tmp/si.jsonl' is the same file as train.metrics" -- "$mnemo" train "$tmp/si.yaml" --save-init "$tmp/si.jsonl"
expect save-init-over-checkpoint 1 "--save-init '$tmp/sick/checkpoint.safetensors' is the same file as .*si.yaml: checkpoint.dir's checkpoint" -- "$mnemo" train "$tmp/si.yaml" --save-init "$tmp/sick/checkpoint.safetensors"
# - --save-init with --resume (or --init) writes those weights (it wrote the config's initialisation);
#   with --steps or --checkpoint it is refused (they were ignored).
expect save-init-from-resume 0 "wrote the weights of checkpoint .*h4.ck \(step 4\)" -- "$mnemo" train "$tmp/h.yaml" --resume "$tmp/h4.ck" --save-init "$tmp/h4w.safetensors"
"$mnemo" train "$tmp/h.yaml" --save-init "$tmp/h0w.safetensors" >/dev/null 2>&1
! cmp -s "$tmp/h4w.safetensors" "$tmp/h0w.safetensors"
verdict save-init-from-resume-differs $? "the checkpoint's weights file equals the initial weights"
expect save-init-from-resume-loads 0 'initial weights from' -- "$mnemo" train "$tmp/h.yaml" --init "$tmp/h4w.safetensors" --steps 1 --no-eval
expect save-init-init-and-resume 1 "--init and --resume exclude each other" -- "$mnemo" train "$tmp/h.yaml" --init "$tmp/h4w.safetensors" --resume "$tmp/h4.ck" --save-init "$tmp/h4w3.safetensors"
expect save-init-from-init 0 "wrote the weights of --init .*h4w.safetensors \(" -- "$mnemo" train "$tmp/h.yaml" --init "$tmp/h4w.safetensors" --save-init "$tmp/h4w2.safetensors"
cmp -s "$tmp/h4w.safetensors" "$tmp/h4w2.safetensors" || python3 -c "
import json, struct, sys
def body(p):
    r = open(p, 'rb').read(); n = struct.unpack('<Q', r[:8])[0]; return r[8 + n:]
sys.exit(0 if body(sys.argv[1]) == body(sys.argv[2]) else 1)" "$tmp/h4w.safetensors" "$tmp/h4w2.safetensors"
verdict save-init-from-init-same-weights $? "the weights written differ from --init's"
# A checkpoint whose loss_ema metadata is not a number is refused naming the key.
python3 - "$tmp/h4.ck" "$tmp/badema.ck" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
head = json.loads(raw[8:8 + n])
head['__metadata__']['loss_ema'] = 'abc'
text = json.dumps(head).encode()
text += b' ' * (-len(text) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(text)) + text + raw[8 + n:])
PY
expect bad-loss-ema 1 "checkpoint .*badema.ck: metadata 'loss_ema' is 'abc', expected a finite number" -- "$mnemo" train "$tmp/h.yaml" --resume "$tmp/badema.ck"
expect save-init-steps 1 '--save-init writes the weights a run would start from and trains nothing: --checkpoint and --steps do not apply' -- "$mnemo" train "$tmp/h.yaml" --save-init "$tmp/x.safetensors" --steps 3
# - an option given an empty value ("--checkpoint $OUT" with OUT unset) read as not given.
expect empty-option 2 "--checkpoint: expected a value, got an empty string" -- "$mnemo" train "$cfg" --steps 1 --checkpoint ''
expect empty-option-memory 2 "--memory: expected a value, got an empty string" -- "$mnemo" bench "$cfg" --memory ''
# - a memory mode given twice to curve (every point planned twice, its rows repeated).
expect curve-mode-twice 1 '--memory: share is given twice' -- "$mnemo" curve "$r20" --vary depth --values 8,14 --memory share,share --device host --out "$tmp/cvm" --no-plot
# - --profile on a run with nothing to train printed an empty profile.
out=$("$mnemo" train "$tmp/h.yaml" --resume "$tmp/h4.ck" --steps 4 --profile 2>&1)
grep -q 'nothing to train' <<<"$out" && ! grep -q '^profile (' <<<"$out"
verdict profile-nothing-to-train $? "$out"
# Found by a hunt against PyTorch: a graph reading an op's saved output (what its backward reads,
# lstm_cell's gate activations here) on the way to the loss got a zero gradient there, exit 0.
cat >"$tmp/act.yaml" <<'YAML'
model:
  type: graph
  inputs: {data: {shape: [2, 4]}, labels: {shape: [2], dtype: int32}}
  params:
    xp: {shape: [2, 4], init: normal, scale: 1.0}
    cp: {shape: [2, 1], init: normal, scale: 1.0}
    fw: {shape: [3, 4], init: normal, scale: 1.0}
  nodes:
    - {name: x, op: add, inputs: [data, xp]}
    - {name: l, op: lstm_cell, inputs: [x, cp]}
    - {name: logits, op: fully_connected, inputs: ["l:2", fw]}
    - {name: loss, op: softmax_cross_entropy, inputs: [logits, labels]}
  loss: loss
  logits: logits
data: {source: synthetic, classes: 3, batch: 2, size: 8, shape: [4]}
train: {steps: 1}
YAML
expect saved-output-on-gradient-path 1 "act.yaml:10:7: node 'l' \(lstm_cell\): output 2 is saved for the op's own backward and has no gradient, but the loss depends on it" -- "$mnemo" plan "$tmp/act.yaml" --memory share
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
