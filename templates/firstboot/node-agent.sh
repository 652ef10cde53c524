#!/bin/sh
# GPUaaS node-agent bootstrap, after the site bundle: fetch the bootstrap script from the control
# plane (trusting /etc/gpuaas/ca.pem when present, retrying with backoff), check it has the
# digest the payload pinned, and run it as root with the node's values (one per file under
# /etc/gpuaas/node/). Written verbatim by the first-boot payload: values are read from
# /etc/gpuaas/agent-bootstrap/. GPUAAS_ROOT prefixes every path.
set -eu
R=${GPUAAS_ROOT:-}
test ! -e "$R/run/gpuaas-site-bundle.failed" || exit 1  # the site bundle failed and said so
d="$R/etc/gpuaas/agent-bootstrap"
version=$(cat "$d/version")
fail() {
  logger -t gpuaas-bootstrap "node-agent bootstrap $version failed: $1" || true
  sh "$R/usr/local/lib/gpuaas/report.sh" agent failed "node-agent bootstrap $version: $1" || true
  exit 1
}
set --
if [ -s "$R/etc/gpuaas/ca.pem" ]; then
  set -- --cacert "$R/etc/gpuaas/ca.pem"
fi
curl -fsSL --retry 8 --retry-connrefused --retry-max-time 600 "$@" \
  -o "$R/run/gpuaas-bootstrap.sh" -- "$(cat "$d/url")" || fail download
printf '%s  %s\n' "$(cat "$d/sha256")" "$R/run/gpuaas-bootstrap.sh" | sha256sum -c - \
  || fail digest
sh "$R/run/gpuaas-bootstrap.sh" "$R/etc/gpuaas/node" || fail run
