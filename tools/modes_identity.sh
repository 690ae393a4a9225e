#!/usr/bin/env bash
# Checks that every memory mode gives bitwise the same loss and gradients on a config's model, for
# models too large for the unit tests (e.g. VGG and AlexNet, whose classifiers need 224x224 inputs):
#
#   tools/modes_identity.sh CONFIG [--batch N] [--mnemo PATH] [--modes "none share ..."]
#
# Writes the model's initial weights (`mnemo train --save-init`) and one random batch, runs
# `mnemo grad` once per mode on them, and compares the output files' SHA-256 (the loss and every
# gradient, same metadata). Prints one line per mode and exits 1 if any differs from `none`.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mnemo=$here/../build/mnemo batch=2
modes="none inplace share drop-bn-relu sublinear recursive recursive=2 optimal"
cfg=${1:?usage: tools/modes_identity.sh CONFIG [--batch N] [--mnemo PATH] [--modes LIST]}
shift
while [[ $# -gt 0 ]]; do
  case $1 in
    --batch) batch=$2; shift 2 ;;
    --mnemo) mnemo=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    *) echo "modes_identity: unknown option $1" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The config at the asked batch size.
sed -E "s/^( *batch:).*/\1 $batch/" "$cfg" >"$tmp/c.yaml"
"$mnemo" train "$tmp/c.yaml" --save-init "$tmp/w.safetensors" >/dev/null
# One batch: data of the config's sample shape, labels below its class count (safetensors by hand).
python3 - "$tmp/c.yaml" "$tmp/b.safetensors" <<'EOF'
import json, random, re, struct, sys
text = open(sys.argv[1]).read()
shape = [int(v) for v in re.search(r"shape: \[([0-9, ]+)\]", text).group(1).split(",")]
classes = int(re.search(r"classes: ([0-9]+)", text).group(1))
batch = int(re.search(r"batch: ([0-9]+)", text).group(1))
rng = random.Random(5)
n = batch
for d in shape:
    n *= d
data = struct.pack(f"<{n}f", *[rng.uniform(-1, 1) for _ in range(n)])
labels = struct.pack(f"<{batch}i", *[rng.randrange(classes) for _ in range(batch)])
header = {"data": {"dtype": "F32", "shape": [batch] + shape, "data_offsets": [0, len(data)]},
          "labels": {"dtype": "I32", "shape": [batch], "data_offsets": [len(data), len(data) + len(labels)]}}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + data + labels)
EOF
ref=""
status=0
for m in $modes; do
  t0=$(date +%s.%N)
  "$mnemo" grad "$tmp/c.yaml" --weights "$tmp/w.safetensors" --batch "$tmp/b.safetensors" --out "$tmp/g.safetensors" \
    --memory "$m" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
  sum=$(sha256sum "$tmp/g.safetensors" | cut -c1-16)
  [[ -z $ref ]] && ref=$sum
  verdict=$([[ $sum == "$ref" ]] && echo "identical" || echo "DIFFERS")
  [[ $verdict == identical ]] || status=1
  printf '%-14s %s  %s  (%s; %.1f s)\n' "$m" "$sum" "$verdict" "$(grep -o 'loss [0-9.]*' "$tmp/log" | head -1)" "$(echo "$(date +%s.%N) - $t0" | bc)"
done
exit $status
