#!/usr/bin/env bash
# Regenerate jobscheduler/_etcdpb/*_pb2*.py{,i} from protos/etcd/ (run from anywhere).
# grpcio-tools must match the pinned grpcio (pyproject: grpcio==1.85.3, grpcio-tools==1.85.1).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
"$PYTHON" -m grpc_tools.protoc -Iprotos/etcd --python_out=. --grpc_python_out=. --pyi_out=. \
    protos/etcd/jobscheduler/_etcdpb/*.proto
