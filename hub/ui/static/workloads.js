// The Workloads page: every workload the caller may read, as a virtualised table (tenant,
// namespace, name, queue, state, cluster, age) filtered and sorted in the page and kept live
// by the workloads watch; and the time-to-admission histogram of the rows shown. The first
// render with rows leaves a User Timing mark ("workloads:first-render") that the browser
// tests read.
// Called by app.js (route #/workloads).

import { h, clear } from "./dom.js";
import { VirtualTable } from "./table.js";
import { histogramChart } from "./charts.js";
import { STATES, age, histogram, secondsToAdmission, tenantsByNamespace, workloadRow } from "./model.js";

const HISTOGRAM_EVERY_MS = 2000;
const REFRESH_EVERY_MS = 250;
const FILTERS = [
  { key: "tenant", label: "Tenant" },
  { key: "namespace", label: "Namespace" },
  { key: "queue", label: "Queue" },
  { key: "state", label: "State" },
  { key: "cluster", label: "Cluster" },
];

const COMPARE = {
  name: (a, b) => a.name.localeCompare(b.name),
  tenant: (a, b) => a.tenant.localeCompare(b.tenant),
  namespace: (a, b) => a.namespace.localeCompare(b.namespace),
  queue: (a, b) => a.queue.localeCompare(b.queue),
  state: (a, b) => STATES.indexOf(a.state) - STATES.indexOf(b.state),
  cluster: (a, b) => a.cluster.localeCompare(b.cluster),
  // Age ascending is youngest first, as `kubectl get --sort-by` on age reads.
  age: (a, b) => b.created - a.created,
};

