// The Queues page: GlobalQueues (pending at the hub, dispatched, running, fleet usage against
// fleet quota), ClusterQueues (quota per flavor and resource, what the member clusters report
// in use, borrowing, pending and admitted workloads, fair share), LocalQueues, a cohort tree,
// and each queue's usage over time (UsageSampler samples it from the watches while the tab is
// open). Stop and resume are a PUT of the queue with spec.stopPolicy Hold or None — the same
// request `qctl` sends, refused with the hub's own message when the caller may not.
// Called by app.js (route #/queues; the Session owns the sampler).

import { h, clear, announce } from "./dom.js";
import { HubError, objectPath } from "./hub.js";
import { lineChart } from "./charts.js";
import { bar } from "./fleet.js";
import {
  borrowed, clusterQueueUsage, cohortForest, formatAmount, quantity, quotas, workloadState,
} from "./model.js";

const SAMPLE_MS = 5000;
const KEEP_MS = 30 * 60 * 1000;

// Usage of every cluster queue (summed over the member clusters' reports) and global queue
// (fleet usage), per resource, sampled every few seconds and on every reported change.
export class UsageSampler {
  constructor(session) {
    this.session = session;
    this.series = new Map(); // "ClusterQueue default cpu" → [{t, v}]
    this.listeners = new Set();
    this.timer = null;
    this.unsubscribe = [];
  }

  start() {
    if (this.timer) return;
    const sample = () => this.sample(Date.now());
    this.unsubscribe = [
      this.session.list("memberclusters").subscribe(sample),
      this.session.list("globalqueues").subscribe(sample),
    ];
    this.timer = setInterval(sample, SAMPLE_MS);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    this.unsubscribe.forEach((u) => u());
  }

  record(name, t, v) {
    const points = this.series.get(name) || [];
    if (points.length && points.at(-1).v === v && t - points.at(-1).t < SAMPLE_MS) return;
    points.push({ t, v });
    while (points.length && points[0].t < t - KEEP_MS) points.shift();
    this.series.set(name, points);
  }

  sample(now) {
    const clusters = [...this.session.list("memberclusters").items.values()];
    const perQueue = new Map();
    for (const [key, { used }] of clusterQueueUsage(clusters)) {
      const [queue, , resource] = key.split("/");
      const name = `ClusterQueue ${queue} ${resource}`;
      perQueue.set(name, (perQueue.get(name) || 0) + used);
    }
    for (const gq of this.session.list("globalqueues").items.values()) {
      for (const [resource, amount] of Object.entries(gq.status?.fleetUsage || {})) {
        perQueue.set(`GlobalQueue ${gq.metadata.name} ${resource}`, quantity(amount));
      }
    }
    for (const [name, value] of perQueue) this.record(name, now, value);
    for (const listener of this.listeners) listener();
  }
}

function stopButton(session, plural, obj, onDone) {
  // Only those who may change a queue see the button: queues are the admins' to change.
  if (!session.me.admin) return "";
  const stopped = (obj.spec?.stopPolicy || "None") !== "None";
  const name = obj.metadata.name;
  const label = `${stopped ? "Resume" : "Stop"} ${plural === "localqueues" ? "local queue" : plural === "clusterqueues" ? "cluster queue" : "global queue"} ${name}`;
  return h(
    "button",
    {
      type: "button",
      class: stopped ? "" : "danger",
      "aria-label": label,
      onclick: async (event) => {
        const button = event.currentTarget;
        button.disabled = true;
        const path = objectPath(plural, obj.metadata.namespace, name);
        try {
          // Read, change, write — again when the write lost a race (the hub writes queue
          // status all the time, and each write moves the resourceVersion), as qctl does.
          for (let attempt = 1; ; attempt++) {
            const body = await session.hub.get(path);
            delete body.status;
            body.spec = { ...body.spec, stopPolicy: stopped ? "None" : "Hold" };
            try {
              await session.hub.put(path, body);
              break;
            } catch (error) {
              if (!(error instanceof HubError && error.status === 409) || attempt >= 5) throw error;
            }
          }
          announce(`${label}: done`);
        } catch (error) {
          announce(`${label}: ${error.message}`);
          onDone(`${label}: ${error.message}`);
        } finally {
          button.disabled = false;
        }
      },
    },
    stopped ? "Resume" : "Stop",
  );
}

function table(caption, headers, rows) {
  return h(
    "table",
    { class: "grid-table" },
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, "None."))),
  );
}

function policyCell(obj) {
  const policy = obj.spec?.stopPolicy || "None";
  return h("span", { class: `badge ${policy === "None" ? "badge-ok" : "badge-warn"}` }, policy === "None" ? "active" : policy);
}

