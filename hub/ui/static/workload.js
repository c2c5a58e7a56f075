// One workload's page: what it is (queue, priority, state, cluster), its conditions as a
// timeline, why it is pending on each cluster, where its pods run, its logs streaming live
// with cluster/pod/container prefixes, and Cancel (DELETE, as `qctl delete workload`), shown
// to those who may change the workload's namespace (the hub decides all the same).
// Called by app.js (route #/workloads/NS/NAME).

import { h, clear, announce } from "./dom.js";
import { objectPath, HubError } from "./hub.js";
import { age, isFinished, parseTime, workloadState } from "./model.js";

const MAX_LOG_LINES = 5000;
const LOG_RETRY_MS = 2000;

function timeline(conditions, created, now) {
  const events = [
    { type: "Created", status: "True", reason: "Submitted", message: "", at: created },
    ...conditions.map((c) => ({ ...c, at: parseTime(c.lastTransitionTime) })),
  ].sort((a, b) => (a.at ?? 0) - (b.at ?? 0));
  return h(
    "ol",
    { class: "timeline", "aria-label": "Conditions, oldest first" },
    events.map((e) =>
      h(
        "li",
        { class: `tl-${e.status === "True" ? "true" : "false"}`, "data-condition": e.type },
        h("span", { class: "tl-type" }, `${e.type} ${e.status === "True" ? "" : `(${e.status})`}`),
        h("span", { class: "tl-reason" }, e.reason || ""),
        h("time", { datetime: e.at ? new Date(e.at).toISOString() : "" }, e.at ? `${age(e.at, now)} ago` : ""),
        e.message ? h("p", { class: "tl-message" }, e.message) : null,
      ),
    ),
  );
}

