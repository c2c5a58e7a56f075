// What the pages compute from the hub's objects, as pure functions of wire objects (and of
// `now` where time matters): a workload's state in one word (the words qctl uses:
// qctl/render.py workload_state), ages, Kubernetes quantities, tenants of namespaces, the
// time a workload waited for admission, histogram bins and quota figures. No DOM, no fetch.
// Called by the page modules; tests/ui run these in the browser against real objects.

export const STATES = ["Pending", "Dispatched", "Admitted", "Running", "Evicted", "Succeeded", "Failed"];

export function condition(obj, type) {
  for (const cond of obj?.status?.conditions || []) {
    if (cond.type === type) return cond;
  }
  return null;
}

export function workloadState(obj) {
  const finished = condition(obj, "Finished");
  if (finished && finished.status === "True") return finished.reason || "Finished";
  const evicted = condition(obj, "Evicted");
  if (evicted && evicted.status === "True") return "Evicted";
  if (obj?.status?.pods?.running) return "Running";
  const admitted = condition(obj, "Admitted");
  if (admitted && admitted.status === "True") return "Admitted";
  if (obj?.status?.clusterName) return "Dispatched";
  return "Pending";
}

export function isFinished(obj) {
  const finished = condition(obj, "Finished");
  return Boolean(finished && finished.status === "True");
}

export function parseTime(text) {
  if (!text) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : ms;
}

// Seconds from creation to admission (the Admitted condition turning True), or null.
export function secondsToAdmission(obj) {
  const created = parseTime(obj?.metadata?.creationTimestamp);
  const admitted = condition(obj, "Admitted");
  if (created === null || !admitted || admitted.status !== "True") return null;
  const at = parseTime(admitted.lastTransitionTime);
  return at === null ? null : Math.max(0, (at - created) / 1000);
}