function countsByQueue(workloads) {
  // "ns/localqueue" → {pending, admitted}
  const counts = new Map();
  for (const wl of workloads) {
    const key = `${wl.metadata.namespace}/${wl.spec?.queueName || ""}`;
    const entry = counts.get(key) || { pending: 0, admitted: 0, running: 0 };
    const state = workloadState(wl);
    if (state === "Pending" || state === "Dispatched") entry.pending += 1;
    else if (state === "Admitted" || state === "Running") entry.admitted += 1;
    counts.set(key, entry);
  }
  return counts;
}

function treeItems(nodes, level) {
  return nodes.map((node) =>
    h(
      "li",
      { role: "treeitem", "aria-level": level, "aria-expanded": node.children.length ? "true" : null, tabindex: -1 },
      h("span", { class: node.kind === "Cohort" ? "tree-cohort" : "tree-cq" }, `${node.kind === "Cohort" ? "cohort" : "cluster queue"} ${node.name}`),
      node.children.length ? h("ul", { role: "group" }, treeItems(node.children, level + 1)) : null,
    ),
  );
}

// A tree navigable by arrow keys (one tab stop; up/down move, as WAI-ARIA's tree pattern).
function cohortTree(forest) {
  const tree = h("ul", { role: "tree", "aria-label": "Cohorts and their cluster queues", class: "tree" }, treeItems(forest, 1));
  const items = () => [...tree.querySelectorAll('[role="treeitem"]')];
  const first = items()[0];
  if (first) first.tabIndex = 0;
  tree.addEventListener("keydown", (event) => {
    const all = items();
    const index = all.indexOf(document.activeElement);
    const next = { ArrowDown: index + 1, ArrowUp: index - 1, Home: 0, End: all.length - 1 }[event.key];
    if (next === undefined || index < 0 || !all[next]) return;
    event.preventDefault();
    all[index].tabIndex = -1;
    all[next].tabIndex = 0;
    all[next].focus();
  });
  return tree;
}

