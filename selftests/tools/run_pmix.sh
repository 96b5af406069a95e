#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run under a PMIx launcher takes rank, size, local rank, local size
# and rank 0's root address from the launcher's PMIx server, with no NPROXY_*
# variable set: Open MPI's mpirun -np 4 (text table and JSON), -np 1 (one
# process, no address to exchange).  The
# local processes name their bus after the exchanged root address, so a
# verified 4-process run also shows every rank received the same address.
# PMIX_* variables naming a server that does not answer are an error; without
# libpmix nproxy-run says so and reads the launcher's environment; a Slurm
# batch script outside srun, which inherits SLURM_PROCID/SLURM_NTASKS, is not
# a launched rank.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd python3 timeout

tap_tmpdir
# No NPROXY_* variable and no other launcher's variables reach the ranks.
clean=(env)
for v in $(compgen -e); do
	case $v in
	NPROXY_* | OMPI_* | SLURM_* | PMIX_* | PMI_* | MPI_LOCAL*) clean+=(-u "$v") ;;
	esac
done
as_root=
[[ $(id -u) == 0 ]] && as_root=--allow-run-as-root

# json_check FILE PYTHON-EXPRESSION-ON-d
json_check() {
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null
}

# json_case NAME DESC PYTHON-EXPRESSION-ON-d CMD...: one result: CMD, its
# stdout in $tmp/NAME and stderr in $tmp/NAME.err, exits 0 and its JSON holds.
json_case() {
	local name=$1 desc=$2 expr=$3 rc
	shift 3
	"$@" >"$tmp/$name" 2>"$tmp/$name.err"
	rc=$?
	if ((rc == 0)) && json_check "$tmp/$name" "$expr"; then
		tap_ok "$desc"
	else
		tap_fail "$desc" "exit $rc" "$(cat "$tmp/$name" "$tmp/$name.err")"
	fi
}

tap_plan 7

# ---- Open MPI's mpirun: PMIx server in the launcher
if ! command -v mpirun >/dev/null; then
	tap_skip "mpirun -np 4 over PMIx, text table" "no mpirun (Debian openmpi-bin)"
	tap_skip "mpirun -np 4 over PMIx, JSON allreduce" "no mpirun (Debian openmpi-bin)"
	tap_skip "mpirun -np 1 over PMIx" "no mpirun (Debian openmpi-bin)"
elif ! "${clean[@]}" timeout 60 mpirun $as_root -np 1 true >"$tmp/probe" 2>&1; then
	why="mpirun cannot start a process here: $(head -c 200 "$tmp/probe")"
	tap_skip "mpirun -np 4 over PMIx, text table" "$why"
	tap_skip "mpirun -np 4 over PMIx, JSON allreduce" "$why"
	tap_skip "mpirun -np 1 over PMIx" "$why"
else
	"${clean[@]}" timeout 120 mpirun $as_root --oversubscribe -np 4 "$RUN" \
		--size 4K,256K --iters 3 --warmup 1 --timeout 90 >"$tmp/text" 2>"$tmp/text.err"
	rc=$?
	if ((rc == 0)) && grep -q "^# nproxy-run .*, 4 ranks (4 procs x 1)," "$tmp/text" &&
	   grep -q ", launcher pmix," "$tmp/text" &&
	   grep -Eq "^ +4K +[0-9]+ +uint32 .* 0 +[0-9]+$" "$tmp/text" &&
	   grep -Eq "^ +256K +[0-9]+ +uint32 .* 0 +[0-9]+$" "$tmp/text" &&
	   [[ $(grep -c "^# nproxy-run " "$tmp/text") == 1 ]]; then
		tap_ok "mpirun -np 4 over PMIx, text table: 4 ranks, launcher pmix, verified, one report"
	else
		tap_fail "mpirun -np 4 over PMIx, text table" "exit $rc" "$(cat "$tmp/text" "$tmp/text.err")"
	fi

	json_case json "mpirun -np 4 over PMIx, JSON allreduce: launcher pmix, world 4, verified" \
		'd["launcher"] == "pmix" and d["world_size"] == 4 and d["procs"] == 4 and all(r["verified"] for r in d["results"])' \
		"${clean[@]}" NPROXY_HANDSHAKE=memfd timeout 120 mpirun $as_root --oversubscribe -np 4 \
		-x NPROXY_HANDSHAKE "$RUN" --collective allreduce --size 64K --iters 3 --warmup 1 \
		--json --timeout 90
	json_case one "mpirun -np 1 over PMIx: one process (2 ranks), no root address needed" \
		'd["launcher"] == "pmix" and d["procs"] == 1 and d["world_size"] == 2 and d["results"][0]["verified"]' \
		"${clean[@]}" timeout 120 mpirun $as_root -np 1 "$RUN" --ranks-per-proc 2 --size 4K \
		--iters 2 --warmup 1 --json --timeout 60
