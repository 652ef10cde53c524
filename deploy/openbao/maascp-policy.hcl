# What the control plane's AppRole may do: versioned secrets under secret/maascp/ (KV v2), and
# removing a path's metadata and versions (tokens of a finished onboarding). Nothing else.
path "secret/data/maascp/*" {
  capabilities = ["create", "read", "update"]
}
path "secret/metadata/maascp/*" {
  capabilities = ["read", "delete"]
}