export function mount(container, session) {
  const list = session.list("workloads");
  const tenants = session.list("tenants");
  const rows = new Map(); // key → row
  let tenantOf = new Map();
  let sort = { key: "age", descending: false };
  let rendered = false;
  let now = Date.now();

  const search = h("input", { id: "wl-search", type: "search", placeholder: "name contains…" });
  const selects = new Map(
    FILTERS.map((f) => [f.key, h("select", { id: `wl-filter-${f.key}`, "data-filter": f.key }, h("option", { value: "" }, "all"))]),
  );
  const summary = h("p", { id: "wl-summary", class: "muted", "aria-live": "polite" });
  const table = new VirtualTable({
    caption: "Workloads",
    columns: [
      { key: "name", label: "Name", width: "minmax(10rem, 2fr)", text: (r) => r.name, href: (r) => `#/workloads/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.name)}` },
      { key: "tenant", label: "Tenant", width: "1fr", text: (r) => r.tenant || "—" },
      { key: "namespace", label: "Namespace", width: "1fr", text: (r) => r.namespace },
      { key: "queue", label: "Queue", width: "1fr", text: (r) => r.queue },
      { key: "state", label: "State", width: "7rem", text: (r) => r.state },
      { key: "cluster", label: "Cluster", width: "1fr", text: (r) => r.cluster || "—" },
      { key: "age", label: "Age", width: "5rem", text: (r) => age(r.created, now) },
    ],
    onSort: (key, descending) => {
      sort = { key, descending };
      refresh();
    },
  });
  const chartArea = h("div", { class: "chart-area" });

  container.append(
    h("h1", { tabindex: -1 }, "Workloads"),
    h(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter workloads", onsubmit: (e) => e.preventDefault() },
      h("div", { class: "field" }, h("label", { for: "wl-search" }, "Name"), search),
      FILTERS.map((f) => h("div", { class: "field" }, h("label", { for: `wl-filter-${f.key}` }, f.label), selects.get(f.key))),
    ),
    summary,
    table.element,
    h("section", { "aria-labelledby": "tta-title" }, h("h2", { id: "tta-title" }, "Time to admission"), chartArea),
  );

  function options() {
    // The choices each filter offers: the values present, plus the one chosen.
    const values = new Map(FILTERS.map((f) => [f.key, new Set()]));
    for (const row of rows.values()) for (const f of FILTERS) if (row[f.key]) values.get(f.key).add(row[f.key]);
    for (const f of FILTERS) {
      const select = selects.get(f.key);
      const chosen = select.value;
      if (chosen) values.get(f.key).add(chosen);
      const wanted = ["", ...[...values.get(f.key)].sort()];
      if ([...select.options].map((o) => o.value).join("\n") === wanted.join("\n")) continue;
      clear(select).append(...wanted.map((v) => h("option", { value: v, selected: v === chosen }, v || "all")));
    }
  }

  function visibleRows() {
    const text = search.value.trim().toLowerCase();
    const wanted = FILTERS.map((f) => [f.key, selects.get(f.key).value]).filter(([, v]) => v);
    const out = [];
    for (const row of rows.values()) {
      if (text && !row.name.toLowerCase().includes(text)) continue;
      if (wanted.some(([k, v]) => row[k] !== v)) continue;
      out.push(row);
    }
    const compare = COMPARE[sort.key];
    out.sort((a, b) => (sort.descending ? -1 : 1) * (compare(a, b) || a.key.localeCompare(b.key)));
    return out;
  }

  let lastHistogram = 0;
  let histogramTimer = null;
  function drawHistogram(shown) {
    const elapsed = Date.now() - lastHistogram;
    if (elapsed < HISTOGRAM_EVERY_MS) {
      histogramTimer ??= setTimeout(() => {
        histogramTimer = null;
        drawHistogram(visibleRows());
      }, HISTOGRAM_EVERY_MS - elapsed);
      return;
    }
    lastHistogram = Date.now();
    const seconds = shown.map((r) => secondsToAdmission(list.items.get(r.key))).filter((s) => s !== null);
    clear(chartArea).append(
      histogramChart({ title: "Time from submission to admission, workloads shown", bins: histogram(seconds, 12), total: seconds.length }),
    );
  }

  function refresh() {
    now = Date.now();
    const shown = visibleRows();
    table.setRows(shown);
    summary.textContent = list.loaded ? `Showing ${shown.length} of ${rows.size} workloads.` : "Loading…";
    if (list.error) summary.textContent += ` Watch: ${list.error.message} (retrying).`;
    if (!rendered && list.loaded) {
      rendered = true;
      performance.mark("workloads:first-render");
    }
    drawHistogram(shown);
  }

  // Under a storm of watch events (a hub writing 10,000 statuses) filter, sort and the
  // filters' choices run at most every REFRESH_EVERY_MS, not every frame: scrolling stays
  // smooth and a change still shows within a fraction of a second.
  let refreshTimer = null;
  let lastRefresh = 0;
  function refreshSoon() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      lastRefresh = Date.now();
      options();
      refresh();
    }, Math.max(0, REFRESH_EVERY_MS - (Date.now() - lastRefresh)));
  }

  function rebuild() {
    rows.clear();
    for (const [key, obj] of list.items) rows.set(key, workloadRow(obj, tenantOf));
  }

  const unsubscribe = [
    tenants.subscribe((items) => {
      tenantOf = tenantsByNamespace(items.values());
      rebuild();
      options();
      refresh();
    }),
    list.subscribe((items, changes) => {
      if (changes === "error") {
        refresh();
        return;
      }
      if (changes === "reset") {
        performance.mark("workloads:list-received");
        rebuild();
      } else {
        for (const change of changes) {
          if (change.type === "DELETED") rows.delete(change.key);
          else if (items.has(change.key)) rows.set(change.key, workloadRow(items.get(change.key), tenantOf));
        }
      }
      refreshSoon();
    }),
  ];
  search.addEventListener("input", refresh);
  for (const select of selects.values()) select.addEventListener("change", refresh);
  const timer = setInterval(() => {
    now = Date.now();
    table.setRows(table.rows); // ages
  }, 5000);
  table.sortBy("age", false); // draws the first time
  return () => {
    clearInterval(timer);
    clearTimeout(histogramTimer);
    clearTimeout(refreshTimer);
    unsubscribe.forEach((u) => u());
  };
}
