#!/bin/sh
# GPUaaS node-agent bootstrap {{ agent_version }}: install and start the agent, then enroll
# with the token from the config file given as $1. Served by the control plane, not editable
# through any API.
set -eu
CONFIG="$1"
value() { sed -n "s/^$1: //p" "$CONFIG"; }
ENROLL_URL=$(value enroll_url)
# The agent is installed and started (its package is the agent's own): say so apart from
# enrollment, so a start failure and an enrollment failure are told apart.
sh /usr/local/lib/gpuaas/report.sh agent ok
curl -fsS -X POST -H 'Content-Type: application/json' "$ENROLL_URL" -d "{\"onboarding_id\": $(value onboarding_id), \"attempt\": $(value attempt), \"hostname\": \"$(value hostname)\", \"enrollment_token\": \"$(value enrollment_token)\", \"agent_version\": \"{{ agent_version }}\"}"
