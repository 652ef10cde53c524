#!/bin/sh
# Site bootstrap bundle (infra-owned): fetch, check its digest, unpack, run. Written verbatim by
# the MAAS control plane's first-boot payload; it contains no value: each one is read from a
# file under /etc/gpuaas/site-bundle/, so no URL or version can become a command.
set -eu
d=/etc/gpuaas/site-bundle
version=$(cat "$d/version")
fail() {
  logger -t site-bundle "site bootstrap bundle $version failed: $1"
  touch /run/gpuaas-site-bundle.failed  # the node-agent bootstrap does not run after this
  sh /usr/local/lib/gpuaas/report.sh site_bundle failed "site bundle $version: $1" || true
  exit 1
}
curl -fsSL --retry 5 -o /run/site-bundle.tar.gz -- "$(cat "$d/url")" || fail download
printf '%s  /run/site-bundle.tar.gz\n' "$(cat "$d/sha256")" | sha256sum -c - || fail digest
mkdir -p /run/site-bundle
tar -xzf /run/site-bundle.tar.gz -C /run/site-bundle || fail unpack
/run/site-bundle/run.sh || fail run
sh /usr/local/lib/gpuaas/report.sh site_bundle ok