export function mount(container, session) {
  const message = h("p", { class: "error", role: "alert" });
  const chartResource = h("select", { id: "usage-resource" });
  const chartArea = h("div", { class: "chart-area" });
  const body = h("div");
  container.append(
    h("h1", { tabindex: -1 }, "Queues"),
    message,
    body,
    h(
      "section",
      { "aria-labelledby": "usage-title" },
      h("h2", { id: "usage-title" }, "Usage over time"),
      h("label", { for: "usage-resource" }, "Resource "),
      chartResource,
      chartArea,
    ),
  );
  const lists = ["globalqueues", "clusterqueues", "localqueues", "cohorts", "memberclusters", "workloads"].map((p) => session.list(p));
  const [gqs, cqs, lqs, cohorts, clusters, workloads] = lists;
  const failed = (text) => {
    message.textContent = text;
  };

  const draw = () => {
    const usage = clusterQueueUsage(clusters.items.values());
    const counts = countsByQueue(workloads.items.values());
    const sorted = (list) => [...list.items.values()].sort((a, b) => objectKey(a).localeCompare(objectKey(b)));
    const perCq = new Map();
    for (const lq of lqs.items.values()) {
      const c = counts.get(`${lq.metadata.namespace}/${lq.metadata.name}`) || { pending: 0, admitted: 0 };
      const entry = perCq.get(lq.spec.clusterQueue) || { pending: 0, admitted: 0 };
      entry.pending += c.pending;
      entry.admitted += c.admitted;
      perCq.set(lq.spec.clusterQueue, entry);
    }
    const gqRows = sorted(gqs).map((gq) => {
      const st = gq.status || {};
      const quota = gq.spec?.fleetQuota || {};
      const used = st.fleetUsage || {};
      const resources = [...new Set([...Object.keys(quota), ...Object.keys(used)])].sort();
      return h(
        "tr",
        { "data-queue": gq.metadata.name },
        h("th", { scope: "row" }, gq.metadata.name),
        h("td", {}, gq.spec?.clusterSet || ""),
        h("td", {}, gq.spec?.dispatchPolicy?.type || "BestFit"),
        h("td", { class: "num" }, String(st.pendingWorkloads ?? 0)),
        h("td", { class: "num" }, String(st.dispatchedWorkloads ?? 0)),
        h("td", { class: "num" }, String(st.runningWorkloads ?? 0)),
        h(
          "td",
          {},
          resources.length
            ? resources.map((r) =>
                r in quota
                  ? bar(`${gq.metadata.name} fleet ${r}`, quantity(used[r] ?? 0), quantity(quota[r]), r)
                  : h("div", {}, `${r}: ${formatAmount(r, quantity(used[r]))} (no quota)`),
              )
            : h("span", { class: "muted" }, "no fleet quota"),
        ),
        h("td", { class: "num" }, gq.spec?.fairSharingWeight ?? "1"),
        h("td", {}, policyCell(gq)),
        h("td", {}, stopButton(session, "globalqueues", gq, failed)),
      );
    });
    const cqRows = sorted(cqs).map((cq) => {
      const name = cq.metadata.name;
      const lent = borrowed(cq);
      const c = perCq.get(name) || { pending: 0, admitted: 0 };
      const quotaCells = quotas(cq).map((q) => {
        const u = usage.get(`${name}/${q.flavor}/${q.resource}`);
        const limit = q.borrowingLimit === null ? "" : `, may borrow ${formatAmount(q.resource, q.borrowingLimit)}`;
        const b = lent.get(`${q.flavor}/${q.resource}`) || 0;
        return h(
          "div",
          { class: "quota" },
          bar(`${name} ${q.flavor} ${q.resource}`, u ? u.used : 0, q.nominal, q.resource),
          h("span", { class: "muted" }, `${q.flavor}: nominal ${formatAmount(q.resource, q.nominal)}${limit}${b ? `, borrowed ${formatAmount(q.resource, b)}` : ""}`),
        );
      });
      return h(
        "tr",
        { "data-queue": name },
        h("th", { scope: "row" }, name),
        h("td", {}, cq.spec?.cohortName || "—"),
        h("td", {}, quotaCells.length ? quotaCells : h("span", { class: "muted" }, "no quota")),
        h("td", { class: "num" }, String(cq.status?.pendingWorkloads ?? c.pending)),
        h("td", { class: "num" }, String(cq.status?.admittedWorkloads ?? c.admitted)),
        h("td", { class: "num" }, cq.status?.fairSharing ? String(cq.status.fairSharing.weightedShare) : "—"),
        h("td", {}, policyCell(cq)),
        h("td", {}, stopButton(session, "clusterqueues", cq, failed)),
      );
    });
    const lqRows = sorted(lqs).map((lq) => {
      const c = counts.get(`${lq.metadata.namespace}/${lq.metadata.name}`) || { pending: 0, admitted: 0 };
      return h(
        "tr",
        { "data-queue": `${lq.metadata.namespace}/${lq.metadata.name}` },
        h("th", { scope: "row" }, `${lq.metadata.namespace}/${lq.metadata.name}`),
        h("td", {}, lq.spec.clusterQueue),
        h("td", { class: "num" }, String(c.pending)),
        h("td", { class: "num" }, String(c.admitted)),
        h("td", {}, policyCell(lq)),
        h("td", {}, stopButton(session, "localqueues", lq, failed)),
      );
    });
    // Rebuilt on each change: keep the keyboard where it was (the same button, by its name).
    const focused = body.contains(document.activeElement) ? document.activeElement.getAttribute("aria-label") : null;
    clear(body).append(
      table("Global queues", ["Name", "Cluster set", "Dispatch", "Pending", "Dispatched", "Running", "Fleet usage", "Weight", "State", "Action"], gqRows),
      table("Cluster queues", ["Name", "Cohort", "Quota and usage", "Pending", "Admitted", "Fair share", "State", "Action"], cqRows),
      table("Local queues", ["Namespace/name", "Cluster queue", "Pending", "Admitted", "State", "Action"], lqRows),
      h(
        "section",
        { "aria-labelledby": "cohorts-title" },
        h("h2", { id: "cohorts-title" }, "Cohort tree"),
        cohortTree(cohortForest(cohorts.items.values(), cqs.items.values())),
      ),
    );
    if (focused) body.querySelector(`[aria-label="${CSS.escape(focused)}"]`)?.focus();
    const errors = lists.filter((l) => l.error).map((l) => `${l.plural}: ${l.error.message}`);
    if (errors.length) failed(errors.join("; "));
  };

  const drawChart = () => {
    const names = [...session.usage.series.keys()];
    const resources = [...new Set(names.map((n) => n.split(" ").at(-1)))].sort();
    const chosen = chartResource.value || (resources.includes("cpu") ? "cpu" : resources[0]);
    if ([...chartResource.options].map((o) => o.value).join() !== resources.join()) {
      clear(chartResource).append(...resources.map((r) => h("option", { value: r, selected: r === chosen }, r)));
    }
    const series = names
      .filter((n) => n.endsWith(` ${chosen}`))
      .map((n) => ({ name: n.slice(0, -chosen.length - 1), points: session.usage.series.get(n) }));
    if (!series.length) {
      clear(chartArea).append(h("p", { class: "muted" }, "No queue has reported usage yet."));
      return;
    }
    clear(chartArea).append(
      lineChart({
        title: `Queue usage of ${chosen || "resources"}, last 30 minutes`,
        series,
        now: Date.now(),
        span: KEEP_MS,
        format: (v) => formatAmount(chosen || "", v),
      }),
    );
  };
  chartResource.addEventListener("change", drawChart);
  session.usage.listeners.add(drawChart);
  const unsubscribe = lists.map((l) => l.subscribe(draw));
  draw();
  drawChart();
  return () => {
    session.usage.listeners.delete(drawChart);
    unsubscribe.forEach((u) => u());
  };
}

function objectKey(obj) {
  return `${obj.metadata.namespace || ""}/${obj.metadata.name}`;
}
