#!/usr/bin/env bash
# Every GPU check of the lab in one run, for a session with an NVIDIA card:
#     bash scripts/gpu_checks.sh OUT_DIR
# Each part is time-boxed and independent; results land in OUT_DIR as JSON/log files:
#   monitor.json     what the GPU monitor shows on the real card (scripts/gpu_check_monitor.py)
#   trainer.json     bit-exact resume on CUDA + the trainer step vs a plain loop + MFU
#   economical.json  economical vs normal mode (python -m trainer.bench_economical)
set -u
OUT=${1:-gpu-out}
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,temperature.gpu --format=csv > "$OUT/nvidia-smi.csv" 2>&1
timeout 45 $PY scripts/gpu_check_monitor.py --load-seconds 8 --bench-seconds 3 > "$OUT/monitor.json" 2> "$OUT/monitor.err"
echo "monitor: exit $?"
timeout 130 $PY scripts/gpu_check_trainer.py "$WORK/trainer" > "$OUT/trainer.log" 2>&1
echo "trainer: exit $?"
cp "$WORK/trainer/gpu_check_trainer.json" "$OUT/trainer.json" 2>/dev/null
timeout 100 $PY -m trainer.bench_economical --device cuda --steps 200 --series 2 --json "$OUT/economical.json" > "$OUT/economical.log" 2>&1
echo "economical: exit $?"
tail -5 "$OUT/economical.log"
