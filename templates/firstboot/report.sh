#!/bin/sh
# Report one part of the first boot to the control plane, apart from enrollment:
#   report.sh site_bundle|agent ok|failed [detail]
# Written verbatim by the MAAS control plane's first-boot payload. The node proves itself with
# its bootstrap token; every value is read from the node-agent config, and the two first
# arguments can only be the fixed words above.
set -eu
CONFIG=/etc/gpuaas/node-agent.yaml
value() { sed -n "s/^$1: //p" "$CONFIG"; }
PHASE=$1
STATUS=$2
case "$PHASE:$STATUS" in
  site_bundle:ok | site_bundle:failed | agent:ok | agent:failed) ;;
  *) exit 2 ;;
esac
DETAIL=$(printf '%s' "${3:-}" | tr -cd 'A-Za-z0-9 ._:/-' | cut -c1-500)
BODY="{\"onboarding_id\": $(value onboarding_id), \"attempt\": $(value attempt), \"hostname\": \"$(value hostname)\", \"bootstrap_token\": \"$(value bootstrap_token)\", \"phase\": \"$PHASE\", \"status\": \"$STATUS\", \"detail\": \"$DETAIL\"}"
set --
if [ -s /etc/gpuaas/ca.pem ]; then
  set -- --cacert /etc/gpuaas/ca.pem
fi
curl -fsS --retry 5 "$@" -X POST -H 'Content-Type: application/json' -d "$BODY" -- "$(value report_url)"
