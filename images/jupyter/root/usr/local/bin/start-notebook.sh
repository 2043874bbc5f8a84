#!/bin/bash
# Starts Jupyter Server the way the Notebook operator configures its pod
# (operators/notebook/internal/render): NB_PREFIX is the base URL,
# JUPYTER_PORT the port, HOME the workspace volume, JUPYTER_TOKEN the access
# token. The token stays in the environment (jupyter_server reads
# JUPYTER_TOKEN itself): an argument would be visible to every process on
# the node. The root filesystem may be read-only: everything Jupyter writes
# goes to HOME and /tmp.
set -euo pipefail
[[ -n ${JUPYTER_TOKEN:-} ]] || { echo "JUPYTER_TOKEN is required" >&2; exit 1; }
export HOME=${HOME:-/home/jovyan}
export JUPYTER_RUNTIME_DIR=${JUPYTER_RUNTIME_DIR:-/tmp/jupyter-runtime}
export IPYTHONDIR=${IPYTHONDIR:-$HOME/.ipython}
export SHELL=/bin/bash
cd "$HOME"
exec /usr/bin/python3 -m jupyter_server \
  --ServerApp.ip=0.0.0.0 \
  --ServerApp.port="${JUPYTER_PORT:-8888}" \
  --ServerApp.base_url="${NB_PREFIX:-/}" \
  --ServerApp.root_dir="$HOME" \
  --ServerApp.allow_remote_access=True \
  --ServerApp.open_browser=False \
  "$@"
