// Validates every object of a rendered kustomization against the JSON schemas of the npm packages
// kubernetes-models (Kubernetes' own API) and @kubernetes-models/prometheus-operator (the
// Prometheus Operator's CRDs); an object of a kind neither knows fails. The schemas accept unknown
// fields, so what the manifests promise is checked besides: a Deployment of one replica replaced
// with Recreate, or a StatefulSet started Parallel whose pods each have their own state volume
// (shards: replicas equal to --shard.total; an availability pair, without --shard flags: at least
// 2 replicas spread over nodes by a podAntiAffinity, and a PodDisruptionBudget that keeps one);
// no service account token, every container non-root with a read-only root, no privilege
// escalation and no capability, RuntimeDefault seccomp, requests and limits, the exporter's
// probes on /-/healthy and /-/ready. A PrometheusRule's groups must equal the groups of the rules
// file, parsed; they are written to GROUPS_OUT for promtool. Prints one line per object.
// Usage: node validate_manifests.mjs NODE_MODULES RENDERED_YAML RULES_FILE [GROUPS_OUT]
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { isDeepStrictEqual } from "node:util";

const [modules, rendered, rulesFile, groupsOut] = process.argv.slice(2);
if (!rulesFile) {
  console.error("usage: node validate_manifests.mjs NODE_MODULES RENDERED_YAML RULES_FILE [GROUPS_OUT]");
  process.exit(2);
}
const load = async (file) => import(pathToFileURL(path.join(modules, file)).href);
const yaml = (await load("js-yaml/index.js")).default;

// "apps/v1" Deployment -> kubernetes-models/apps/v1/Deployment.js; "v1" -> kubernetes-models/v1/...
function modelFile(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const pkg = group === "monitoring.coreos.com" ? "@kubernetes-models/prometheus-operator" : "kubernetes-models";
  return [pkg, path.join(pkg, group, version, `${kind}.js`)];
}

// Whether every label of a selector's matchLabels is one of labels.
const selects = (selector, labels) =>
  Object.keys(selector?.matchLabels ?? {}).length > 0 &&
  Object.entries(selector.matchLabels).every(([k, v]) => labels?.[k] === v);

