# OpenBao server for docker-compose.yml: integrated (raft) storage in a volume, sealed at every
# start, TLS with the certificate deploy/make-secrets made (its CA: /run/secrets/ca_pem, which
# the control plane trusts through MAASCP_VAULT_CACERT). Init and unseal: docs/operations.md
# ("Secrets server").
ui           = false
api_addr     = "https://vault:8200"
cluster_addr = "https://vault:8201"

storage "raft" {
  path    = "/openbao/file"
  node_id = "bao-1"
  # production timing (the default, 5, is for slow development machines)
  performance_multiplier = 1
}

listener "tcp" {
  address         = "0.0.0.0:8200"
  cluster_address = "0.0.0.0:8201"
  tls_cert_file   = "/run/secrets/vault_crt"
  tls_key_file    = "/run/secrets/vault_key"
  tls_min_version = "tls12"
}
