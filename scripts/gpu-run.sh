#!/usr/bin/env bash
# Runs ON the GPU machine (docs/GPU.md), building nothing: the GPU tests, the GPU benchmarks and the
# PyTorch comparison, in one go, from the bundle scripts/gpu-build.sh made (carry gpu-dist.tar.xz, or gpu-dist/ where it is under 64 MiB).
# Logs, JSON and CSV go to ${OUT:-gpu-out}/; a short table is printed last. Each part fits one
# device call (10 minutes at most); several parts run one after the other (`tests zoo bench`):
#   bash scripts/gpu-run.sh tests    GPU tests, training and planning on the GPU from the CLI (also with NCCL, one rank)
#   bash scripts/gpu-run.sh bench    the fused LSTM cell; ResNet-50 and the paper's LSTM: mnemo beside PyTorch
#   bash scripts/gpu-run.sh dp       the all-reduce path's overhead with NCCL over one rank (captured and eager)
#   bash scripts/gpu-run.sh zoo      OLLA's zoo CNNs at batch 1 and 32: PyTorch's max_memory_allocated/reserved
#                                    beside mnemo's planned and measured memory (tools/zoo_gpu_peaks.py)
#   bash scripts/gpu-run.sh profile  ResNet-50's step per op: mnemo --profile beside torch.profiler
#   bash scripts/gpu-run.sh cudnn    ResNet-50: PyTorch through cuDNN's graph API and its legacy one, beside mnemo (alternating)
#   bash scripts/gpu-run.sh big      speed per memory mode (budget too); the 1001-layer ResNet under sublinear, captured and eager
#   bash scripts/gpu-run.sh split    ResNet-50 batches whose stem convolution passes 2^31 elements (split into launches), recursive
#   bash scripts/gpu-run.sh curve    measured along budget=SIZE's trade-off (ResNet-56, ResNet-152, the paper's LSTM) beside PyTorch's checkpointing
#   bash scripts/gpu-run.sh tf32     PyTorch's ResNet-50 and LSTM with TF32 allowed (mnemo is strict float32)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
dist=gpu-dist
if [ ! -x $dist/bin/mnemo ] && [ -f gpu-dist.tar.xz ]; then  # (Python's tarfile: no xz needed there)
  python3 -c 'import tarfile; tarfile.open("gpu-dist.tar.xz").extractall(filter="tar")'
