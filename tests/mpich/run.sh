#!/usr/bin/env bash
# The suite's MPICH leg: MirrorCL built for MPICH (target/mpich) and launched by MPICH's
# Hydra mpiexec, with the main job and a representative part of the cluster suite at 1-4
# ranks, every rank checked: vecadd, the IV.7.2 microbenchmark (all-to-all) in its three
# variants, the stencil, attach, images, host threads, several hosts and a rank without
# devices, the output modes, a rank that dies,
# a wait that cannot finish, divergence, the hybrid MPI + OpenCL programs, a program of
# the other MPI refused at start, and `mirrorcl run`/`doctor`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export MIRRORCL_BUILD_MPI=mpich MPICC="${MPICC:-mpicc.mpich}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/mpich}"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
echo "== MPICH: the main job under mpiexec (library in $CARGO_TARGET_DIR)"
bash .ci/main-job
echo "== MPICH: the cluster suite's representative part under mpiexec"
cargo test --release -p mirrorcl-tests \
  --test cluster --test attach --test replicas --test output --test cli --test hosts -- \
  cluster_vecadd:: cluster_alltoall:: cluster_stencil:: cluster_attach:: cluster_images:: \
  images:: vecadd_multi:: hybrid host_threads_run_on_every_rank \
  a_wait_that_cannot_complete a_program_of_the_other_mpi stencil_and_all_to_all \
  attached_buffers_cross_the_network_only_when_needed \
  a_dead_rank a_vendor_failure divergence verify_ one_copy_of_the_output \
  all_mode_through_wrappers root_mode_through_wrappers reports_reach_the_original_stderr \
  launcher_of_the_built_mpi doctor_checks_the_machine \
  two_hosts_of_two_ranks a_rank_without_devices_runs_the_program
