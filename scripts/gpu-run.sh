#!/usr/bin/env bash
# Runs ON the GPU machine (docs/GPU.md), building nothing: the GPU tests, the GPU benchmarks and the
# PyTorch comparison, in one go, from the bundle scripts/gpu-build.sh made (carry gpu-dist/).
# Logs, JSON and CSV go to ${OUT:-gpu-out}/; a short table is printed last. Each part fits one
# device call (10 minutes at most):
#   bash scripts/gpu-run.sh tests    GPU tests, training and planning on the GPU from the CLI (also with NCCL, one rank)
#   bash scripts/gpu-run.sh bench    ResNet-50 and the paper's LSTM: mnemo beside PyTorch; the fused LSTM cell; the
#                                    all-reduce path's overhead with NCCL over one rank
#   bash scripts/gpu-run.sh big      speed per memory mode; the 1001-layer ResNet under sublinear
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
dist=gpu-dist
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

part=${1:-tests}
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
    # Throughput and memory: mnemo (share) and PyTorch eager, strict float32 on both, same batch.
    for model in resnet50-imagenet lstm-paper; do
      run "bench-$model-share" 130 $mnemo bench configs/$model.yaml --device cuda --memory share --steps 20 --warmup 3 --json
    done
    run torch-resnet50 130 python3 tools/bench_pytorch.py --device cuda --model resnet50 --steps 20 --warmup 3
    run torch-lstm-paper 130 python3 tools/bench_pytorch.py --device cuda --model lstm-paper --steps 20 --warmup 3
    # The fused LSTM cell's CUDA kernel; the reduction path's overhead with NCCL over one rank.
    run bench-lstm-2x512-fused-share 100 $mnemo bench configs/bench-lstm-2x512-fused.yaml --device cuda --memory share --steps 20 --warmup 3 --json
    run dp-one-rank-resnet56 150 python3 tools/parallel_bench.py configs/resnet56-cifar.yaml --one-rank --device cuda --rounds 3 --steps 30 --mnemo $mnemo
    ;;
  big)
    # Speed per memory mode on ResNet-50; what replaying the captured step saves on the LSTM.
    for mode in none sublinear; do
      run "bench-resnet50-imagenet-$mode" 100 $mnemo bench configs/resnet50-imagenet.yaml --device cuda --memory $mode --steps 10 --warmup 2 --json
    done
    run bench-lstm-paper-share-eager 100 $mnemo bench configs/lstm-paper.yaml --device cuda --memory share --steps 10 --warmup 2 --json --eager
    # The paper's headline: the 1001-layer ResNet, batch 32, 224x224, trains under sublinear (< 7 GB).
    run train-resnet1000-sublinear 240 $mnemo train configs/resnet1000-imagenet.yaml --device cuda --memory sublinear --steps 3 --no-eval
    ;;
  *) echo "gpu-run: unknown part '$part' (tests, bench or big)"; exit 2 ;;
esac
echo "--- summary"; cat "$out/summary.txt"
if [ "$part" != tests ]; then
  echo "--- benchmarks (docs/BENCHMARKS.md table)"
  python3 tools/gpu_report.py "$out" | tee "$out/report.md"
fi
