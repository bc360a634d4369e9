#!/usr/bin/env bash
# spectrn's end-to-end smoke test on a throwaway kind cluster with a mocked Neuron runtime:
#   create the cluster -> build and load spectrn's image -> fake Neuron capacity on the node ->
#   spectrn deploy (runtime sim, device-plugin resources) -> spectrn bench --prompts structured (in-cluster
#   load Job) -> check summary.json (speculation faster, acceptance reported) -> delete the cluster (trap).
#
# Needs: kind, kubectl, docker (with a running engine) and spectrn installed in .venv (make venv).
# Settings (environment): SPECTRN_KIND_CLUSTER (spectrn-smoke), SPECTRN_IMAGE (spectrn:0.1.0),
# SPECTRN_RESULTS (./results), SPECTRN_RUN_ID (kind-<time>), SPECTRN_KIND_KEEP=1 keeps the cluster.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER="${SPECTRN_KIND_CLUSTER:-spectrn-smoke}"
IMAGE="${SPECTRN_IMAGE:-spectrn:0.1.0}"
BIN="${SPECTRN_BIN:-$ROOT/.venv/bin}"
RESULTS="${SPECTRN_RESULTS:-$ROOT/results}"
RUN_ID="${SPECTRN_RUN_ID:-kind-$(date -u +%Y%m%d-%H%M%S)}"
KEEP="${SPECTRN_KIND_KEEP:-0}"
CONTEXT="kind-$CLUSTER"

say() { printf '\n== kind-smoke: %s\n' "$*"; }

for tool in kind kubectl docker; do
  command -v "$tool" >/dev/null 2>&1 || { echo "kind-smoke: '$tool' is not installed" >&2; exit 2; }
done
docker info >/dev/null 2>&1 || { echo "kind-smoke: docker has no running engine" >&2; exit 2; }
[ -x "$BIN/spectrn" ] || { echo "kind-smoke: $BIN/spectrn missing; run 'make venv' first" >&2; exit 2; }

KUBECONFIG="$(mktemp)"
export KUBECONFIG
# The same settings for every spectrn call: the simulator instead of vLLM, extended resources instead of DRA,
# simulated time 20x faster, a short startup budget, and a small bench.
SETS=(
  --set runtime=sim
  --set resources_mode=device-plugin
  --set "sim.image=$IMAGE"
  --set "spectrn_image=$IMAGE"
  --set sim.time_scale=0.05
  --set probes.startup_budget_s=300
  --set probes.period_s=5
  --set bench.requests=16
  --set bench.warmup=1
  --set "bench.concurrency=[2]"
  --set bench.max_tokens=128
)

cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && kubectl --context "$CONTEXT" get ns spectrn >/dev/null 2>&1; then
    say "failed (exit $rc): cluster state for the log"
    "$BIN/spectrn" status --context "$CONTEXT" "${SETS[@]}" || true
    kubectl --context "$CONTEXT" -n spectrn get all -o wide || true
    kubectl --context "$CONTEXT" -n spectrn get events --sort-by=.lastTimestamp | tail -n 40 || true
  fi
  if [ "$KEEP" = "1" ]; then
    say "keeping cluster $CLUSTER (kubeconfig: $KUBECONFIG)"
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    rm -f "$KUBECONFIG"
  fi
  exit "$rc"
}
trap cleanup EXIT

say "creating kind cluster $CLUSTER"
kind create cluster --name "$CLUSTER" --config "$ROOT/hack/kind-config.yaml" --kubeconfig "$KUBECONFIG" --wait 180s

say "building $IMAGE and loading it into the cluster"
docker build -t "$IMAGE" "$ROOT"
kind load docker-image "$IMAGE" --name "$CLUSTER"

say "advertising fake Neuron capacity"
"$BIN/spectrn" kind fake-neuron --context "$CONTEXT" --neuron 16 --neuroncore 128
kubectl --context "$CONTEXT" get nodes -o jsonpath='{range .items[*]}{.metadata.name}{": neuron="}{.status.allocatable.aws\.amazon\.com/neuron}{"\n"}{end}'

say "deploy: dry run, then for real"
"$BIN/spectrn" deploy --dry-run --context "$CONTEXT" "${SETS[@]}" >/dev/null
"$BIN/spectrn" deploy --context "$CONTEXT" "${SETS[@]}" --timeout 600
"$BIN/spectrn" status --context "$CONTEXT" "${SETS[@]}"

say "idempotency: a second deploy changes nothing"
plan="$("$BIN/spectrn" deploy --dry-run --context "$CONTEXT" "${SETS[@]}" 2>&1)"
grep -q "nothing to apply" <<<"$plan" || { echo "kind-smoke: a second deploy would change objects:" >&2; echo "$plan" >&2; exit 1; }

say "bench (in-cluster load Job, structured prompts), run id $RUN_ID"
"$BIN/spectrn" bench --prompts structured --run-id "$RUN_ID" --out-dir "$RESULTS" --no-report "${SETS[@]}"

say "checking $RESULTS/$RUN_ID/summary.json"
"$BIN/python" "$ROOT/hack/check_smoke.py" "$RESULTS/$RUN_ID/summary.json"

say "teardown"
"$BIN/spectrn" teardown --yes --context "$CONTEXT" "${SETS[@]}"
say "passed"
