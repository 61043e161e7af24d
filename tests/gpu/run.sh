#!/usr/bin/env bash
# The GPU checks of ringcc, in one command, for a machine with an NVIDIA GPU
# (and no network): build ringcc offline, run tests/gpu with pytest (the
# core's GPU backends, then backend "ring", the Horovod API and ringcc.jax on
# CUDA), then a short allreduce benchmark with diagnostics. Logs go to $OUT (a
# new temporary directory when unset). Meant to finish within about four
# minutes on 16 cores.
#
#   bash tests/gpu/run.sh
#
# Needs: python3 with pip, scikit-build-core, pybind11, cmake, a C++
# compiler, torch with CUDA; optional: cupy, the nvidia-nccl and
# nvidia-cuda-nvrtc wheels (or NCCL/NVRTC elsewhere ringcc looks).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
LOG="$OUT/run.log"
log() { echo "== $*" | tee -a "$LOG"; }
started=$(date +%s)
PY="${PYTHON:-python3}"

log "versions"
{
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 | head -5
  "$PY" --version
  "$PY" - <<'PYEOF'
import importlib
for name in ("torch", "cupy", "jax", "jaxlib", "numpy", "pybind11", "scikit_build_core", "ml_dtypes"):
    try:
        module = importlib.import_module(name)
        extra = ""
        if name == "torch":
            extra = f" cuda {module.version.cuda}, available {module.cuda.is_available()}"
        print(f"{name} {getattr(module, '__version__', '?')}{extra}")
    except Exception as error:
        print(f"{name}: not importable ({type(error).__name__}: {error})")
PYEOF
  "$PY" -m pip list 2>/dev/null | grep -i -E "^nvidia-|cupy|torch|jax" || true
  ls /usr/local/cuda*/lib64/libnvrtc.so* 2>/dev/null | head -3
} 2>&1 | tee -a "$LOG"

log "build (offline)"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-16}"
# Into $PY's environment; where pip refuses (an externally managed Python),
# with --break-system-packages; else into a virtual environment that sees
# the system's packages (torch, cupy, jax).
install() {  # python, extra pip options...
  local python="$1"
  shift
  "$python" -m pip install --no-build-isolation --no-index --no-deps "$@" -Cbuild-dir=build/gpu . \
      >>"$OUT/build.log" 2>&1
}
RUN="$PY"
if ! install "$PY"; then
  if grep -q "externally-managed" "$OUT/build.log" && install "$PY" --break-system-packages; then
    :
  else
    VENV="${RINGCC_GPU_VENV:-/tmp/ringcc-gpu-venv}"
    "$PY" -m venv --system-site-packages "$VENV" >>"$OUT/build.log" 2>&1
    RUN="$VENV/bin/python"
    if ! install "$RUN"; then
      tail -40 "$OUT/build.log" | tee -a "$LOG"
      log "build FAILED ($(( $(date +%s) - started )) s)"
      exit 1
    fi
  fi
fi
tail -3 "$OUT/build.log" | tee -a "$LOG"
log "built in $(( $(date +%s) - started )) s"
export PATH="$(dirname "$RUN"):$PATH"
# Outside the source tree, so that the installed package is the one imported.
(cd /tmp && "$RUN" -m ringcc.launcher --check-build) 2>&1 | tee -a "$LOG"

log "smoke: ringcc beside torch's CUDA"
(cd /tmp && timeout 60 "$RUN" -X faulthandler -c "
import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()
import ringcc; info = ringcc.cuda_info()
print(info['path'], info['version'], info['initialized'], info['error'] or '', [d['name'] for d in info['devices']])
ringcc.init(); x = torch.ones(4, device='cuda'); ringcc.allreduce_(x); torch.cuda.synchronize()
print('world size 1:', ringcc.gpu_backend(), x.tolist()); ringcc.shutdown()
") 2>&1 | tee -a "$LOG"

log "tests/gpu"
status=0
if "$RUN" -c "import pytest" 2>/dev/null; then
  timeout 300 "$RUN" -m pytest tests/gpu -q -rs -p no:cacheprovider --junitxml="$OUT/junit.xml" 2>&1 \
      | tee "$OUT/pytest.log" | tail -60 | tee -a "$LOG"
  status=${PIPESTATUS[0]}
else
  log "(pytest is not installed: tests/gpu/check_without_pytest.py runs the same checks)"
  timeout 300 "$RUN" tests/gpu/check_without_pytest.py 2>&1 | tee "$OUT/pytest.log" | tail -60 | tee -a "$LOG"
  status=${PIPESTATUS[0]}
fi
log "tests/gpu exit status $status ($(( $(date +%s) - started )) s)"

log "bench"
# python -m ringcc.bench.allreduce --device cuda per configuration, then what tells
# where the time goes (RINGCC_BENCH_MPS=0 skips the runs under MPS;
# RINGCC_GPU_BENCH_ARGS adds options, e.g. --mps-only or --quick).
# shellcheck disable=SC2086
timeout 240 "$RUN" tests/gpu/bench_gpu.py --out "$OUT/bench.json" ${RINGCC_GPU_BENCH_ARGS:-} 2>&1 | tee -a "$LOG"
log "done in $(( $(date +%s) - started )) s; logs in $OUT"
exit "$status"
