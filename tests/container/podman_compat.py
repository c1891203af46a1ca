#!/usr/bin/env python3
"""Adapts rendered Kubernetes YAML to what podman 4.3's `kube play` (Debian 12) runs as
Kubernetes would; each change works around one of its differences:

- a Secret becomes a ConfigMap of the same (decoded) content, and a secret volume a configMap
  volume of the same mode: podman 4.3 mounts a Secret's base64 text itself as the file (and its
  stringData not at all), and crashes on a secret volume without `optional`;
- containers lose `ports`: podman 4.3 publishes every containerPort, which host networking
  refuses (with hostNetwork every port is the host's anyway);
- the emptyDir named server-log becomes a hostPath of LOG_DIR: Kubernetes makes an emptyDir
  mode 0777 (group fsGroup), podman 4.3 gives it to whichever container starts first.

Usage: podman_compat.py IN OUT LOG_DIR
"""

import base64
import sys

import yaml


def adapt(doc, log_dir):
    if doc.get("kind") == "Secret":
        data = {k: base64.b64decode(v).decode() for k, v in doc.get("data", {}).items()}
        data.update(doc.get("stringData", {}))
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"], "data": data}
    if doc.get("kind") in ("Deployment", "Pod"):
        spec = doc["spec"]["template"]["spec"] if doc["kind"] == "Deployment" else doc["spec"]
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            c.pop("ports", None)
        for v in spec.get("volumes", []):
            if "secret" in v:
                secret = v.pop("secret")
                v["configMap"] = {"name": secret["secretName"]}
                if "defaultMode" in secret:
                    v["configMap"]["defaultMode"] = secret["defaultMode"]
            if v["name"] == "server-log" and "emptyDir" in v:
                del v["emptyDir"]
                v["hostPath"] = {"path": log_dir, "type": "Directory"}
    return doc


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    with open(sys.argv[1]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    with open(sys.argv[2], "w") as f:
        yaml.safe_dump_all([adapt(d, sys.argv[3]) for d in docs], f, sort_keys=False)


if __name__ == "__main__":
    main()
