#!/usr/bin/env bash
# The GPU machine as several hosts and more ranks than GPUs: the cluster suite on 2
# ranks (run-cluster-on-gpu.sh), then 4 ranks on 2 GPUs (ranks 2 and 3 own none, so the
# bytes every rank reads go down the relay tree), then two "hosts" of one rank each over
# TCP (MIRRORCL_HOST and CUDA_VISIBLE_DEVICES set per rank). Run from the repository
# root with target/gpu/ prepared by tests/gpu/prepare.sh; $OUT receives the logs.
set -u
OUT="${OUT:-$(pwd)/gpu-out}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
gpu=$PWD/target/gpu; lib=$gpu/libmirrorcl.so
OUT=$OUT/cluster timeout 400 bash tests/gpu/run-cluster-on-gpu.sh 2>&1 | grep -E "^==|rc=|passed" | head -60
echo "== 4 ranks on 2 GPUs (ranks 2, 3 own none): reads down the relay"
for p in cluster_vecadd cluster_stencil cluster_turns; do
  timeout 120 mpirun -np 4 --oversubscribe --bind-to none -x LD_PRELOAD=$lib -x MIRRORCL_PLATFORMS=NVIDIA -x MIRRORCL_EXPECT=1 -x CTEST_EXPECT_DEVICES=2 -x MIRRORCL_OUTPUT=all -x MIRRORCL_WAIT_TIMEOUT=60 $gpu/bin/$p 2>&1 | grep -cE "^\[rank [0-3]\] PASS" | sed "s/^/$p ranks passed: /"
done
timeout 200 mpirun -np 4 --oversubscribe --bind-to none -x LD_PRELOAD=$lib -x MIRRORCL_PLATFORMS=NVIDIA -x MIRRORCL_EXPECT=1 -x CTEST_EXPECT_DEVICES=2 -x MIRRORCL_OUTPUT=all -x CLUSTER_BIG_BYTES=268435456 -x MIRRORCL_STATS=1 -x MIRRORCL_WAIT_TIMEOUT=100 $gpu/bin/cluster_big 2>&1 | grep -E "PASS|FAIL|bytes_sent|bytes_rec|figure"
echo "== two hosts over TCP, one GPU each (CUDA_VISIBLE_DEVICES per rank)"
for p in cluster_vecadd cluster_alltoall cluster_stencil; do
timeout 120 mpirun -np 2 --bind-to none --mca btl tcp,self --mca pml ob1 -x LD_PRELOAD=$lib -x MIRRORCL_PLATFORMS=NVIDIA -x MIRRORCL_EXPECT=1 -x CTEST_EXPECT_DEVICES=2 -x MIRRORCL_OUTPUT=all -x MIRRORCL_SHOW_DEVICES=1 -x MIRRORCL_WAIT_TIMEOUT=60 sh -c 'export MIRRORCL_HOST=gpuhost$OMPI_COMM_WORLD_RANK CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_RANK; exec "$0"' $gpu/bin/$p 2>&1 | grep -E "PASS|FAIL|gpuhost|rank\(s\)" | head -8
done
