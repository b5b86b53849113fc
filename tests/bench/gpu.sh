#!/usr/bin/env bash
# Vulkan attention on a real GPU, side by side with PyTorch's scaled_dot_product_attention when
# PyTorch (with CUDA) is installed, in one run, printing one table.
#   Shapes: causal attention, 32 heads, d = 128, N = 4096 / 16384 / 65536.
#   Vulkan: fp32 (the backend's precision); PyTorch: fp16 and fp32.
# Usage (from anywhere; no arguments): tests/bench/gpu.sh
# Environment: BUILD_DIR (default build/gpu), ATTNSCOPE_VK_DEVICE (default: best GPU),
#              GPU_BENCH_SIZES (default "4096 16384 65536"), GPU_BENCH_ALLOW_CPU=1 to run on lavapipe.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build/gpu}
SIZES=${GPU_BENCH_SIZES:-"4096 16384 65536"}
OUT=$BUILD_DIR/gpu-bench
mkdir -p "$OUT"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d /tmp/attn-xdg.XXXXXX)}
chmod 700 "$XDG_RUNTIME_DIR" 2>/dev/null || true

say() { printf 'gpu.sh: %s\n' "$*" >&2; }

# 1. What is here.
if command -v nvidia-smi >/dev/null 2>&1; then
  say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
else
  say "nvidia-smi not found: no NVIDIA driver visible (the Vulkan device may be a CPU)"
fi
missing=()
for tool in cmake ninja glslc python3; do command -v $tool >/dev/null 2>&1 || missing+=($tool); done
if [ ${#missing[@]} -gt 0 ]; then
  say "missing tools: ${missing[*]} (packaging/deps.sh installs them)"; exit 2
fi

# 2. Build the benchmark binary (Release, this machine's CPU).
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_ARCH=native \
  -DBUILD_TESTING=ON >"$OUT/configure.log" 2>&1 || { cat "$OUT/configure.log"; exit 2; }
cmake --build "$BUILD_DIR" --target attn_bench -j"$(nproc)" >"$OUT/build.log" 2>&1 || {
  tail -40 "$OUT/build.log"; exit 2; }
BENCH=$BUILD_DIR/tests/bench/attn_bench
[ -x "$BENCH" ] || { say "attn_bench was not built (is libbenchmark-dev installed?)"; exit 2; }

# 3. Vulkan rows. GPU timestamps time the kernel; wall time adds uploads and read-back.
filter="BM_VulkanGpuDense/n:($(echo $SIZES | tr ' ' '|'))/"
set +e
ATTN_BENCH_GPU=1 ATTNSCOPE_VK_VALIDATION=0 GPU_BENCH_ALLOW_CPU=${GPU_BENCH_ALLOW_CPU:-0} \
  "$BENCH" --benchmark_filter="$filter" --benchmark_format=json \
  >"$OUT/vulkan.json" 2>"$OUT/vulkan.err"
vk_rc=$?
set -e
[ $vk_rc -eq 0 ] || { say "Vulkan benchmark failed (rc $vk_rc):"; tail -20 "$OUT/vulkan.err" >&2; }

# 4. PyTorch rows (same shapes, same machine, same run), when torch with CUDA is available.
TORCH_PY=""
for py in python3 /usr/bin/python3; do
  if $py -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    TORCH_PY=$py; break
  fi
done
if [ -n "$TORCH_PY" ]; then
  $TORCH_PY - "$SIZES" >"$OUT/torch.json" 2>"$OUT/torch.err" <<'PY' || say "PyTorch run failed: $(tail -3 "$OUT/torch.err")"
import json, sys, torch
import torch.nn.functional as F
H, D = 32, 128
sizes = [int(s) for s in sys.argv[1].split()]
out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "rows": []}
for dtype in (torch.float16, torch.float32):
    for n in sizes:
        row = {"dtype": str(dtype).replace("torch.", ""), "n": n}
        try:
            g = torch.Generator(device="cuda").manual_seed(n)
            q, k, v = (torch.randn(1, H, n, D, device="cuda", dtype=dtype, generator=g)
                       for _ in range(3))
            for _ in range(2):
                F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.cuda.synchronize()
            times = []
            for _ in range(5 if n < 65536 else 3):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                F.scaled_dot_product_attention(q, k, v, is_causal=True)
                b.record()
                torch.cuda.synchronize()
                times.append(a.elapsed_time(b) / 1e3)
            times.sort()
            row["seconds"] = times[len(times) // 2]
            del q, k, v
        except Exception as e:  # out of memory or no kernel for this dtype
            row["error"] = type(e).__name__ + ": " + str(e).splitlines()[0][:80]
        torch.cuda.empty_cache()
        out["rows"].append(row)
print(json.dumps(out))
PY
else
  say "PyTorch with CUDA not found: Vulkan rows only"
  echo '{}' >"$OUT/torch.json"
fi

# 5. One table.
python3 - "$OUT/vulkan.json" "$OUT/torch.json" "$SIZES" <<'PY'
import json, sys
H, D = 32, 128
sizes = [int(s) for s in sys.argv[3].split()]
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception:
        return {}
vk, th = load(sys.argv[1]), load(sys.argv[2])
useful = lambda n: 4.0 * D * H * n * (n + 1) / 2  # causal: 4d flops per visible entry
rows = []
label = ""
for b in vk.get("benchmarks", []):
    if b.get("aggregate_name") != "median":
        continue
    n = int(b["n"])
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
    label = b.get("label", "").split("| ")[-1]
    rows.append(("attnscope vulkan", "fp32", n, b["real_time"] * scale, b.get("wall_seconds"), ""))
for b in vk.get("benchmarks", []):
    if b.get("error_occurred"):
        rows.append(("attnscope vulkan", "fp32", int(b.get("n", 0) or 0), None, None,
                     b.get("error_message", "error")))
for r in th.get("rows", []):
    rows.append(("torch sdpa", r["dtype"], r["n"], r.get("seconds"), None, r.get("error", "")))
rows.sort(key=lambda r: (r[2], r[0], r[1]))
print()
print("causal attention, H=%d, d=%d; TFLOP/s count 4d flops per visible entry (N(N+1)/2 per head)"
      % (H, D))
print("vulkan device: %s" % (label or "n/a (see %s)" % sys.argv[1].replace("vulkan.json", "vulkan.err")))
if th.get("torch"):
    print("torch %s on %s" % (th["torch"], th["device"]))
else:
    print("torch: not available on this machine")
hdr = "%-18s %-8s %7s %12s %9s %12s  %s" % ("impl", "dtype", "N", "kernel ms", "TFLOP/s",
                                          "wall ms", "note")
print(hdr)
print("-" * len(hdr))
for impl, dt, n, sec, wall, note in rows:
    print("%-18s %-8s %7d %12s %9s %12s  %s" % (
        impl, dt, n, "%.2f" % (sec * 1e3) if sec else "-",
        "%.1f" % (useful(n) / sec / 1e12) if sec else "-",
        "%.1f" % (wall * 1e3) if wall else "-", note))
if not rows:
    print("(no results)")
    try:
        for line in open(sys.argv[1].replace("vulkan.json", "vulkan.err")):
            if line.strip():
                print("  vulkan: " + line.rstrip())
    except OSError:
        pass
PY
