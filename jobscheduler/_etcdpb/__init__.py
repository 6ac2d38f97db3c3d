"""Generated gRPC/protobuf modules for the subset of etcd's v3 API the project uses.

Regenerate with ``scripts/gen-protos.sh`` from ``protos/etcd/jobscheduler/_etcdpb/``;
do not edit the ``*_pb2*.py`` files by hand.
"""
