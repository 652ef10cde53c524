#!/bin/sh
# Site bootstrap bundle (infra-owned): fetch, check its digest, unpack, run. Written verbatim by
# the MAAS control plane's first-boot payload; it contains no value: each one is read from a
# file under /etc/gpuaas/site-bundle/, so no URL or version can become a command. Retries with
# backoff; GPUAAS_ROOT prefixes every path (empty on a node).
set -eu
R=${GPUAAS_ROOT:-}
d="$R/etc/gpuaas/site-bundle"
version=$(cat "$d/version")
fail() {
  logger -t site-bundle "site bootstrap bundle $version failed: $1" || true
  touch "$R/run/gpuaas-site-bundle.failed"  # the node-agent bootstrap does not run after this
  sh "$R/usr/local/lib/gpuaas/report.sh" site_bundle failed "site bundle $version: $1" || true
  exit 1
}
curl -fsSL --retry 8 --retry-connrefused --retry-max-time 600 \
  -o "$R/run/site-bundle.tar.gz" -- "$(cat "$d/url")" || fail download
printf '%s  %s\n' "$(cat "$d/sha256")" "$R/run/site-bundle.tar.gz" | sha256sum -c - || fail digest
mkdir -p "$R/run/site-bundle"
tar -xzf "$R/run/site-bundle.tar.gz" -C "$R/run/site-bundle" || fail unpack
"$R/run/site-bundle/run.sh" || fail run
sh "$R/usr/local/lib/gpuaas/report.sh" site_bundle ok
