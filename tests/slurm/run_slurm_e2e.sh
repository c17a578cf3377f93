#!/usr/bin/env bash
# End-to-end test of workflow/profiles/slurm against a real single-node SLURM on this machine.
#
#   bash tests/slurm/run_slurm_e2e.sh        # as root, Debian 12 (bookworm); about 5 min on 2 cores
#
# 1. installs munge, slurmctld, slurmd and slurm-client (Debian's slurm-wlm 22.05) if missing;
# 2. starts munged (as user munge), slurmctld and slurmd by hand (no systemd), configured from
#    tests/slurm/slurm.conf.in and gres.conf.in (written to /etc/slurm, removed at the end) with
#    the node line of `slurmd -C`; state and logs under $E2E_DIR; checks `sbatch --wrap true`;
# 3. installs snakemake-executor-plugin-slurm into the venv (pip install -e '.[slurm]');
# 4. copies the repository (tracked and untracked, not ignored files) to a fresh folder and runs
#    the cpu target end to end with `snakemake --workflow-profile workflow/profiles/slurm`;
# 5. checks that every job of the workflow went through sbatch (one plugin log per rule, each
#    job id COMPLETED in SLURM's job-completion log, only the action-less `all` run locally),
#    that the cpu train asked for no GPU, that results/cpu/train/result.json exists and that
#    its loss fell;
# 6. builds the GPU targets' train and evaluate sbatch lines with the plugin's own code from the
#    profile's resources and submits them with a probe job (gpu_sbatch_lines.py): the node
#    advertises one fake GPU per model, and each line must get one GPU of its type;
# 7. stops every daemon it started by the PID in its pidfile (trap on exit, also on failure).
# Exits non-zero on any failure. Idempotent: each run starts from scratch; daemons left by a run
# killed before its trap ran are stopped first, through their pidfiles under $E2E_DIR.
#
# Environment: E2E_DIR (default /tmp/coppelius-slurm-e2e: SLURM state, logs, the copy),
# VENV (default REPO/.venv), E2E_KEEP=1 keeps the workflow copy after a pass,
# STATUS_INTERVAL (default 5): the plugin's seconds before its first status check.
set -Eeuo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${VENV:-$REPO/.venv}
E2E_DIR=${E2E_DIR:-/tmp/coppelius-slurm-e2e}
RUN=$E2E_DIR/slurm
WORK=$E2E_DIR/workflow
# The configuration must be at SLURM's default path: the plugin's job step drops SLURM_* from
# the environment (SLURM_CONF included) before its nested srun. A foreign one is not touched.
SLURM_CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
MARKER="# written by coppelius tests/slurm/run_slurm_e2e.sh"
# the plugin's first status check comes this many seconds after a submission, then every
# 10 s more while nothing finished; 300 s MinJobAge >= 3x this
STATUS_INTERVAL=${STATUS_INTERVAL:-5}
T0=$EPOCHREALTIME

elapsed() { awk -v now="$EPOCHREALTIME" -v t0="$T0" "BEGIN { printf \"$1\", now - t0 }"; }
say() { printf '[slurm-e2e %ss] %s\n' "$(elapsed %6.1f)" "$*"; }
fail() { say "FAIL: $*"; exit 1; }

# Stop the process named in a pidfile, if it is alive and is the program we expect: SIGTERM,
# then SIGKILL after $3 seconds (default 10).
stop_pidfile() {
    local pidfile=$1 name=$2 wait_s=${3:-10} pid i
    [[ -s $pidfile ]] || return 0
    pid=$(tr -dc 0-9 <"$pidfile")
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) != "$name" ]]; then
        rm -f "$pidfile"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq $((wait_s * 5))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        say "$name (pid $pid) ignored SIGTERM for $wait_s s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    say "stopped $name (pid $pid)"
}

