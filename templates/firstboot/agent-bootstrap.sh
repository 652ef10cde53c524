#!/bin/sh
# GPUaaS node-agent bootstrap {{ agent_version }}: install and start the agent, then enroll
# with the token from the directory given as $1 (one value per file). Served by the control
# plane, not editable through any API. Retries with backoff and trusts the site CA when the
# payload wrote one; GPUAAS_ROOT prefixes every path (empty on a node).
set -eu
R=${GPUAAS_ROOT:-}
D="$1"
value() { cat "$D/$1"; }
# The agent is installed and started (its package is the agent's own): say so apart from
# enrollment, so a start failure and an enrollment failure are told apart.
sh "$R/usr/local/lib/gpuaas/report.sh" agent ok
set --
if [ -s "$R/etc/gpuaas/ca.pem" ]; then
  set -- --cacert "$R/etc/gpuaas/ca.pem"
fi
curl -fsS --retry 8 --retry-connrefused --retry-max-time 600 "$@" -X POST \
  -H 'Content-Type: application/json' -d "{\"onboarding_id\": $(value onboarding_id), \"attempt\": $(value attempt), \"hostname\": \"$(value hostname)\", \"enrollment_token\": \"$(value enrollment_token)\", \"agent_version\": \"{{ agent_version }}\"}" \
  -- "$(value enroll_url)"
