#!/usr/bin/env bash
# The economical mode's GPU check, in one go (about 4-6 minutes on an H200 or a T4):
#   1. the side-by-side benchmark on the card (the lab's default model, batch 6,
#      1024 timed steps per run, 2 series alternating the order; then the "full" level
#      with 256 steps), step times from CUDA events, peak allocated, activations, NVML;
#   2. bit-exact resume on CUDA with deterministic algorithms, in the normal and in the
#      economical mode (an uninterrupted run against one stopped 4 steps before the end
#      and resumed from its checkpoint: the same state_sha256), and a checkpoint of the
#      normal mode continuing in the economical mode.
# Run from anywhere:  bash scripts/gpu_check_economical.sh      (PYTHON=... to choose the
# interpreter: it needs torch with CUDA, numpy and tokenizers; pynvml is optional).
# Everything lands in $OUT (default /tmp/ternit-gpu-econ); the last lines say PASS/FAIL.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/ternit-gpu-econ}
STEPS=${STEPS:-1024}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

$PY -c 'import torch, sys; ok = torch.cuda.is_available(); print("torch", torch.__version__, "cuda", ok, torch.cuda.get_device_name(0) if ok else ""); sys.exit(0 if ok else 3)' \
  || { echo "FAIL: this python has no CUDA torch (set PYTHON=...)"; exit 3; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"

DATA="$OUT/data"
if [ ! -f "$DATA/meta.json" ]; then
  $PY -c "from pathlib import Path; from bench.synthetic import make_prepared; make_prepared(Path('$DATA'), vocab=4000, sentences=300000)" \
    || { echo "FAIL: could not make the synthetic data (needs tokenizers)"; exit 4; }
fi

status=0
echo "== 1. benchmark, selective level, $STEPS steps x 2 series"
$PY -m bench.economical --device cuda --data "$DATA" --steps "$STEPS" --series 2 \
    --level selective --json "$OUT/bench_selective.json" 2>&1 | tee "$OUT/bench_selective.txt" || status=1
echo "== 1b. benchmark, full level, 256 steps x 2 series"
$PY -m bench.economical --device cuda --data "$DATA" --steps 256 --series 2 \
    --level full --no-control --json "$OUT/bench_full.json" 2>&1 | tee "$OUT/bench_full.txt" || status=1

echo "== 2. bit-exact resume on CUDA (deterministic algorithms)"
$PY - "$OUT" "$DATA" <<'PYEOF' 2>&1 | tee "$OUT/resume.txt"
import json, subprocess, sys
from pathlib import Path

out, data = Path(sys.argv[1]), sys.argv[2]
STEPS, STOP = 40, 36

def run_dir(name, economical, steps_to=STEPS):
    d = out / "runs" / name
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("*"):
        if f.is_file():
            f.unlink()
    cfg = {"name": name,
           "model": {"context": 1024, "width": 512, "heads": 8, "layers": 8, "vocab": 4000},
           "training": {"batch_per_card": 6, "steps_to": steps_to, "warmup_steps": 10, "eval_every": 1000,
                        "eval_segments": 16, "economical": economical, "deterministic": True},
           "data": {"dir": data}}
    (d / "run.json").write_text(json.dumps(cfg))
    return d

def trainer(d, *args):
    p = subprocess.run([sys.executable, "-m", "trainer", "--run", str(d), "--device", "cuda", *args],
                       capture_output=True, text=True)
    if p.returncode:
        print(p.stdout[-2000:], p.stderr[-3000:])
        raise SystemExit(f"FAIL: trainer {d.name} {args} exited {p.returncode}")

def end_sha(d):
    ends = [json.loads(l) for l in (d / "events.jsonl").read_text().splitlines() if '"end"' in l]
    return ends[-1]["state_sha256"]

failed = False
for mode in (False, "selective"):
    whole, parted = run_dir(f"whole-{mode}", mode), run_dir(f"parted-{mode}", mode)
    trainer(whole)
    trainer(parted, "--stop-at-step", str(STOP))
    trainer(parted, "--resume", "latest")
    same = end_sha(whole) == end_sha(parted)
    failed |= not same
    print(f"economical={mode}: uninterrupted {end_sha(whole)[:16]} resumed {end_sha(parted)[:16]} ->",
          "bit-exact" if same else "DIFFERENT")
cross = run_dir("econ-from-normal", "selective", STEPS + 4)
trainer(cross, "--resume", str(out / "runs" / "whole-False" / "checkpoints" / f"step-{STEPS:08d}.pt"))
print("normal checkpoint continued in the economical mode: ok")
print("RESUME", "FAIL" if failed else "PASS")
sys.exit(1 if failed else 0)
PYEOF
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== summary"
$PY - "$OUT" <<'PYEOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in ("bench_selective", "bench_full"):
    p = out / f"{name}.json"
    if not p.exists():
        print(name, "missing"); continue
    r = json.loads(p.read_text())
    ra, q = r["ratios"], r["quality"]
    print(f"{name}: {r['device']['name']}: peak {ra['peak_bytes']:.3f}x, activations {ra['activation_bytes']:.3f}x, "
          f"median step {ra['step_time_median']:.3f}x, mean {ra['step_time_mean']:.3f}x, observed "
          f"{ra.get('observed_bytes', float('nan')):.3f}x, kernels {ra.get('ops_per_step', float('nan')):.3f}x, "
          f"FLOPs {ra.get('flops_per_step', float('nan')):.3f}x, quality diff {q['diff']:+.4f} CI {q['ci95']}, "
          f"targets {r['targets']['met']}")
PYEOF
echo "GPU CHECK $([ $status -eq 0 ] && echo PASS || echo FAIL) (files in $OUT)"
exit $status