stop_daemons() {
    # a workflow still running (this script was killed): `timeout` passes SIGTERM on to
    # Snakemake, which cancels its SLURM jobs
    stop_pidfile "$E2E_DIR/snakemake.pid" timeout 90
    stop_pidfile "$RUN/slurmd.pid" slurmd
    stop_pidfile "$RUN/slurmctld.pid" slurmctld
    local conf
    for conf in "$SLURM_CONF" "$GRES_CONF"; do
        if [[ -f $conf ]] && head -n 1 "$conf" | grep -qxF "$MARKER"; then rm -f "$conf"; fi
    done
    if [[ -s $RUN/munged.started ]]; then
        stop_pidfile /run/munge/munged.pid munged
        rm -f "$RUN/munged.started"
    fi
}

on_exit() {
    local rc=$?
    trap - EXIT
    set +e
    if [[ $rc -ne 0 && -d $RUN ]]; then
        say "last lines of the SLURM logs ($RUN):"
        tail -n 15 "$RUN/slurmctld.log" "$RUN/slurmd.log" 2>/dev/null | sed 's/^/    /'
    fi
    stop_daemons
    if [[ $rc -eq 0 && ${E2E_KEEP:-0} != 1 ]]; then rm -rf "$WORK"; fi
    say "$([[ $rc -eq 0 ]] && echo PASS || echo "FAILED (exit $rc)") in $(elapsed %.0f) s"
    exit "$rc"
}

[[ $(id -u) -eq 0 ]] || { echo "run as root: it installs packages and starts daemons" >&2; exit 2; }
[[ -x $VENV/bin/python ]] || { echo "no venv at $VENV (python3 -m venv .venv && .venv/bin/pip install -e .)" >&2; exit 2; }

# daemons left by an earlier run that was killed before its trap ran
stop_daemons
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- 1. packages
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null ||
    ! command -v munged >/dev/null; then
    say "installing munge slurmctld slurmd slurm-client"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq munge slurmctld slurmd slurm-client >/dev/null
fi
say "$(slurmctld -V) installed"

# ---------------------------------------------------------------- 2. daemons
rm -rf "$E2E_DIR"
mkdir -p "$RUN/ctld" "$RUN/slurmd"
chmod 755 "$E2E_DIR" "$RUN"

# munge: the key comes with the package (Debian's postinst); no systemd, so the runtime folder
# is made by hand. A munged that is already running (not ours) is used and left alone.
[[ -s /etc/munge/munge.key ]] || { mungekey --create --keyfile=/etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key; }
if [[ -s /run/munge/munged.pid ]] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; then
    say "munged already running (pid $(cat /run/munge/munged.pid)): using it"
else
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged
    echo started >"$RUN/munged.started"
    say "started munged (pid $(cat /run/munge/munged.pid))"
fi
munge -n | unmunge >/dev/null || fail "munge round trip"

HOST=$(hostname -s)
NODE=$(slurmd -C | head -n 1)
[[ $NODE == NodeName=$HOST\ * ]] || fail "slurmd -C printed an unexpected node line: $NODE"
for conf in "$SLURM_CONF" "$GRES_CONF"; do
    [[ ! -e $conf ]] || fail "$conf exists and is not this test's: this machine has a SLURM of its own"
done
mkdir -p "$(dirname "$SLURM_CONF")"
for conf in "$SLURM_CONF" "$GRES_CONF"; do
    {
        echo "$MARKER"
        sed -e "s|@RUN@|$RUN|g" -e "s|@HOST@|$HOST|g" -e "s|@NODE@|$NODE|g" "$REPO/tests/slurm/$(basename "$conf").in"
    } >"$conf"
done
say "node: $NODE"

slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for i in $(seq 60); do
    state=$(sinfo -h -N -n "$HOST" -o %t 2>/dev/null || true)
    [[ $state == idle ]] && break
    sleep 0.5