// Kubernetes-style age, as qctl prints it: 45s, 12m, 3h4m, 2d3h.
export function age(timestamp, now) {
  const then = typeof timestamp === "number" ? timestamp : parseTime(timestamp);
  if (then === null) return "<unknown>";
  const seconds = Math.max(0, Math.floor((now - then) / 1000));
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return hours < 8 && minutes % 60 ? `${hours}h${minutes % 60}m` : `${hours}h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days}d${hours % 24}h` : `${days}d`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)}ms`;
  if (seconds < 120) return `${seconds.toFixed(seconds < 10 ? 1 : 0)}s`;
  return age(0, seconds * 1000);
}

const SUFFIXES = {
  n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

// "500m" → 0.5, "32Gi" → 34359738368, "1e3" → 1000; what cannot be read → NaN.
export function quantity(text) {
  if (typeof text === "number") return text;
  const match = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(text ?? "").trim());
  if (!match || !(match[2] in SUFFIXES)) return NaN;
  return Number(match[1]) * SUFFIXES[match[2]];
}

// A number of a resource, short: bytes in binary units, the rest as numbers.
export function formatAmount(resource, value) {
  if (!Number.isFinite(value)) return "?";
  if (/memory|storage/.test(resource)) {
    for (const [unit, size] of [["Ti", 2 ** 40], ["Gi", 2 ** 30], ["Mi", 2 ** 20], ["Ki", 2 ** 10]]) {
      if (Math.abs(value) >= size) return `${+(value / size).toFixed(1)}${unit}`;
    }
    return `${value}`;
  }
  return Number.isInteger(value) ? `${value}` : `${+value.toFixed(2)}`;
}

// namespace → tenant name, from the Tenant objects (a namespace of no tenant maps to "").
export function tenantsByNamespace(tenants) {
  const map = new Map();
  for (const tenant of tenants) {
    for (const ns of tenant?.spec?.namespaces || []) map.set(ns, tenant.metadata.name);
  }
  return map;
}

// The row the workloads table shows for one workload.
export function workloadRow(obj, tenantOf) {
  const meta = obj.metadata || {};
  const ns = meta.namespace || "";
  return {
    key: `${ns}/${meta.name}`,
    name: meta.name || "",
    namespace: ns,
    tenant: tenantOf.get(ns) || "",
    queue: obj.spec?.queueName || "",
    state: workloadState(obj),
    cluster: obj.status?.clusterName || "",
    created: parseTime(meta.creationTimestamp) ?? 0,
    priority: obj.spec?.priority ?? 0,
  };
}

// Equal-width bins over [0, max] for a histogram; values past the last edge go in the last.
export function histogram(values, binCount) {
  const finite = values.filter((v) => Number.isFinite(v));
  const max = finite.length ? Math.max(...finite) : 0;
  const width = max > 0 ? max / binCount : 1;
  const bins = Array.from({ length: binCount }, (_, i) => ({ from: i * width, to: (i + 1) * width, count: 0 }));
  for (const v of finite) bins[Math.min(binCount - 1, Math.floor(v / width))].count += 1;
  return bins;
}

// A cluster queue's quota per flavor and resource, from its spec: [{flavor, resource, nominal,
// borrowingLimit}].
export function quotas(clusterQueue) {
  const out = [];
  for (const group of clusterQueue?.spec?.resourceGroups || []) {
    for (const flavor of group.flavors || []) {
      for (const r of flavor.resources || []) {
        out.push({
          flavor: flavor.name,
          resource: r.name,
          nominal: quantity(r.nominalQuota),
          borrowingLimit: r.borrowingLimit === undefined || r.borrowingLimit === null ? null : quantity(r.borrowingLimit),
        });
      }
    }
  }
  return out;
}

// What the member clusters report each cluster queue uses, per flavor and resource, summed
// over the clusters: Map "cq/flavor/resource" → {used, allocatable}.
export function clusterQueueUsage(memberClusters) {
  const usage = new Map();
  for (const mc of memberClusters) {
    for (const f of mc?.status?.capacity?.flavors || []) {
      for (const r of f.resources || []) {
        const key = `${f.clusterQueue}/${f.flavor}/${r.name}`;
        const entry = usage.get(key) || { used: 0, allocatable: 0 };
        entry.used += quantity(r.used ?? 0) || 0;
        entry.allocatable += quantity(r.allocatable) || 0;
        usage.set(key, entry);
      }
    }
  }
  return usage;
}

// What a cluster queue's status says it borrowed, per flavor and resource (0 when it says nothing).
export function borrowed(clusterQueue) {
  const map = new Map();
  for (const f of clusterQueue?.status?.flavorsUsage || []) {
    for (const r of f.resources || []) map.set(`${f.name}/${r.name}`, quantity(r.borrowed ?? 0) || 0);
  }
  return map;
}

// Cohorts and cluster queues as a forest: [{name, kind, children}], roots sorted by name.
export function cohortForest(cohorts, clusterQueues) {
  const nodes = new Map();
  const node = (name) => {
    if (!nodes.has(name)) nodes.set(name, { name, kind: "Cohort", children: [], parent: null });
    return nodes.get(name);
  };
  for (const c of cohorts) {
    const n = node(c.metadata.name);
    if (c.spec?.parentName) n.parent = c.spec.parentName;
  }
  // A parent named but not defined becomes a root of its own (its node has no parent).
  for (const n of [...nodes.values()]) {
    if (n.parent) node(n.parent).children.push(n);
  }
  const loose = [];
  for (const cq of clusterQueues) {
    const leaf = { name: cq.metadata.name, kind: "ClusterQueue", children: [] };
    if (cq.spec?.cohortName) node(cq.spec.cohortName).children.push(leaf);
    else loose.push(leaf);
  }
  const byName = (a, b) => a.name.localeCompare(b.name);
  for (const n of nodes.values()) n.children.sort(byName);
  const roots = [...nodes.values()].filter((n) => !n.parent);
  return [...roots.sort(byName), ...loose.sort(byName)];
}
