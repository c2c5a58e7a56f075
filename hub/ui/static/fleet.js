// The Fleet page: every member cluster the hub knows, with its connection (and since when it
// is lost), last heartbeat, nodes, capacity and usage per flavor (bars), and the caller's
// workloads on it by state. Live: MemberClusters and Workloads are watched.
// Called by app.js (route #/fleet).

import { h, clear } from "./dom.js";
import { STATES, age, formatAmount, quantity, workloadState } from "./model.js";

export function bar(label, used, total, resource) {
  const fraction = total > 0 ? Math.min(1, used / total) : 0;
  const text = `${formatAmount(resource, used)} / ${formatAmount(resource, total)}`;
  const meter = h("div", {
    class: `bar ${fraction > 0.9 ? "bar-high" : ""}`,
    role: "meter",
    "aria-label": label,
    "aria-valuemin": 0,
    "aria-valuemax": Number.isFinite(total) ? total : 0,
    "aria-valuenow": Number.isFinite(used) ? used : 0,
    "aria-valuetext": text,
  }, h("div", { class: "bar-fill" }));
  meter.firstChild.style.width = `${(fraction * 100).toFixed(1)}%`;
  return h("div", { class: "bar-line" }, h("span", { class: "bar-label" }, label), meter, h("span", { class: "bar-text" }, text));
}

function clusterCard(mc, counts, now) {
  const status = mc.status || {};
  const capacity = status.capacity || {};
  const name = mc.metadata.name;
  const connected = Boolean(status.connected);
  const state = connected ? "connected" : status.lostSince ? `lost ${age(status.lostSince, now)} ago` : "not connected";
  const flavors = (capacity.flavors || []).map((f) =>
    h(
      "div",
      { class: "flavor" },
      h("h3", {}, `${f.flavor}`, h("span", { class: "muted" }, ` in cluster queue ${f.clusterQueue}`)),
      (f.resources || []).map((r) => bar(`${name} ${f.flavor} ${r.name}`, quantity(r.used ?? 0), quantity(r.allocatable), r.name)),
    ),
  );
  const totals = (capacity.resources || []).map((r) =>
    bar(`${name} ${r.name}`, quantity(r.used ?? 0), quantity(r.allocatable), r.name),
  );
  const byState = STATES.filter((s) => counts.get(s)).map((s) => h("li", {}, h("span", { class: `state state-${s}` }, s), ` ${counts.get(s)}`));
  return h(
    "article",
    { class: "card cluster", "aria-labelledby": `cluster-${name}`, "data-cluster": name },
    h(
      "header",
      {},
      h("h2", { id: `cluster-${name}` }, name),
      h("span", { class: `badge ${connected ? "badge-ok" : "badge-bad"}` }, state),
      mc.spec?.cordoned ? h("span", { class: "badge badge-warn" }, "cordoned") : null,
    ),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Last heartbeat"),
      h("dd", {}, status.lastHeartbeatTime ? `${age(status.lastHeartbeatTime, now)} ago` : "never"),
      h("dt", {}, "Nodes ready"),
      h("dd", {}, `${capacity.readyNodes ?? 0} / ${capacity.nodes ?? 0}`),
      h("dt", {}, "Agent"),
      h("dd", {}, status.agentVersion || "—"),
    ),
    h("h3", {}, "Capacity"),
    totals.length ? totals : h("p", { class: "muted" }, "No capacity reported yet."),
    flavors,
    h("h3", {}, "Your workloads here"),
    byState.length ? h("ul", { class: "counts" }, byState) : h("p", { class: "muted" }, "None."),
  );
}

export function mount(container, session) {
  const grid = h("div", { class: "cards", id: "clusters" });
  container.append(h("h1", { tabindex: -1 }, "Fleet"), grid);
  const clusters = session.list("memberclusters");
  const workloads = session.list("workloads");
  const draw = () => {
    const counts = new Map();
    for (const wl of workloads.items.values()) {
      const cluster = wl.status?.clusterName;
      if (!cluster) continue;
      if (!counts.has(cluster)) counts.set(cluster, new Map());
      const state = workloadState(wl);
      counts.get(cluster).set(state, (counts.get(cluster).get(state) || 0) + 1);
    }
    const now = Date.now();
    const items = [...clusters.items.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    clear(grid).append(
      ...(items.length
        ? items.map((mc) => clusterCard(mc, counts.get(mc.metadata.name) || new Map(), now))
        : [h("p", { class: "muted" }, clusters.loaded ? "No member clusters." : "Loading…")]),
    );
    if (clusters.error) grid.prepend(h("p", { class: "error", role: "alert" }, clusters.error.message));
  };
  const unsubscribe = [clusters.subscribe(draw), workloads.subscribe(draw)];
  // Ages move on even when nothing changes.
  const timer = setInterval(draw, 5000);
  draw();
  return () => {
    clearInterval(timer);
    unsubscribe.forEach((u) => u());
  };
}