done
[[ ${state:-} == idle ]] || fail "node $HOST is '${state:-unreachable}', not idle, after 30 s"
say "slurmctld (pid $(cat "$RUN/slurmctld.pid")) and slurmd (pid $(cat "$RUN/slurmd.pid")) up; node idle, GPUs $(sinfo -h -N -n "$HOST" -o %G)"
job=$(sbatch --parsable -o /dev/null --wrap true)
for i in $(seq 60); do
    grep -q "^JobId=$job .*JobState=COMPLETED" "$RUN/jobcomp.txt" 2>/dev/null && break
    sleep 0.5
done
grep -q "^JobId=$job .*JobState=COMPLETED" "$RUN/jobcomp.txt" || fail "smoke job $job did not complete"
say "smoke job $job (sbatch --wrap true) COMPLETED"

# ---------------------------------------------------------------- 3. plugin
# pyproject's `slurm` extra: snakemake-executor-plugin-slurm==2.8.0 (and its job-step plugin)
if ! "$VENV/bin/python" -c 'import snakemake_executor_plugin_slurm, snakemake_executor_plugin_slurm_jobstep' 2>/dev/null ||
    [[ $("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("snakemake-executor-plugin-slurm"))') != 2.8.0 ]]; then
    "$VENV/bin/pip" install -q -e "$REPO[slurm]" >"$E2E_DIR/pip.log" 2>&1 ||
        { grep -v '^WARNING: Location' "$E2E_DIR/pip.log" | tail -n 20; fail "pip install -e '.[slurm]'"; }
    say "installed the slurm extra"
fi
"$VENV/bin/python" -c 'import snakemake_executor_plugin_slurm, snakemake_executor_plugin_slurm_jobstep' ||
    fail "the plugin does not import"
say "snakemake $("$VENV/bin/snakemake" --version), plugin $("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("snakemake-executor-plugin-slurm"))')"

# ---------------------------------------------------------------- 4. the workflow through sbatch
mkdir -p "$WORK"
# tracked and untracked files, less the ignored ones (a tracked file deleted in the work tree
# is skipped)
(cd "$REPO" && git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) |
    tar -xf - -C "$WORK"
[[ -f $WORK/Snakefile && -f $WORK/workflow/profiles/slurm/profile.yaml ]] || fail "copy of the repository is incomplete"
rm -rf "$WORK/results" "$WORK/.snakemake"
say "copied the repository to $WORK ($(cd "$WORK" && find . -type f | wc -l) files)"

cd "$WORK"
unset COPPELIUS_STORE
SNAKE=("$VENV/bin/snakemake" --workflow-profile workflow/profiles/slurm
    --slurm-init-seconds-before-status-checks "$STATUS_INTERVAL" --slurm-keep-successful-logs
    --slurm-logdir "$E2E_DIR/slurm_logs")
say "running: snakemake --workflow-profile workflow/profiles/slurm (cpu target), verbose log in $E2E_DIR/snakemake.log"
T1=$(date +%s)
timeout 1500 "${SNAKE[@]}" --verbose >"$E2E_DIR/snakemake.log" 2>&1 &
echo $! >"$E2E_DIR/snakemake.pid"
if ! wait $!; then
    tail -n 40 "$E2E_DIR/snakemake.log" | sed 's/^/    /'
    fail "snakemake through SLURM failed (or hung for 25 min: see the squeue trap in docs/cluster.md)"
fi
T2=$(date +%s)
rm -f "$E2E_DIR/snakemake.pid"
say "workflow done in $((T2 - T1)) s"

# ---------------------------------------------------------------- 5. checks
# the jobs Snakemake ran: every rule but the target rule `all` (no action: Snakemake finishes
# it itself, as a 'localrule') must have gone to SLURM
mapfile -t rules < <(sed -n 's/^rule \([a-z_]*\):$/\1/p' "$E2E_DIR/snakemake.log" | sort -u)
mapfile -t local_rules < <(sed -n 's/^localrule \([a-z_]*\):$/\1/p' "$E2E_DIR/snakemake.log" | sort -u)
expected=(admit configure elf evaluate init plan prepare realize report tables train)
[[ ${rules[*]} == "${expected[*]}" ]] || fail "rules sent to SLURM: ${rules[*]}; expected ${expected[*]}"
[[ ${local_rules[*]} == all ]] || fail "rules run outside SLURM: ${local_rules[*]}; expected only 'all'"
[[ $(grep -c '^Job [0-9]* has been submitted with SLURM jobid' "$E2E_DIR/snakemake.log") -eq ${#expected[@]} ]] ||
    fail "not every job was submitted with sbatch: $(grep -c 'has been submitted with SLURM jobid' "$E2E_DIR/snakemake.log") of ${#expected[@]}"
listing=()
for rule in "${expected[@]}"; do
    logs=("$E2E_DIR"/slurm_logs/rule_"$rule"/*.log)
    [[ ${#logs[@]} -eq 1 && -f ${logs[0]} ]] || fail "rule $rule: expected one SLURM log, found ${#logs[@]}"
    id=$(basename "${logs[0]}" .log)
    line=$(grep "^JobId=$id " "$RUN/jobcomp.txt") || fail "rule $rule: SLURM job $id not in the job-completion log"
    [[ $line == *JobState=COMPLETED* ]] || fail "rule $rule: SLURM job $id: $line"
    grep -q "Finished job\|Finished jobid" "${logs[0]}" || fail "rule $rule: its SLURM log ${logs[0]} shows no finished job"
    listing+=("$(printf '    SLURM job %-3s %-10s %s' "$id" "$rule" "$(grep -o 'StartTime=[^ ]*\|EndTime=[^ ]*\|NodeList=[^ ]*\|Tres=[^ ]*' <<<"$line" | tr '\n' ' ')")")
done
printf '%s\n' "${listing[@]}" | sort -n -k3
say "all ${#expected[@]} jobs ran through sbatch and COMPLETED in SLURM"
train_call=$(grep -m1 'sbatch call: .*--comment rule_train ' "$E2E_DIR/snakemake.log" | sed 's/ --wrap=.*//') ||
    fail "no sbatch call for train in the snakemake log"
[[ $train_call != *--gpus* && $train_call != *--gres* ]] || fail "the cpu target's train asked for a GPU: $train_call"
say "cpu train went without a GPU: ${train_call#*sbatch call: }"

result=$WORK/results/cpu/train/result.json
[[ -s $result ]] || fail "no $result"
"$VENV/bin/python" - "$result" <<'EOF' || fail "the training loss did not fall"
import json, sys
r = json.load(open(sys.argv[1]))
losses = [s["loss"] for s in r["steps"] if not s["skipped"]]
n = max(1, len(losses) // 10)
first, last = sum(losses[:n]) / n, sum(losses[-n:]) / n
print(f"    status {r['status']}, {len(r['steps'])} steps, loss {r['initial_loss']:.4f} -> {r['final_loss']:.4f}"
      f" (mean of the first {n} steps {first:.4f}, of the last {n} {last:.4f})")
sys.exit(0 if r["status"] == "completed" and r["final_loss"] < r["initial_loss"] and last < first else 1)
EOF
say "results/cpu/train/result.json: the loss fell"

# ---------------------------------------------------------------- 6. the GPU targets' sbatch lines
# This machine has no GPU, so the GPU targets cannot train here; their train and evaluate lines
# are built by the plugin from the profile's resources and submitted with a probe as the job.
say "GPU targets: sbatch lines of train and evaluate, submitted to SLURM with a probe"
"$VENV/bin/python" "$REPO/tests/slurm/gpu_sbatch_lines.py" "$VENV/bin/snakemake" "$E2E_DIR/gpu_probe_logs" ||
    fail "GPU sbatch lines"
say "GPU targets: each line asks for --gpus=MODEL:1 and SLURM ran it on one GPU of that type"
cd /