fi
[ -x $dist/bin/mnemo ] || { echo "gpu-run: $dist/bin/mnemo missing: run scripts/gpu-build.sh here first and carry $dist"; exit 2; }
# cuDNN and cuBLAS from the Python wheels beside PyTorch (CUDA 12 and 13 wheel layouts differ), or CUDA;
# NVRTC too (cuDNN 9's runtime-compiled engines load it).
libdirs=$( (python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null; echo /usr/local/cuda/lib64) |
  xargs -I{} find {} -name 'libcudnn.so.9' -o -name 'libcublas.so.13' -o -name 'libcublasLt.so.13' -o -name 'libnvrtc.so.13' -o -name 'libnccl.so.2' 2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
export LD_LIBRARY_PATH=$PWD/$dist/lib:$libdirs:${LD_LIBRARY_PATH:-}
mnemo=$dist/bin/mnemo
{
  nvidia-smi
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd $mnemo | grep -E 'cudnn|cublas|nccl|dnnl|yaml|not found'
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
} 2>&1 | tee "$out/env.txt"

run() {  # run NAME SECONDS COMMAND...: output to $out/NAME.log, status to the summary
  local name=$1 secs=$2
  shift 2
  local t0=$SECONDS
  timeout "$secs" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  printf '%-34s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$(tail -1 "$out/$name.log" | cut -c1-150)" | tee -a "$out/summary.txt"
}

mkdir -p "$out/zoo"
[ $# -gt 0 ] || set -- tests
for part in "$@"; do
case $part in
  tests)
    run gpu-tests 300 $dist/bin/mnemo_gpu_tests --gtest_brief=1 --gtest_output=json:"$out/gpu-tests.json"
    run cli-mlp 60 $mnemo train configs/mlp-graph.yaml --device cuda --steps 50 --memory sublinear
    run cli-resnet20 120 $mnemo train configs/resnet56-cifar.yaml --device cuda --steps 30 --no-eval
    run plan-resnet50 120 $mnemo plan configs/resnet50-imagenet.yaml --device cuda --json
    # The data-parallel kernels and NCCL over one rank (parallel.reduce_one_rank, no mpirun needed).
    { cat configs/mlp-graph.yaml; echo "parallel: {reduce_one_rank: true}"; } >"$out/reduce1.yaml"
    run cli-mlp-reduce-one-rank 60 $mnemo train "$out/reduce1.yaml" --device cuda --steps 50 --memory sublinear
    ;;
  bench)
    # The fused LSTM cell's and the fused head's CUDA kernels (beside the unfused ones); the head in
    # `share` and `sublinear` (the recompute it saves).
    for model in bench-lstm-2x512-fused bench-lstm-2x512 bench-lstm-2x512-fused-head; do
      run "bench-$model-share" 100 $mnemo bench configs/$model.yaml --device cuda --memory share --steps 20 --warmup 3 --json
    done
    for model in bench-lstm-2x512 bench-lstm-2x512-fused-head; do
      run "bench-$model-sublinear" 100 $mnemo bench configs/$model.yaml --device cuda --memory sublinear --steps 20 --warmup 3 --json
    done
    # Throughput and memory: mnemo (share) and PyTorch eager, strict float32 on both, same batch.
    for model in resnet50-imagenet lstm-paper; do
      run "bench-$model-share" 130 $mnemo bench configs/$model.yaml --device cuda --memory share --steps 20 --warmup 3 --json
    done
    run torch-resnet50 130 python3 tools/bench_pytorch.py --device cuda --model resnet50 --steps 20 --warmup 3
    run torch-lstm-paper 130 python3 tools/bench_pytorch.py --device cuda --model lstm-paper --steps 20 --warmup 3
    ;;
  dp)
    # The all-reduce path's overhead: one plain process against one with parallel.reduce_one_rank
    # (NCCL over one rank), the step replayed from its captured graph, then launched node by node.
    run dp-one-rank-resnet56 150 python3 tools/parallel_bench.py configs/resnet56-cifar.yaml --one-rank --device cuda --rounds 3 --steps 200 --mnemo $mnemo
    run dp-one-rank-resnet56-eager 150 python3 tools/parallel_bench.py configs/resnet56-cifar.yaml --one-rank --device cuda --rounds 3 --steps 200 --eager --mnemo $mnemo
    ;;
  profile)
    # Where ResNet-50's step goes: mnemo's per-op times (node by node, synchronised) and PyTorch's
    # kernels under torch.profiler.
    run profile-mnemo-resnet50 150 $mnemo train configs/resnet50-imagenet.yaml --device cuda --steps 6 --no-eval --profile
    run profile-torch-resnet50 150 python3 tools/bench_pytorch.py --device cuda --model resnet50 --steps 5 --warmup 2 --profile
    ;;
  cudnn)
    # Which cuDNN API the convolutions' speed depends on, in alternating rounds: PyTorch through
    # cuDNN's graph API (its default) and through the legacy v7 heuristics mnemo uses; mnemo.
    for r in 1 2; do
      run "torch-resnet50-graph-round$r" 130 python3 tools/bench_pytorch.py --device cuda --model resnet50 --steps 20 --warmup 3
      run "torch-resnet50-legacy-round$r" 130 env TORCH_CUDNN_V8_API_DISABLED=1 python3 tools/bench_pytorch.py --device cuda --model resnet50 --steps 20 --warmup 3
      run "bench-resnet50-imagenet-share-round$r" 130 $mnemo bench configs/resnet50-imagenet.yaml --device cuda --memory share --steps 20 --warmup 3 --json
    done
    ;;
  zoo)
    run zoo/peaks 300 python3 tools/zoo_gpu_peaks.py --mnemo $mnemo
    ;;
  big)
    # Speed per memory mode on ResNet-50; what replaying the captured step saves on the LSTM.
    # budget=0.5x: half of share's total, a filled member of the budget family (docs/MEMORY.md).
    for mode in none sublinear budget=0.5x; do
      run "bench-resnet50-imagenet-${mode//=/-}" 100 $mnemo bench configs/resnet50-imagenet.yaml --device cuda --memory $mode --steps 10 --warmup 2 --json
    done
    run bench-lstm-paper-share-eager 100 $mnemo bench configs/lstm-paper.yaml --device cuda --memory share --steps 10 --warmup 2 --json --eager
    # The paper's headline: the 1001-layer ResNet, batch 32, 224x224, trains under sublinear (< 7 GB).
    run train-resnet1000-sublinear 240 $mnemo train configs/resnet1000-imagenet.yaml --device cuda --memory sublinear --steps 3 --no-eval
    # The same launched node by node: what the captured graphs' instantiation adds to the measured memory.
    run train-resnet1000-sublinear-eager 240 $mnemo train configs/resnet1000-imagenet.yaml --device cuda --memory sublinear --steps 3 --no-eval --eager
    ;;
  split)
    # Past cuDNN's int range: at batch 2675 and above ResNet-50's stem output holds more than 2^31
    # elements, so its convolutions run as launches along the batch (cuda/ops_conv2d.cpp).
    for b in 2800 4096 6144; do
      run "bench-resnet50-imagenet-recursive-b$b" 240 $mnemo bench configs/resnet50-imagenet.yaml --device cuda --memory recursive --batch $b --steps 2 --warmup 1 --json
    done
    ;;
  curve)
    # Measured along budget=SIZE's trade-off (tools/budget_bench.py: budgets from share's total down to
    # the least feasible, each distinct plan timed in alternating rounds), beside PyTorch's checkpointing.
    # ResNet-56's budgets planned with the roofline cost (the default) and with FLOPs alone (balance 0).
    run curve-resnet56 300 python3 tools/budget_bench.py configs/resnet56-cifar.yaml --points 6 --at sublinear --balance 0,10 --modes share,sublinear --rounds 3 --steps 20 --warmup 3 --threads 16 --device cuda --mnemo $mnemo
    for v in "resnet56 none" "resnet56 sequential:4" "resnet152 none" "resnet152 sequential:4" "resnet152 sequential:8" "lstm-paper none" "lstm-paper segment:8"; do
      read -r model ck <<<"$v"
      run "torch-$model-${ck//:/-}" 100 python3 tools/bench_pytorch.py --device cuda --model $model --steps 10 --warmup 3 --checkpoint $ck
    done
    run curve-resnet152 200 python3 tools/budget_bench.py configs/table2/resnet152.yaml --points 5 --modes share,sublinear --rounds 2 --steps 10 --warmup 2 --threads 16 --device cuda --mnemo $mnemo
    run curve-lstm-paper 200 python3 tools/budget_bench.py configs/lstm-paper.yaml --points 5 --modes share,sublinear --rounds 2 --steps 10 --warmup 2 --threads 16 --device cuda --mnemo $mnemo
    ;;
  tf32)
    run torch-resnet50-tf32 130 python3 tools/bench_pytorch.py --device cuda --model resnet50 --steps 20 --warmup 3 --tf32
    run torch-lstm-paper-tf32 130 python3 tools/bench_pytorch.py --device cuda --model lstm-paper --steps 20 --warmup 3 --tf32
    ;;
  *) echo "gpu-run: unknown part '$part' (tests, bench, dp, profile, cudnn, zoo, big, split, curve or tf32)"; exit 2 ;;
esac
done
echo "--- summary"; cat "$out/summary.txt"
if ls "$out"/bench-*.log >/dev/null 2>&1; then
  echo "--- benchmarks (docs/BENCHMARKS.md table)"
  python3 tools/gpu_report.py "$out" | tee "$out/report.md"
fi
if [ -f "$out/zoo/peaks.log" ]; then
  echo "--- zoo CNNs beside PyTorch's allocator"
  grep '^|' "$out/zoo/peaks.log"
fi
