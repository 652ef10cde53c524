#!/bin/sh
# GPUaaS node-agent bootstrap, after the site bundle: fetch the bootstrap script from the control
# plane (trusting /etc/gpuaas/ca.pem when present) and run it with the node-agent config. Written
# verbatim by the first-boot payload: values are read from /etc/gpuaas/agent-bootstrap/.
set -eu
test ! -e /run/gpuaas-site-bundle.failed || exit 1  # the site bundle failed and said so
d=/etc/gpuaas/agent-bootstrap
version=$(cat "$d/version")
fail() {
  logger -t gpuaas-bootstrap "node-agent bootstrap $version failed: $1"
  sh /usr/local/lib/gpuaas/report.sh agent failed "node-agent bootstrap $version: $1" || true
  exit 1
}
set --
if [ -s /etc/gpuaas/ca.pem ]; then
  set -- --cacert /etc/gpuaas/ca.pem
fi
curl -fsSL --retry 5 "$@" -o /run/gpuaas-bootstrap.sh -- "$(cat "$d/url")" || fail download
sh /run/gpuaas-bootstrap.sh /etc/gpuaas/node-agent.yaml || fail run
