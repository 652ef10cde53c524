# OpenBao server for docker-compose.yml: integrated (raft) storage in a volume, sealed at every
# start. Init and unseal: docs/operations.md ("Secrets server"). Plain HTTP on the compose
# network only; put TLS in front (or set tls_cert_file and tls_key_file below) before anything
# outside the host can reach it.
ui           = false
api_addr     = "http://vault:8200"
cluster_addr = "http://vault:8201"

storage "raft" {
  path    = "/openbao/file"
  node_id = "bao-1"
  # production timing (the default, 5, is for slow development machines)
  performance_multiplier = 1
}

listener "tcp" {
  address         = "0.0.0.0:8200"
  cluster_address = "0.0.0.0:8201"
  tls_disable     = true
}