function pendingReasons(reasons) {
  if (!reasons.length) return h("p", { class: "muted" }, "No cluster reports a reason.");
  return h(
    "table",
    { class: "grid-table" },
    h("caption", {}, "Why it is pending, per cluster"),
    h("thead", {}, h("tr", {}, ["Cluster", "Reason", "Message"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, reasons.map((r) => h("tr", {}, h("th", { scope: "row" }, r.cluster), h("td", {}, r.reason), h("td", {}, r.message || "")))),
  );
}

export function mount(container, session, [namespace, name]) {
  const key = `${namespace}/${name}`;
  const heading = h("h1", { tabindex: -1 }, name);
  const facts = h("div");
  const cancelMessage = h("p", { class: "error", role: "alert" });
  const cancel = h("button", { type: "button", class: "danger", id: "cancel" }, "Cancel workload");
  cancel.hidden = !session.mayChange(namespace);
  const pods = h("div");
  const logBox = h("div", { class: "logs", id: "logs", role: "log", "aria-label": `Logs of ${name}`, tabindex: 0 });
  const follow = h("input", { type: "checkbox", id: "log-follow", checked: true });
  const logState = h("span", { class: "muted", id: "log-state" });
  container.append(
    h("p", {}, h("a", { href: "#/workloads" }, "← All workloads")),
    heading,
    h("p", { class: "muted" }, `namespace ${namespace}`),
    facts,
    h("div", { class: "actions" }, cancel, cancelMessage),
    pods,
    h(
      "section",
      { "aria-labelledby": "logs-title" },
      h("h2", { id: "logs-title" }, "Logs"),
      h("div", { class: "log-controls" }, follow, h("label", { for: "log-follow" }, " Keep the newest line in view"), " ", logState),
      logBox,
    ),
  );

  // The session's workloads watch, with this one picked out (one connection fewer than a
  // watch of its own). When it is not there, a GET says why: gone, or not the caller's to see.
  const watch = session.list("workloads");
  let absence = null;
  const explainAbsence = async () => {
    try {
      await session.hub.get(objectPath("workloads", namespace, name));
      absence = null;
    } catch (error) {
      absence = error.status === 404 ? "This workload does not exist (any more)." : error.message;
      draw(watch.items);
    }
  };
  const podsSeen = new Map(); // "cluster/pod" → Set(containers)
  let gone = false;

  const draw = (items) => {
    const wl = items.get(key);
    const now = Date.now();
    if (!wl) {
      if (watch.loaded) {
        gone = true;
        cancel.disabled = true;
        if (absence === null) {
          absence = "";
          explainAbsence();
        }
        clear(facts).append(h("p", { class: "muted", id: "gone" }, absence || "Looking it up…"));
      }
      return;
    }
    gone = false;
    absence = null;
    const st = wl.status || {};
    const state = workloadState(wl);
    const p = st.pods || {};
    clear(facts).append(
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "State"),
        h("dd", { id: "wl-state" }, h("span", { class: `state state-${state}` }, state)),
        h("dt", {}, "Queue"),
        h("dd", {}, wl.spec?.queueName || "—"),
        h("dt", {}, "Priority"),
        h("dd", {}, String(wl.spec?.priority ?? 0)),
        h("dt", {}, "Cluster"),
        h("dd", { id: "wl-cluster" }, st.clusterName || "—"),
        h("dt", {}, "Offered to"),
        h("dd", {}, (st.nominatedClusterNames || []).join(", ") || "—"),
        h("dt", {}, "Pods"),
        h("dd", {}, `${p.running ?? 0} running, ${p.pending ?? 0} pending, ${p.succeeded ?? 0} succeeded, ${p.failed ?? 0} failed`),
        h("dt", {}, "Age"),
        h("dd", {}, age(wl.metadata.creationTimestamp, now)),
      ),
      h("h2", {}, "Conditions"),
      timeline(st.conditions || [], parseTime(wl.metadata.creationTimestamp), now),
      h("h2", {}, "Pending reasons"),
      pendingReasons(st.clusterPendingReasons || []),
    );
    cancel.disabled = isFinished(wl);
  };
  const unsubscribe = watch.subscribe((items) => draw(items));

  const drawPods = () => {
    const entries = [...podsSeen].sort();
    clear(pods).append(
      h("h2", {}, "Pods"),
      entries.length
        ? h("ul", { class: "pods" }, entries.map(([pod, containers]) => h("li", {}, `${pod} (${[...containers].join(", ")})`)))
        : h("p", { class: "muted" }, "No pod has logged yet."),
    );
  };
  drawPods();

  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      await session.hub.delete(objectPath("workloads", namespace, name));
      announce(`Workload ${name} cancelled`);
      cancelMessage.textContent = "";
    } catch (error) {
      cancelMessage.textContent = `Could not cancel: ${error.message}`;
      cancel.disabled = false;
    }
  });

  // Logs: follow the stream; when it ends while the workload still runs (a cluster change,
  // a dropped connection), open it again for the lines since.
  const controller = new AbortController();
  let lines = 0;
  const appendLine = (record) => {
    const prefix = `[${record.cluster}/${record.pod}/${record.container}]`;
    const podKey = `${record.cluster}/${record.pod}`;
    if (!podsSeen.has(podKey)) {
      podsSeen.set(podKey, new Set());
    }
    if (!podsSeen.get(podKey).has(record.container)) {
      podsSeen.get(podKey).add(record.container);
      drawPods();
    }
    logBox.append(h("div", { class: "log-line" }, h("span", { class: "log-prefix" }, prefix), " ", record.line));
    lines += 1;
    if (lines > MAX_LOG_LINES) logBox.firstChild.remove();
    if (follow.checked) logBox.scrollTop = logBox.scrollHeight;
  };
  (async () => {
    let since = null;
    while (!controller.signal.aborted) {
      const query = since === null ? "follow=true" : `follow=true&sinceSeconds=${Math.max(1, Math.ceil((Date.now() - since) / 1000))}`;
      logState.textContent = "streaming";
      try {
        for await (const record of session.hub.stream(`${objectPath("workloads", namespace, name)}/log?${query}`, controller.signal)) {
          appendLine(record);
        }
        since = Date.now();
      } catch (error) {
        if (controller.signal.aborted) return;
        logState.textContent = error instanceof HubError ? error.message : "stream broken";
        since = Date.now();
      }
      const wl = watch.items.get(key);
      if (gone || (wl && isFinished(wl))) {
        logState.textContent = "ended";
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, LOG_RETRY_MS));
    }
  })();

  return () => {
    controller.abort();
    unsubscribe();
  };
}