// What a workload must hold beyond its schema, given every object rendered with it; returns the
// breaches.
function workloadPolicy(doc, docs) {
  const bad = [];
  const pod = doc.spec?.template?.spec ?? {};
  if (doc.kind === "StatefulSet") {
    const exporter = (pod.containers ?? []).find((c) => c.name === "pglock-exporter");
    const args = exporter?.args ?? [];
    if (args.some((a) => a.startsWith("--shard."))) {
      // Shards: one pod per shard.
      const total = args.find((a) => a.startsWith("--shard.total="))?.split("=")[1];
      if (String(doc.spec?.replicas) !== total) bad.push(`replicas ${doc.spec?.replicas}, --shard.total ${total}`);
      if (!args.includes("--shard.ordinal=auto")) bad.push("no --shard.ordinal=auto");
    } else {
      // An availability pair: every pod polls every target, on another node where it can, and an
      // eviction leaves one.
      if (!(doc.spec?.replicas >= 2)) bad.push(`replicas ${doc.spec?.replicas}: an availability pair needs 2`);
      const labels = doc.spec?.template?.metadata?.labels;
      const terms = pod.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? [];
      const spread = terms.some(
        (t) =>
          t.podAffinityTerm?.topologyKey === "kubernetes.io/hostname" &&
          selects(t.podAffinityTerm?.labelSelector, labels),
      );
      if (!spread) bad.push("no preferred podAntiAffinity of its own pods by kubernetes.io/hostname");
      const budget = docs.find((d) => d?.kind === "PodDisruptionBudget" && selects(d.spec?.selector, labels));
      const keep = budget?.spec?.minAvailable;
      if (!budget) bad.push("no PodDisruptionBudget selects its pods");
      else if (!(Number.isInteger(keep) && keep >= 1 && keep < doc.spec?.replicas)) {
        bad.push(`PodDisruptionBudget ${budget.metadata?.name}: minAvailable ${JSON.stringify(keep)}, not 1 to replicas - 1`);
      }
    }
    // All started at once; each pod its own state directory, never one shared.
    if (doc.spec?.podManagementPolicy !== "Parallel") bad.push("podManagementPolicy is not Parallel");
    const statePath = args.find((a) => a.startsWith("--storage.path="))?.split("=")[1];
    const stateVolume = (exporter?.volumeMounts ?? []).find((m) => m.mountPath === statePath)?.name;
    const claims = (doc.spec?.volumeClaimTemplates ?? []).map((t) => t.metadata?.name);
    const shared = (pod.volumes ?? []).some((v) => v.name === stateVolume);
    if (!stateVolume || !claims.includes(stateVolume) || shared) {
      bad.push(`the state directory ${statePath} is not on a volumeClaimTemplate of its own`);
    }
  } else {
    if (doc.spec?.replicas !== 1) bad.push("replicas is not 1");
    if (doc.spec?.strategy?.type !== "Recreate") bad.push("strategy is not Recreate");
  }
  if (pod.automountServiceAccountToken !== false) bad.push("the service account token is mounted");
  if (pod.securityContext?.seccompProfile?.type !== "RuntimeDefault") bad.push("seccomp is not RuntimeDefault");
  for (const c of pod.containers ?? []) {
    const sc = { ...pod.securityContext, ...c.securityContext };
    const where = `container ${c.name}`;
    if (sc.runAsNonRoot !== true || !(sc.runAsUser > 0)) bad.push(`${where} may run as root`);
    if (c.securityContext?.readOnlyRootFilesystem !== true) bad.push(`${where}: root filesystem writable`);
    if (c.securityContext?.allowPrivilegeEscalation !== false) bad.push(`${where}: privilege escalation`);
    if (!(c.securityContext?.capabilities?.drop ?? []).includes("ALL")) bad.push(`${where}: capabilities kept`);
    if (c.name !== "pglock-exporter") continue;
    if (c.livenessProbe?.httpGet?.path !== "/-/healthy") bad.push(`${where}: liveness probe not on /-/healthy`);
    if (c.readinessProbe?.httpGet?.path !== "/-/ready") bad.push(`${where}: readiness probe not on /-/ready`);
    for (const r of ["cpu", "memory"]) {
      if (!c.resources?.requests?.[r] || !c.resources?.limits?.[r]) bad.push(`${where}: no ${r} request and limit`);
    }
  }
  if (!(pod.containers ?? []).some((c) => c.name === "pglock-exporter")) bad.push("no pglock-exporter container");
  return bad;
}

let failures = 0;
const rules = yaml.load(readFileSync(rulesFile, "utf8"));
const docs = yaml.loadAll(readFileSync(rendered, "utf8"));
for (const doc of docs) {
  if (!doc) continue;
  const what = `${doc.apiVersion} ${doc.kind} ${doc.metadata?.name}`;
  const [pkg, file] = modelFile(doc.apiVersion ?? "", doc.kind ?? "");
  let Model;
  try {
    Model = (await load(file))[doc.kind];
  } catch {
    Model = undefined;
  }
  if (!Model) {
    console.error(`${what}: FAIL: no schema in ${pkg}`);
    failures++;
    continue;
  }
  // kustomize writes a long Secret value's base64 on several lines, which Kubernetes decodes (Go's
  // base64 skips newlines) and the schema's "byte" format refuses: validate it on one line.
  if (doc.kind === "Secret") {
    for (const k of Object.keys(doc.data ?? {})) doc.data[k] = doc.data[k].replace(/\n/g, "");
  }
  try {
    new Model(doc).validate();
  } catch (e) {
    console.error(`${what}: FAIL (${pkg}): ${e.message}`);
    failures++;
    continue;
  }
  if (doc.kind === "PrometheusRule" && !isDeepStrictEqual(doc.spec?.groups, rules.groups)) {
    console.error(`${what}: FAIL: its groups differ from ${rulesFile}`);
    failures++;
    continue;
  }
  if (doc.kind === "PrometheusRule" && groupsOut) writeFileSync(groupsOut, yaml.dump({ groups: doc.spec.groups }));
  const breaches = ["Deployment", "StatefulSet"].includes(doc.kind) ? workloadPolicy(doc, docs) : [];
  if (breaches.length) {
    console.error(`${what}: FAIL: ${breaches.join("; ")}`);
    failures++;
    continue;
  }
  const also = { PrometheusRule: `, groups equal ${rulesFile}`, Deployment: ", hardened", StatefulSet: ", hardened" }[doc.kind] ?? "";
  console.log(`${what}: valid (${pkg})${also}`);
}
process.exit(failures ? 1 : 0);
