#!/usr/bin/env bash
# Launches `ds2 train` (or any ds2 command) as one rank per GPU across the hosts of a hostfile,
# with the environment NCCL and Open MPI need. Each rank picks its GPU from its local rank (rank
# among the ranks of its host), so ranks are mapped by node and nothing is pinned by hand.
#
#   scripts/launch-multinode.sh --hostfile hosts.txt --gpus-per-node 8 train configs/ds2-large.yaml
#   scripts/launch-multinode.sh --hosts node1,node2 --gpus-per-node 4 --dry-run train cfg.yaml
#
# hosts.txt is Open MPI's format, one host per line: "node1 slots=8". Every host needs the same
# ds2 binary path (--ds2, default: this checkout's build/ds2) and the data at the same paths; only
# rank 0 writes the run folder. Options:
#   --net-if IFACE   network interface for NCCL's and Open MPI's TCP traffic (e.g. eth0, ib0)
#   --ib-hca HCA     InfiniBand adapters for NCCL (NCCL_IB_HCA), e.g. mlx5_0,mlx5_1
#   --network-only   NCCL without P2P/SHM inside a node (tests the cross-node path on one host)
#   --dry-run        print the mpirun command instead of running it
# NCCL's NVLink multicast stays off (NCCL_NVLS_ENABLE=0) on shared machines.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOSTFILE="" HOSTS="" GPUS_PER_NODE="" NET_IF="" IB_HCA="" DRY=0 NETWORK_ONLY=0
DS2="${DS2:-$ROOT/build/ds2}"
while [ $# -gt 0 ]; do
  case "$1" in
    --hostfile) HOSTFILE="$2"; shift 2 ;;
    --hosts) HOSTS="$2"; shift 2 ;;
    --gpus-per-node) GPUS_PER_NODE="$2"; shift 2 ;;
    --net-if) NET_IF="$2"; shift 2 ;;
    --ib-hca) IB_HCA="$2"; shift 2 ;;
    --ds2) DS2="$2"; shift 2 ;;
    --network-only) NETWORK_ONLY=1; shift ;;
    --dry-run) DRY=1; shift ;;
    -*) echo "launch-multinode: unknown option '$1' (see the top of $0)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "launch-multinode: give the ds2 command, e.g. train configs/ds2-large.yaml" >&2; exit 2; }
[ -n "$GPUS_PER_NODE" ] || { echo "launch-multinode: --gpus-per-node is required" >&2; exit 2; }
if [ -n "$HOSTFILE" ]; then
  [ -f "$HOSTFILE" ] || { echo "launch-multinode: no hostfile $HOSTFILE" >&2; exit 2; }
  NODES=$(grep -cv '^\s*\(#\|$\)' "$HOSTFILE")
  PLACE=(--hostfile "$HOSTFILE")
elif [ -n "$HOSTS" ]; then
  NODES=$(tr ',' '\n' <<<"$HOSTS" | grep -c .)
  PLACE=(-H "$(tr ',' '\n' <<<"$HOSTS" | sed "s/\$/:$GPUS_PER_NODE/" | paste -sd,)")
else
  NODES=1
  PLACE=()
fi
RANKS=$((NODES * GPUS_PER_NODE))

ENV=(-x NCCL_NVLS_ENABLE=0 -x PATH -x LD_LIBRARY_PATH)
[ -n "$NET_IF" ] && ENV+=(-x NCCL_SOCKET_IFNAME="$NET_IF" --mca btl_tcp_if_include "$NET_IF"
                          --mca oob_tcp_if_include "$NET_IF")
[ -n "$IB_HCA" ] && ENV+=(-x NCCL_IB_HCA="$IB_HCA")
[ "$NETWORK_ONLY" = 1 ] && ENV+=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1)
for var in NCCL_DEBUG NCCL_DEBUG_SUBSYS DS2_FAULT; do
  [ -n "${!var:-}" ] && ENV+=(-x "$var")
done

# ppr:G:node puts G ranks on each node in rank order, so local ranks 0..G-1 map to GPUs 0..G-1;
# --bind-to none leaves the CPU cores to ds2's loader and compute threads.
CMD=(mpirun -np "$RANKS" "${PLACE[@]}" --map-by "ppr:$GPUS_PER_NODE:node" --bind-to none
     "${ENV[@]}" "$DS2" "$@")
[ "$(id -u)" = 0 ] && CMD=("${CMD[0]}" --allow-run-as-root "${CMD[@]:1}")
if [ "$DRY" = 1 ]; then printf '%q ' "${CMD[@]}"; echo; exit 0; fi
echo "launch-multinode: $RANKS ranks on $NODES node(s), $GPUS_PER_NODE per node" >&2
exec "${CMD[@]}"