fi

# ---- PMIX_* variables whose server is gone: a clear error, no fork
# (a failed PMIx_Init may leave libpmix's thread behind)
"${clean[@]}" PMIX_NAMESPACE=stale.1 PMIX_RANK=0 'PMIX_SERVER_URI41=stale.0;tcp4://127.0.0.1:1' \
	timeout 60 "$RUN" --procs 2 --size 4K --iters 2 --warmup 1 --timeout 30 \
	>"$tmp/stale" 2>"$tmp/stale.err"
rc=$?
if ((rc == 5)) && grep -q "PMIx_Init: .*no PMIx server answers.*PMIX_NAMESPACE=stale.1" "$tmp/stale.err" &&
   [[ ! -s $tmp/stale ]]; then
	tap_ok "stale PMIx variables: exit 5 naming PMIx_Init and the namespace, nothing run"
else
	tap_fail "stale PMIx variables" "exit $rc (want 5)" "$(cat "$tmp/stale" "$tmp/stale.err")"
fi

# ---- PMIx variables but no libpmix: said, then the launcher's environment
"${clean[@]}" NPROXY_PMIX_LIB=/nonexistent/libpmix.so.2 PMIX_NAMESPACE=x.1 PMIX_RANK=0 \
	'PMIX_SERVER_URI41=x.0;tcp4://127.0.0.1:1' OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 \
	timeout 60 "$RUN" --ranks-per-proc 2 --size 4K --iters 2 --warmup 1 --json --timeout 30 \
	>"$tmp/nolib" 2>"$tmp/nolib.err"
rc=$?
if ((rc == 0)) && grep -q "cannot load /nonexistent/libpmix.so.2" "$tmp/nolib.err" &&
   json_check "$tmp/nolib" 'd["launcher"] == "openmpi" and d["world_size"] == 2'; then
	tap_ok "no libpmix: said on stderr, Open MPI's variables used instead"
else
	tap_fail "no libpmix: fallback to the environment" "exit $rc" "$(cat "$tmp/nolib" "$tmp/nolib.err")"
fi

# ---- a Slurm batch script outside srun: no step, no PMIx server
ok=1
for step in "" 4294967294; do
	"${clean[@]}" SLURM_JOB_ID=77 SLURM_PROCID=1 SLURM_NTASKS=4 SLURM_LOCALID=0 \
		${step:+SLURM_STEP_ID=$step} timeout 60 "$RUN" --procs 2 --size 4K --iters 2 \
		--warmup 1 --json --timeout 30 >"$tmp/batch" 2>"$tmp/batch.err"
	rc=$?
	if ((rc != 0)) || ! json_check "$tmp/batch" 'd["launcher"] == "self" and d["world_size"] == 2'; then
		ok=0
		tap_diag "SLURM_STEP_ID='$step': exit $rc" "$(cat "$tmp/batch" "$tmp/batch.err")"
	fi
done
if ((ok)); then
	tap_ok "Slurm batch script (SLURM_PROCID=1 SLURM_NTASKS=4, no srun step): self-fork mode"
else
	tap_fail "Slurm batch script: self-fork mode"
fi

# ---- an srun step without PMIx (--mpi=none): the step's variables, root by hand
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for r in 0 1; do
	"${clean[@]}" SLURM_JOB_ID=77 SLURM_STEP_ID=3 SLURM_STEP_NUM_TASKS=2 SLURM_NTASKS=8 \
		SLURM_PROCID=$r SLURM_LOCALID=$r SLURM_NTASKS_PER_NODE=2 NPROXY_HANDSHAKE=memfd \
		NPROXY_ROOT_COMM_ID=127.0.0.1:$port timeout 120 "$RUN" --size 16K --iters 3 \
		--warmup 1 --json --timeout 90 >"$tmp/step.$r" 2>"$tmp/step.$r.err" &
	pids+=($!)
done
rcs=
for p in "${pids[@]}"; do wait "$p"; rcs+=" $?"; done
if [[ $rcs == " 0 0" ]] && json_check "$tmp/step.0" \
	'd["launcher"] == "slurm" and d["world_size"] == 2 and d["results"][0]["verified"]'; then
	tap_ok "srun step without PMIx: launcher slurm, size from SLURM_STEP_NUM_TASKS (2, not SLURM_NTASKS 8)"
else
	tap_fail "srun step without PMIx" "exit statuses:$rcs" "$(cat "$tmp"/step.*)"
fi
tap_done
