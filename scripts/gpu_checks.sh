#!/usr/bin/env bash
# Every GPU check of the lab in one run, for a session with an NVIDIA card (about 8 minutes
# on an H200; each part is time-boxed, so one that hangs cannot starve the others, and all
# together stay under 9½ minutes: one device call). STEPS=512 halves the benchmark's part.
#     bash scripts/gpu_checks.sh OUT_DIR
# Needs torch with CUDA, numpy, tokenizers; nvidia-ml-py for the monitor and the observed
# memory; platformdirs for the sizing check (on a bare machine: bring its wheel, e.g.
# `python3 -m pip install -q --no-index --no-deps --target /tmp/site platformdirs-*.whl`
# and `export PYTHONPATH=/tmp/site`).
# In order of importance:
#   economical.log, bench_selective.json, bench_full.json: the economical mode against the normal one (scripts/gpu_check_economical.sh:
#                the side-by-side benchmark, the `full` level, bit-exact resume on CUDA)
#   probe.json   where a step's time goes, by mode and by size: wall vs host-enqueue time,
#                kernel-busy time, kernels per step, peak memory (scripts/gpu_probe.py); the
#                ladder of sizes calibrates and checks app/sizing's speed model
#   monitor.json what the GPU monitor shows on the real card (scripts/gpu_check_monitor.py)
#   trainer.json bit-exact resume + the trainer step vs a plain loop + MFU (only with
#                TRAINER=1: measured on an H200 already, docs/gpu-2026-11-30/)
set -u
cd "$(dirname "$0")/.."
OUT=${1:-gpu-out}
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHON="$PY"
nvidia-smi --query-gpu=name,driver_version,memory.total,temperature.gpu --format=csv > "$OUT/nvidia-smi.csv" 2>&1
# Its data and run folders stay in $WORK; the two reports come to OUT (a device session
# brings back only a few files).
OUT="$WORK/economical" STEPS=${STEPS:-1024} timeout 330 bash scripts/gpu_check_economical.sh > "$OUT/economical.log" 2>&1
echo "economical: exit $?"; tail -4 "$OUT/economical.log"
cp "$WORK"/economical/bench_*.json "$OUT/" 2>/dev/null
timeout 180 $PY scripts/gpu_probe.py "$OUT/probe.json" > "$OUT/probe.log" 2>&1
echo "probe: exit $?"
# The sizing model against the probe (pure arithmetic, but app/ needs platformdirs: carry its
# wheel to a bare GPU machine; the same runs anywhere later with
# `ternit bench sizing-gpu OUT/probe.json`).
$PY -c "import sys; from app.sizing.probe_check import main; sys.exit(main(sys.argv[1:]))" "$OUT/probe.json" || true
timeout 40 $PY scripts/gpu_check_monitor.py --load-seconds 8 --bench-seconds 3 > "$OUT/monitor.json" 2> "$OUT/monitor.err"
echo "monitor: exit $?"
if [ "${TRAINER:-0}" = 1 ]; then
  timeout 130 $PY scripts/gpu_check_trainer.py "$WORK/trainer" > "$OUT/trainer.log" 2>&1
  echo "trainer: exit $?"
  cp "$WORK/trainer/gpu_check_trainer.json" "$OUT/trainer.json" 2>/dev/null
fi
