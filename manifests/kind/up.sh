#!/usr/bin/env bash
# MultiQ on three kind clusters: a hub cluster and two members whose workers carry block/rack
# labels. Needs kind, kubectl, openssl, a container engine (docker or podman: set
# CONTAINER_ENGINE), and MultiQ installed locally for qctl (`pip install .` in this repository).
#
#   manifests/kind/up.sh          # create, build, install, join, run the demo
#   manifests/kind/up.sh down     # delete the three clusters
#
# What it does, in order: creates the clusters; builds the image and loads it into each; makes
# a CA and the hub's certificate (for 127.0.0.1 and the hub node's address on kind's network);
# installs the hub with its users (an admin whose token only this script and your qctl context
# know; the hub keeps its salted hash); joins both members with `qctl cluster join`; applies
# the example queues; runs the demo jobs with their logs streaming.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ENGINE=${CONTAINER_ENGINE:-docker}
IMAGE=multiq:dev
WORK=${MULTIQ_KIND_DIR:-$HOME/.local/state/multiq/kind}
HUB=multiq-hub
MEMBERS=(multiq-member-1 multiq-member-2)

if [ "${1:-}" = down ]; then
  for cluster in "$HUB" "${MEMBERS[@]}"; do kind delete cluster --name "$cluster" || true; done
  exit 0
fi

mkdir -p "$WORK"
for cluster in "$HUB" "${MEMBERS[@]}"; do
  config="$HERE/${cluster#multiq-}.yaml"
  kind get clusters | grep -qx "$cluster" || kind create cluster --config "$config"
done

"$ENGINE" build -t "$IMAGE" -f "$ROOT/Containerfile" "$ROOT"
for cluster in "$HUB" "${MEMBERS[@]}"; do
  if [ "$ENGINE" = podman ]; then
    "$ENGINE" save "$IMAGE" -o "$WORK/image.tar" && kind load image-archive "$WORK/image.tar" --name "$cluster"
  else
    kind load docker-image "$IMAGE" --name "$cluster"
  fi
done

# The hub's address on kind's network: where the members' agents reach it (node port 30470).
HUB_IP=$("$ENGINE" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$HUB-control-plane")
if [ ! -f "$WORK/ca.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=multiq-kind-ca" \
    -keyout "$WORK/ca.key" -out "$WORK/ca.crt" 2>/dev/null
fi
openssl req -newkey rsa:2048 -nodes -subj "/CN=multiq-hub" \
  -keyout "$WORK/hub.key" -out "$WORK/hub.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,IP:%s,DNS:multiq-hub.multiq-system.svc\n' "$HUB_IP" > "$WORK/san.ext"
openssl x509 -req -in "$WORK/hub.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -CAcreateserial \
  -days 365 -extfile "$WORK/san.ext" -out "$WORK/hub.crt" 2>/dev/null

[ -f "$WORK/admin-token" ] || openssl rand -hex 24 > "$WORK/admin-token"
ADMIN_HASH=$(multiq-hub hash-token < "$WORK/admin-token")
cat > "$WORK/users.yaml" <<EOF
users:
  - name: admin
    groups: ["multiq:admins"]
    tokenHash: "$ADMIN_HASH"
EOF

hubctl=(kubectl --context "kind-$HUB")
"${hubctl[@]}" apply -f "$ROOT/manifests/hub/namespace.yaml"
"${hubctl[@]}" -n multiq-system create secret generic multiq-hub-users \
  --from-file=users.yaml="$WORK/users.yaml" --dry-run=client -o yaml | "${hubctl[@]}" apply -f -
"${hubctl[@]}" -n multiq-system create secret tls multiq-hub-tls \
  --cert="$WORK/hub.crt" --key="$WORK/hub.key" --dry-run=client -o yaml | "${hubctl[@]}" apply -f -
"${hubctl[@]}" apply -k "$ROOT/manifests/overlays/kind"
"${hubctl[@]}" -n multiq-system rollout status deploy/multiq-hub --timeout=180s

export MULTIQ_SERVER=https://127.0.0.1:8470
export MULTIQ_TOKEN
MULTIQ_TOKEN=$(cat "$WORK/admin-token")
export MULTIQ_CERTIFICATE_AUTHORITY="$WORK/ca.crt"
for member in "${MEMBERS[@]}"; do
  qctl get clusters "$member" >/dev/null 2>&1 ||
    qctl cluster join "$member" --context "kind-$member" --image "$IMAGE" \
      --hub-url "https://$HUB_IP:30470"
done

qctl apply -f "$ROOT/examples/kind/fleet.yaml"
echo
echo "MultiQ is up. To use it from this shell:"
echo "  export MULTIQ_SERVER=$MULTIQ_SERVER MULTIQ_TOKEN=\$(cat $WORK/admin-token) MULTIQ_CERTIFICATE_AUTHORITY=$WORK/ca.crt"
echo
qctl submit -f "$ROOT/examples/kind/hello.yaml" --follow
