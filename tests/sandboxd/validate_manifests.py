"""Validate deploy/kubernetes/ without a cluster.

- Kubernetes' own kinds (ConfigMap, Secret, NetworkPolicy) against Kubernetes' published JSON
  schemas, strict (no unknown fields), from PyPI `kubernetes-validate`.
- agent-sandbox's kinds (SandboxTemplate, SandboxWarmPool) against band's transcription of their
  fields (tests/sandboxd/agent-sandbox-v1beta1.json), and, when CRD_DIR is given, against the
  openAPIV3Schema of the upstream CRDs' served versions found there (a copy of agent-sandbox's
  k8s/crds/: no registry CI reaches ships them, so none is kept in this repository), with
  unknown fields refused as the API server's pruning would drop them; the SandboxTemplate's pod
  template as a Kubernetes PodTemplate, strict.
- Each check must be able to fail: a broken copy of each manifest is refused.

Usage: validate_manifests.py DEPLOY_DIR SCHEMA_JSON [CRD_DIR]
"""

import copy
import glob
import os
import sys

import json

import jsonschema
import kubernetes_validate
import yaml

K8S = "1.37.0"


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def own_schemas(path):
    """band's transcription: {(apiVersion, kind): schema}, each with the file's definitions."""
    doc = json.load(open(path))
    out = {}
    for key, schema in doc["kinds"].items():
        version, kind = key.split(" ")
        out[(version, kind)] = dict(schema, definitions=doc["definitions"])
    return out


def crd_schemas(crd_dir):
    out = {}
    for path in glob.glob(os.path.join(crd_dir, "*.yaml")):
        crd = yaml.safe_load(open(path))
        group = crd["spec"]["group"]
        kind = crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            if v.get("served"):
                out[(f"{group}/{v['name']}", kind)] = closed(v["schema"]["openAPIV3Schema"])
    return out


def closed(schema):
    """The schema with unknown properties refused wherever it lists properties (a structural
    schema's pruning, as a validation error), x-kubernetes-* extensions honoured."""
    s = copy.deepcopy(schema)

    def walk(node):
        if not isinstance(node, dict):
            return
        if node.get("x-kubernetes-int-or-string"):
            node.pop("type", None)
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node.setdefault("additionalProperties", False)
        for k, v in list(node.items()):
            if k in ("properties",):
                for p in v.values():
                    walk(p)
            elif isinstance(v, dict):
                walk(v)
            elif isinstance(v, list):
                for i in v:
                    walk(i)
    walk(s)
    # metadata is ObjectMeta: the CRD says only "object".
    return s


def errors_crd(doc, schema_sets):
    key = (doc.get("apiVersion"), doc.get("kind"))
    errs = []
    for name, schemas in schema_sets:
        if key not in schemas:
            errs.append(f"{name}: no schema for {key}")
            continue
        v = jsonschema.Draft7Validator(schemas[key])
        errs += [f"{name}: {'/'.join(map(str, e.path))}: {e.message}" for e in v.iter_errors(doc)]
    if doc["kind"] == "SandboxTemplate":
        pt = {"apiVersion": "v1", "kind": "PodTemplate",
              "metadata": {"name": doc["metadata"]["name"]},
              "template": doc["spec"]["podTemplate"]}
        errs += errors_k8s(pt)
    return errs


def errors_k8s(doc):
    try:
        kubernetes_validate.validate(doc, K8S, strict=True)
        return []
    except kubernetes_validate.ValidationError as e:
        return [str(e.message)]
    except kubernetes_validate.SchemaNotFoundError as e:
        return [f"no Kubernetes schema: {e}"]


def errors(doc, schema_sets):
    if "agents.x-k8s.io" in doc.get("apiVersion", ""):
        return errors_crd(doc, schema_sets)
    return errors_k8s(doc)


def broken(doc):
    """A copy with one mistake of the kind each schema catches."""
    d = copy.deepcopy(doc)
    kind = d["kind"]
    if kind == "SandboxTemplate":
        d["spec"]["podTemplate"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = "SYS_ADMIN"
    elif kind == "SandboxWarmPool":
        d["spec"]["replicas"] = -1
    elif kind == "NetworkPolicy":
        d["spec"]["egress"][0]["ports"][0]["protocol"] = 53
    elif kind == "ConfigMap":
        d["data"]["BAND.md"] = 1
    else:
        d["typo"] = True
    return d


def main():
    deploy, own = sys.argv[1:3]
    schemas = [("band's transcription", own_schemas(own))]
    if len(sys.argv) > 3:
        schemas.append(("the upstream CRDs", crd_schemas(sys.argv[3])))
        print(f"checking against the upstream CRDs in {sys.argv[3]} too", flush=True)
    kinds = set()
    for path in sorted(glob.glob(os.path.join(deploy, "*.yaml"))):
        for doc in yaml.safe_load_all(open(path)):
            if not doc:
                continue
            name = f"{os.path.basename(path)}: {doc['kind']} {doc['metadata']['name']}"
            errs = errors(doc, schemas)
            if errs:
                fail(f"{name}: " + "; ".join(errs))
            print(f"ok: {name}", flush=True)
            if not errors(broken(doc), schemas):
                fail(f"{name}: a broken copy passed")
            print(f"ok: {name}: a broken copy is refused", flush=True)
            kinds.add(doc["kind"])
    want = {"ConfigMap", "Secret", "NetworkPolicy", "SandboxTemplate", "SandboxWarmPool"}
    if kinds != want:
        fail(f"kinds {sorted(kinds)}, expected {sorted(want)}")
    print("all ok", flush=True)


if __name__ == "__main__":
    main()
