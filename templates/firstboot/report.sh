#!/bin/sh
# Report one part of the first boot to the control plane, apart from enrollment:
#   report.sh site_bundle|agent ok|failed [detail]
# Written verbatim by the MAAS control plane's first-boot payload. The node proves itself with
# its bootstrap token; every value is read from its own file under /etc/gpuaas/node/ (one value
# per file: nothing to parse), and the two first arguments can only be the fixed words above.
# Retries with backoff (a busy or restarting control plane is waited for) and trusts the site
# CA when the payload wrote one. GPUAAS_ROOT prefixes every path (empty on a node; the tests
# run the scripts in a scratch directory).
set -eu
R=${GPUAAS_ROOT:-}
D="$R/etc/gpuaas/node"
value() { cat "$D/$1"; }
PHASE=$1
STATUS=$2
case "$PHASE:$STATUS" in
  site_bundle:ok | site_bundle:failed | agent:ok | agent:failed) ;;
  *) exit 2 ;;
esac
DETAIL=$(printf '%s' "${3:-}" | tr -cd 'A-Za-z0-9 ._:/-' | cut -c1-500)
BODY="{\"onboarding_id\": $(value onboarding_id), \"attempt\": $(value attempt), \"hostname\": \"$(value hostname)\", \"bootstrap_token\": \"$(value bootstrap_token)\", \"phase\": \"$PHASE\", \"status\": \"$STATUS\", \"detail\": \"$DETAIL\"}"
set --
if [ -s "$R/etc/gpuaas/ca.pem" ]; then
  set -- --cacert "$R/etc/gpuaas/ca.pem"
fi
curl -fsS --retry 8 --retry-connrefused --retry-max-time 600 "$@" -X POST \
  -H 'Content-Type: application/json' -d "$BODY" -- "$(value report_url)"
