#!/usr/bin/env python3
"""Adapts rendered Kubernetes YAML to what podman 4.3's `kube play` (Debian 12) runs as
Kubernetes would; each change works around one of its differences:

- a Secret becomes a ConfigMap of the same (decoded) content, and a secret volume a configMap
  volume of the same mode: podman 4.3 mounts a Secret's base64 text itself as the file (and its
  stringData not at all), and crashes on a secret volume without `optional`;
- containers lose `ports`: podman 4.3 publishes every containerPort, which host networking
  refuses (with hostNetwork every port is the host's anyway);
- the emptyDir named server-log becomes a hostPath of LOG_DIR: Kubernetes makes an emptyDir
  mode 0777 (group fsGroup), podman 4.3 gives it to whichever container starts first;
- with --statefulset-ordinal N, a StatefulSet becomes the Pod its controller makes for ordinal
  N, which podman 4.3 cannot do (it runs no StatefulSet): named <statefulset>-N, its host name
  that name and its subdomain the serviceName, as the controller sets them (a shard reads its
  ordinal from the host name), each volumeClaimTemplate a claim <template>-<statefulset>-N, which
  podman makes a named volume the first time and mounts again when the pod is played again;
- with --listen-address ADDR, the pglock-exporter container also gets --web.listen-address=ADDR:
  under host networking the pods share one address, where Kubernetes gives each pod its own.

Usage: podman_compat.py IN OUT [LOG_DIR] [--statefulset-ordinal N] [--listen-address ADDR]
"""

import argparse
import base64
import sys

import yaml


def statefulset_pod(doc, ordinal):
    """The Pod the StatefulSet controller makes for `ordinal`."""
    name = f"{doc['metadata']['name']}-{ordinal}"
    template = doc["spec"]["template"]
    labels = dict(template.get("metadata", {}).get("labels", {}))
    labels["statefulset.kubernetes.io/pod-name"] = name
    spec = template["spec"]
    spec["hostname"] = name
    spec["subdomain"] = doc["spec"]["serviceName"]
    for claim in doc["spec"].get("volumeClaimTemplates", []):
        claim_name = f"{claim['metadata']['name']}-{name}"
        spec.setdefault("volumes", []).append(
            {"name": claim["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim_name}})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": spec}


def adapt(doc, log_dir, listen_address=None):
    if doc.get("kind") == "Secret":
        data = {k: base64.b64decode(v).decode() for k, v in doc.get("data", {}).items()}
        data.update(doc.get("stringData", {}))
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"], "data": data}
    if doc.get("kind") in ("Deployment", "Pod"):
        spec = doc["spec"]["template"]["spec"] if doc["kind"] == "Deployment" else doc["spec"]
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            c.pop("ports", None)
            if listen_address and c["name"] == "pglock-exporter":
                c["args"] = c.get("args", []) + [f"--web.listen-address={listen_address}"]
        for v in spec.get("volumes", []):
            if "secret" in v:
                secret = v.pop("secret")
                v["configMap"] = {"name": secret["secretName"]}
                if "defaultMode" in secret:
                    v["configMap"]["defaultMode"] = secret["defaultMode"]
            if v["name"] == "server-log" and "emptyDir" in v:
                if log_dir is None:
                    sys.exit("podman_compat.py: a server-log emptyDir needs LOG_DIR")
                del v["emptyDir"]
                v["hostPath"] = {"path": log_dir, "type": "Directory"}
    return doc


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("log_dir", nargs="?")
    parser.add_argument("--statefulset-ordinal", type=int)
    parser.add_argument("--listen-address")
    args = parser.parse_args()
    with open(args.input) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    if args.statefulset_ordinal is not None:
        docs = [statefulset_pod(d, args.statefulset_ordinal) if d.get("kind") == "StatefulSet" else d
                for d in docs]
    with open(args.output, "w") as f:
        yaml.safe_dump_all([adapt(d, args.log_dir, args.listen_address) for d in docs], f,
                           sort_keys=False)


if __name__ == "__main__":
    main()
